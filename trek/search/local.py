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
from collections.abc import Iterator
from typing import Any

from trek.pages import Page, PageStore
from trek.search.base import FatalSearchError, SearchBackend
from trek.stage import Strings
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
    """BM25 search over the store's frozen corpus (title and text of every page).

    The index keeps ``bm25s``'s score matrix (one column of per-page scores per token) and the
    pages' keys, not the pages: a query adds up only the columns of its own tokens, so it costs
    the length of those postings, not the size of the corpus, and the few pages it returns are
    read back from the store."""

    name = "local"

    def __init__(self, store: PageStore, *, k1: float = 1.5, b: float = 0.75, **kw: Any):
        super().__init__(**kw)
        self.store = store
        self.k1 = k1
        self.b = b
        self._lock = threading.Lock()
        self._index: Any = None
        self._keys: Strings = Strings()  # packed: a few bytes over each key's own length a page
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
            keys = Strings()

            def texts() -> Iterator[str]:  # one page at a time: no list of the pages or their texts
                for p in self.store.pages("corpus"):
                    keys.append(p.key)
                    yield f"{p.title}\n{p.text}"

            tokens = bm25s.tokenize(texts(), stopwords="en", show_progress=False)
            if not keys:
                raise FatalSearchError(EMPTY_CORPUS.format(store=self.store.path or "(in memory)"))
            index = bm25s.BM25(k1=self.k1, b=self.b)
            index.index(tokens, show_progress=False)
            del tokens
            self._index, self._keys, self._indexed = index, keys, fp

    @staticmethod
    def _scores(index: Any, query: str) -> tuple[Any, Any]:
        """The pages whose text holds a query token (index positions, ascending) and their BM25
        scores: ``bm25s``'s ``get_scores`` restricted to those pages, the same float32 sums
        added in the same order (a token repeated in the query counts again)."""
        import bm25s
        import numpy as np

        q_tokens = bm25s.tokenize([query], stopwords="en", return_ids=False, show_progress=False)[0]
        vocab = index.vocab_dict
        ids = [vocab[t] for t in q_tokens if t in vocab]
        m = index.scores
        if not ids or index.nonoccurrence_array is not None:
            if ids:  # BM25 variants that score every page (a method not used here): the full vector
                full = np.asarray(index.get_scores(ids), dtype=np.float64)
                return np.arange(len(full)), full
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        indptr, indices, data = m["indptr"], m["indices"], m["data"]
        spans = [(int(indptr[t]), int(indptr[t + 1])) for t in ids]
        docs = np.concatenate([indices[a:b] for a, b in spans])
        vals = np.concatenate([data[a:b] for a, b in spans])
        pages, where = np.unique(docs, return_inverse=True)
        sums = np.zeros(len(pages), dtype=np.dtype(index.dtype))
        np.add.at(sums, where, vals)  # unbuffered, in order: per page the sums of get_scores
        return pages, sums.astype(np.float64)

    def rank(self, query: str, k: int) -> list[tuple[Page, float]]:
        """The top ``k`` pages with a positive score, best first, ties broken by page key
        (synchronous, deterministic)."""
        self._ensure_index()
        import numpy as np

        with self._lock:
            index, keys = self._index, self._keys
        pages, scores = self._scores(index, query)
        hits = np.flatnonzero(scores > 0.0)
        if len(hits) > k:
            # only the pages scoring at least the k-th best can be among the top k (ties included)
            kth = np.partition(scores[hits], len(hits) - k)[len(hits) - k]
            hits = hits[scores[hits] >= kth]
        order = sorted(hits.tolist(), key=lambda h: (-float(scores[h]), keys[pages[h]]))[:k]
        top = [(keys[pages[h]], float(scores[h])) for h in order]
        found = self.store.corpus_pages([key for key, _ in top])
        missing = [key for key, _ in top if key not in found]
        if missing:
            raise FatalSearchError(f"the local search index of {self.store.path or '(in memory)'} names page "
                                   f"{missing[0]!r}, which the store no longer holds as a corpus page")
        return [(found[key], s) for key, s in top]

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
