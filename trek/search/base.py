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

import os
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from trek.aio import run_sync
from trek.errors import RunFatalError
from trek.limits import EndpointLimits
from trek.llm.cache import ResponseCache
from trek.llm.client import scrub
from trek.retry import backoff, retrying
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


class FatalSearchError(SearchError, RunFatalError):
    """A misconfiguration no retry can fix and that dooms every search (missing/invalid key,
    exhausted plan)."""



#: Search results are cached in the one response-cache shape of Trek (keyed by the canonical
#: search request: backend, query, k and result-changing settings; never a key).
SearchCache = ResponseCache


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
        self._limits = EndpointLimits()  # max_concurrency, one semaphore per event loop
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

        async def once() -> dict[str, Any]:
            async with self._limits.semaphore("search", self.max_concurrency):
                self.attempts += 1
                out = await self._search_once(query, k)
            results, usage = out if isinstance(out, tuple) else (out, Usage(cost_usd=0.0))
            results = [r for r in results if r.url.strip()][:k]
            return {"results": [r.model_dump() for r in results], "usage": usage.model_dump()}

        async def search() -> dict[str, Any]:
            try:
                return await retrying(
                    once, retry_on=(TransientSearchError, TimeoutError), max_retries=self.max_retries,
                    wait=backoff(self.backoff_base, self.backoff_cap, self._rng),
                )
            except (SearchUnavailable, RejectedSearchError) as e:
                self.failures += 1
                msg = self._scrub(str(e))
                raise type(e)(msg, SearchCall(query=query, backend=self.name, error=msg)) from None
            except FatalSearchError as e:
                raise FatalSearchError(self._scrub(str(e))) from None
            except (TransientSearchError, TimeoutError) as e:
                self.failures += 1
                detail = str(e) or type(e).__name__
                msg = self._scrub(f"{self.name} search failed after {self.max_retries + 1} attempts: {detail}")
                raise SearchUnavailable(msg, SearchCall(query=query, backend=self.name, error=msg)) from None

        if self.cache is not None:
            raw, cached = await self.cache.get(creq, search)
        else:
            raw, cached = await search(), False
        results = [SearchResult.model_validate(r) for r in raw.get("results", [])]
        usage = Usage.model_validate(raw.get("usage") or {"cost_usd": 0.0})
        if cached:
            self.cache_hits += 1
            usage = usage.model_copy(update={"cached_calls": usage.calls})
        else:
            self.usage = self.usage + usage.model_copy(update={"cost_usd": usage.cost_usd or 0.0})
        return SearchOutcome(SearchCall(query=query, backend=self.name, results=results), usage, cached)

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
