"""The search-backend interface, its cache and its retry policy.

Every backend answers ``search(query, k) -> list[SearchResult]`` (``asearch`` for async code).
:meth:`SearchBackend.acall` does the work: it looks the call up in a :class:`SearchCache`
(SQLite, keyed by the backend's name, the query, ``k`` and the backend's output-changing
parameters, never an API key), otherwise runs the backend with retries (capped exponential
backoff with jitter, ``Retry-After`` honoured) for transient failures: rate limits, 5xx replies,
timeouts, connection errors. It returns a :class:`SearchOutcome` holding the
:class:`~trek.types.SearchCall` record.

A search that still fails raises :class:`SearchUnavailable` (carrying the failed ``SearchCall``);
systems turn it into a pending trajectory, never into an answer. A query the service refuses (a
400 for this query alone) raises :class:`RejectedSearchError` (also carrying the call): that
question is marked failed and the run goes on. A failure no retry can fix and that dooms every
question (a missing or rejected API key, an exhausted plan) raises :class:`FatalSearchError` so
that the run stops with a message.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trek.llm.cache import request_key
from trek.llm.client import run_sync, scrub
from trek.sqlite import connect
from trek.types import SearchCall, SearchResult, Usage

__all__ = [
    "SearchError",
    "TransientSearchError",
    "SearchUnavailable",
    "RejectedSearchError",
    "FatalSearchError",
    "SearchCache",
    "SearchOutcome",
    "SearchBackend",
    "default_search_cache_path",
]


class SearchError(RuntimeError):
    """Base class of search failures."""


class TransientSearchError(SearchError):
    """A failure worth retrying (429, 5xx, timeout, connection error)."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class SearchUnavailable(SearchError):
    """A search that failed after its retries; ``call`` is the failed :class:`SearchCall`."""

    def __init__(self, message: str, call: SearchCall | None = None):
        super().__init__(message)
        self.call = call


class RejectedSearchError(SearchError):
    """The service refused this query (e.g. a 400 for an over-long query); other queries may
    work. ``call`` is the failed :class:`SearchCall`."""

    def __init__(self, message: str, call: SearchCall | None = None):
        super().__init__(message)
        self.call = call


class FatalSearchError(SearchError):
    """A misconfiguration no retry can fix and that dooms every search (missing/invalid key,
    exhausted plan)."""


def default_search_cache_path(run_dir: str | os.PathLike[str] | None = None) -> Path:
    """``$TREK_SEARCH_CACHE`` when set, else ``<run_dir>/search-cache.sqlite``."""
    env = os.environ.get("TREK_SEARCH_CACHE")
    if env:
        return Path(env)
    return Path(run_dir or ".") / "search-cache.sqlite"


_SCHEMA = """
CREATE TABLE IF NOT EXISTS searches (
    key        TEXT PRIMARY KEY,
    backend    TEXT NOT NULL,
    query      TEXT NOT NULL,
    request    TEXT NOT NULL,
    response   TEXT NOT NULL,
    created_at REAL NOT NULL
);
"""


