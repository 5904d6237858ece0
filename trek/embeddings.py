"""Text embeddings: the Ctrl fabrication similarity check (paper D.3: cosine >= 0.90) and the
offline relevance scorer of the Rerank baseline (:class:`trek.rag.rerank.EmbeddingScorer`).

Two embedders share one interface, ``embed(texts) -> numpy array (n, d)``:

* :class:`WordLlamaEmbedder` (default, offline): ``wordllama`` ships its static token embeddings
  in the PyPI wheel and needs only numpy; it is loaded from its own package folder with downloads
  disabled, so it never touches the network.
* :class:`OpenAIEmbedder`: any OpenAI-compatible ``/v1/embeddings`` endpoint (the paper used
  ``text-embedding-3-small``); key and base URL from the environment unless given.

:func:`make_embedder` turns a spec string (``wordllama`` or ``openai:MODEL``) into one.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import numpy as np

__all__ = ["Embedder", "WordLlamaEmbedder", "OpenAIEmbedder", "cosine", "make_embedder"]


class Embedder(Protocol):
    name: str

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Cosine similarity of two vectors (0.0 when either is all zeros)."""
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0.0 or nb == 0.0:
        return 0.0
    return float(np.dot(a, b) / (na * nb))


@contextmanager
def _keep_root_logging():
    """``wordllama`` calls ``logging.basicConfig(level=INFO)`` when its modules load, which would
    print every HTTP request of the process; undo whatever it adds to the root logger."""
    import logging

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        for h in root.handlers[:]:
            if h not in handlers:
                root.removeHandler(h)
        root.setLevel(level)


@lru_cache(maxsize=2)
def _wordllama(dim: int) -> Any:
    with _keep_root_logging():
        import wordllama

        folder = Path(wordllama.__file__).resolve().parent
        return wordllama.WordLlama.load(dim=dim, cache_dir=folder, disable_download=True)


class WordLlamaEmbedder:
    """Offline static embeddings from the ``wordllama`` wheel (256 dimensions by default)."""

    def __init__(self, dim: int = 256):
        self.dim = dim
        self.name = f"wordllama-{dim}"
        _wordllama(dim)  # load now, before any concurrent work starts

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        with _keep_root_logging():
            return np.asarray(_wordllama(self.dim).embed(list(texts)), dtype=np.float64)


class OpenAIEmbedder:
    """Embeddings from an OpenAI-compatible endpoint (``text-embedding-3-small`` by default)."""

    def __init__(self, model: str = "text-embedding-3-small", *, base_url: str | None = None,
                 api_key: str | None = None, timeout: float = 60.0):
        import openai

        self.model = model
        self.name = f"openai:{model}"
        self._client = openai.OpenAI(
            base_url=base_url or os.environ.get("OPENAI_BASE_URL") or None,
            api_key=api_key or os.environ.get("OPENAI_API_KEY") or "sk-no-key",
            timeout=timeout,
        )

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        res = self._client.embeddings.create(model=self.model, input=list(texts))
        rows = sorted(res.data, key=lambda r: r.index)
        return np.asarray([r.embedding for r in rows], dtype=np.float64)


def make_embedder(spec: str | None = "wordllama", *, base_url: str | None = None) -> Embedder:
    """``wordllama`` (offline default) or ``openai:MODEL``."""
    if spec in (None, "", "wordllama"):
        return WordLlamaEmbedder()
    if spec.startswith("openai:"):
        return OpenAIEmbedder(spec.split(":", 1)[1] or "text-embedding-3-small", base_url=base_url)
    raise ValueError(f"unknown embedder {spec!r}: use 'wordllama' or 'openai:MODEL'")
