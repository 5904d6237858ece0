"""``local``: BM25 over the frozen pages of a :class:`~trek.pages.PageStore`.

The embedded default backend. It needs no network and no key, so the bundled demo benchmark runs
offline, and it is deterministic: documents are scored with ``bm25s`` and ranked by score, ties
broken by URL identity. Only frozen-corpus pages are indexed (pages fetched live during a run are
not), so the ranking never depends on the order in which questions ran. The index is rebuilt when
the corpus changes (its fingerprint is part of the cache key).
"""

from __future__ import annotations

import re
import threading
from typing import Any

from trek.pages import Page, PageStore
from trek.search.base import FatalSearchError, SearchBackend
from trek.types import SearchResult

__all__ = ["LocalSearch"]

_WORD = re.compile(r"(?u)\b\w\w+\b")
#: The error of a search over an empty corpus (every query would answer "no results").
EMPTY_CORPUS = (
    "the local search index is empty: the page store {store} holds no corpus pages. Load pages into it "
    "(trek pages add RUN FILE...; --questions mini brings its own corpus), or search the web with --search "
    "tavily, duckduckgo, openai or proxy:MODEL, or answer without search (--search none)"
)
_SNIPPET_CHARS = 300


class LocalSearch(SearchBackend):
    """BM25 search over the store's frozen corpus (title and text of every page)."""

    name = "local"

    def __init__(self, store: PageStore, *, k1: float = 1.5, b: float = 0.75, **kw: Any):
        super().__init__(**kw)
        self.store = store
        self.k1 = k1
        self.b = b
        self._lock = threading.Lock()
        self._index: Any = None
        self._pages: list[Page] = []
        self._indexed: str | None = None

    def cache_params(self) -> dict[str, Any]:
        return {"corpus": self.store.fingerprint(), "k1": self.k1, "b": self.b}

    def describe(self) -> dict[str, Any]:
        return {"search": self.name, "corpus": self.store.fingerprint()}

    def _ensure_index(self) -> None:
        fp = self.store.fingerprint()
        with self._lock:
            if self._indexed == fp:
                return
            try:
                import bm25s
            except ImportError:
                raise FatalSearchError(
                    "the local search backend needs the 'bm25s' package (pip install bm25s)"
                ) from None
            pages = list(self.store.pages("corpus"))
            if not pages:
                raise FatalSearchError(EMPTY_CORPUS.format(store=self.store.path or "(in memory)"))
            self._pages = pages
            if pages:
                corpus = [f"{p.title}\n{p.text}" for p in pages]
                tokens = bm25s.tokenize(corpus, stopwords="en", show_progress=False)
                index = bm25s.BM25(k1=self.k1, b=self.b)
                index.index(tokens, show_progress=False)
                self._index = index
            else:
                self._index = None
            self._indexed = fp

    def rank(self, query: str, k: int) -> list[tuple[Page, float]]:
        """The top ``k`` pages with a positive score, best first (synchronous, deterministic)."""
        self._ensure_index()
        if self._index is None:
            return []
        import bm25s

        q_tokens = bm25s.tokenize([query], stopwords="en", return_ids=False, show_progress=False)[0]
        if not q_tokens:
            return []
        import numpy as np

        scores = np.asarray(self._index.get_scores(q_tokens), dtype=np.float64)
        hits = np.flatnonzero(scores > 0.0)
        if len(hits) > k:
            # only the pages scoring at least the k-th best can be among the top k (ties included),
            # so a query costs one pass over the scores, not a sort of the whole corpus
            kth = np.partition(scores[hits], len(hits) - k)[len(hits) - k]
            hits = hits[scores[hits] >= kth]
        order = sorted(hits.tolist(), key=lambda i: (-float(scores[i]), self._pages[i].key))
        return [(self._pages[i], float(scores[i])) for i in order[:k]]

    async def _search_once(self, query: str, k: int) -> list[SearchResult]:
        return [
            SearchResult(url=p.url, title=p.title, snippet=snippet(p.text, query), date=p.date)
            for p, _ in self.rank(query, k)
        ]


def snippet(text: str, query: str, width: int = _SNIPPET_CHARS) -> str:
    """A window of ``text`` around the first occurrence of a query word (the head otherwise)."""
    words = {w.lower() for w in _WORD.findall(query) if len(w) > 2}
    start = 0
    if words:
        for m in _WORD.finditer(text):
            if m.group(0).lower() in words:
                start = max(0, m.start() - width // 3)
                break
    piece = " ".join(text[start : start + width].split())
    prefix = "..." if start > 0 else ""
    suffix = "..." if start + width < len(text) else ""
    return prefix + piece + suffix