class SearchCache:
    """Search results by request: one SQLite file in WAL mode, safe for several processes.

    Only successful searches are stored; the first stored answer for a request wins.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None):
        self.path = Path(path) if path is not None else None
        self._lock = threading.Lock()
        self._conn = connect(self.path, _SCHEMA)
        self.hits = 0
        self.misses = 0

    def lookup(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._conn.execute("SELECT response FROM searches WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def store(self, key: str, request: dict[str, Any], response: dict[str, Any]) -> None:
        req = json.dumps(request, sort_keys=True, ensure_ascii=False)
        resp = json.dumps(response, ensure_ascii=False)
        with self._lock:
            self._conn.execute(
                "INSERT OR IGNORE INTO searches (key, backend, query, request, response, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (key, str(request.get("backend")), str(request.get("query")), req, resp, time.time()),
            )

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM searches").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()


@dataclass
class SearchOutcome:
    """One finished search: the record, the model usage it cost (model-mediated backends) and
    whether it came from the cache."""

    call: SearchCall
    usage: Usage = field(default_factory=lambda: Usage(cost_usd=0.0))
    cached: bool = False

    @property
    def results(self) -> list[SearchResult]:
        return self.call.results


class SearchBackend:
    """Base class of search backends.

    Subclasses set :attr:`name`, implement :meth:`_search_once` (one attempt; raise
    :class:`TransientSearchError` for retryable failures) and, when their output depends on
    settings, :meth:`cache_params`.
    """

    name: str = "search"
    #: True for backends whose model answers with its own built-in search (see ``openai``).
    native: bool = False

    def __init__(
        self,
        *,
        cache: SearchCache | str | os.PathLike[str] | None = None,
        max_retries: int = 4,
        backoff_base: float = 1.0,
        backoff_cap: float = 30.0,
        max_concurrency: int = 4,
        default_k: int = 5,
        seed: int | None = None,
    ):
        self.cache = SearchCache(cache) if isinstance(cache, str | os.PathLike) else cache
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.max_concurrency = max_concurrency
        self.default_k = default_k
        self._rng = random.Random(seed)
        self._sems: dict[int, asyncio.Semaphore] = {}
        self.calls = 0
        self.attempts = 0
        self.cache_hits = 0
        self.failures = 0
        self.usage = Usage(cost_usd=0.0)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"

    # -- to override ----------------------------------------------------------------------------
    def cache_params(self) -> dict[str, Any]:
        """Settings that change the results (part of the cache key). Never include secrets."""
        return {}

    def secrets(self) -> Iterable[str | None]:
        """Strings that must never appear in an error message or a record."""
        return ()

    def describe(self) -> dict[str, Any]:
        """The backend's configuration as recorded in a trajectory's ``system`` dict."""
        return {"search": self.name, **self.cache_params()}

    async def _search_once(self, query: str, k: int) -> list[SearchResult] | tuple[list[SearchResult], Usage]:
        raise NotImplementedError

    async def aclose(self) -> None:
        """Release clients bound to the current event loop."""

    # -- the interface --------------------------------------------------------------------------
    def _semaphore(self) -> asyncio.Semaphore:
        loop_id = id(asyncio.get_running_loop())
        sem = self._sems.get(loop_id)
        if sem is None:
            sem = asyncio.Semaphore(self.max_concurrency)
            self._sems = {loop_id: sem}
        return sem

    def cache_request(self, query: str, k: int) -> dict[str, Any]:
        return {"backend": self.name, "query": query, "k": int(k), "params": self.cache_params()}

    def _scrub(self, text: str) -> str:
        return scrub(text, list(self.secrets()))

    async def acall(self, query: str, k: int | None = None) -> SearchOutcome:
        """Run (or fetch from the cache) one search; raise :class:`SearchUnavailable` on failure."""
        k = int(k or self.default_k)
        query = query.strip()
        self.calls += 1
        if not query:
            call = SearchCall(query=query, backend=self.name, results=[], error="empty query")
            return SearchOutcome(call=call)
        creq = self.cache_request(query, k)
        key = request_key(creq)
        if self.cache is not None:
            hit = self.cache.lookup(key)
            if hit is not None:
                self.cache_hits += 1
                self.cache.hits += 1
                results = [SearchResult.model_validate(r) for r in hit.get("results", [])]
                usage = Usage.model_validate(hit.get("usage") or {"cost_usd": 0.0})
                usage = usage.model_copy(update={"cached_calls": usage.calls})
                return SearchOutcome(SearchCall(query=query, backend=self.name, results=results), usage, True)
        last: Exception | None = None
        out: list[SearchResult] | tuple[list[SearchResult], Usage] | None = None
        for attempt in range(self.max_retries + 1):
            try:
                async with self._semaphore():
                    self.attempts += 1
                    out = await self._search_once(query, k)
                break
            except SearchUnavailable as e:
                self.failures += 1
                msg = self._scrub(str(e))
                raise SearchUnavailable(msg, SearchCall(query=query, backend=self.name, error=msg)) from None
            except RejectedSearchError as e:
                self.failures += 1
                msg = self._scrub(str(e))
                raise RejectedSearchError(msg, SearchCall(query=query, backend=self.name, error=msg)) from None
            except FatalSearchError as e:
                raise FatalSearchError(self._scrub(str(e))) from None
            except (TransientSearchError, TimeoutError) as e:
                last = e
                if attempt == self.max_retries:
                    break
                delay = min(self.backoff_cap, self.backoff_base * (2**attempt))
                delay = self._rng.uniform(delay / 2, delay)
                retry_after = getattr(e, "retry_after", None)
                if retry_after is not None:
                    delay = max(delay, min(float(retry_after), self.backoff_cap))
                await asyncio.sleep(delay)
        if out is None:
            self.failures += 1
            detail = (str(last) or type(last).__name__) if last is not None else "no result"
            msg = self._scrub(f"{self.name} search failed after {self.max_retries + 1} attempts: {detail}")
            raise SearchUnavailable(msg, SearchCall(query=query, backend=self.name, error=msg))
        results, usage = out if isinstance(out, tuple) else (out, Usage(cost_usd=0.0))
        results = [r for r in results if r.url.strip()][:k]
        self.usage = self.usage + usage.model_copy(update={"cost_usd": usage.cost_usd or 0.0})
        if self.cache is not None:
            self.cache.misses += 1
            self.cache.store(
                key, creq, {"results": [r.model_dump() for r in results], "usage": usage.model_dump()}
            )
        return SearchOutcome(SearchCall(query=query, backend=self.name, results=results), usage, False)

    async def asearch(self, query: str, k: int | None = None) -> list[SearchResult]:
        """The ranked results of one search (cached, retried)."""
        return (await self.acall(query, k)).results

    def search(self, query: str, k: int | None = None) -> list[SearchResult]:
        """Synchronous :meth:`asearch` (works inside notebooks too)."""

        async def go() -> list[SearchResult]:
            try:
                return await self.asearch(query, k)
            finally:
                await self.aclose()

        return run_sync(go())
