"""Search backends and the search-augmented systems built on them.

Backends (all with ``search(query, k) -> list[SearchResult]``, cached and retried):

* ``local`` — BM25 over a :class:`~trek.pages.PageStore`'s frozen corpus (offline, deterministic);
* ``tavily`` — Tavily's REST API (``TAVILY_API_KEY``);
* ``duckduckgo`` — the ``ddgs`` package;
* ``openai`` — OpenAI's built-in web search through the Responses API;
* ``proxy:MODEL`` — another model's built-in search, returning only a list of results.

:func:`make_backend` builds one from its command-line name. The systems (agentic,
search-then-read, no-search) live in :mod:`trek.search.agent`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from trek.search.base import (
    FatalSearchError,
    RejectedSearchError,
    SearchBackend,
    SearchCache,
    SearchError,
    SearchOutcome,
    SearchUnavailable,
    TransientSearchError,
)

if TYPE_CHECKING:  # pragma: no cover
    from trek.llm.client import LLMClient
    from trek.pages import PageStore

__all__ = [
    "BACKEND_NAMES",
    "FatalSearchError",
    "RejectedSearchError",
    "SearchBackend",
    "SearchCache",
    "SearchError",
    "SearchOutcome",
    "SearchUnavailable",
    "TransientSearchError",
    "make_backend",
]

BACKEND_NAMES = ("none", "local", "tavily", "duckduckgo", "openai", "proxy:MODEL")


def make_backend(
    spec: str,
    *,
    store: PageStore | None = None,
    client: LLMClient | None = None,
    search_client: LLMClient | None = None,
    cache: SearchCache | str | os.PathLike[str] | None = None,
    **kw: Any,
) -> SearchBackend | None:
    """The backend named ``spec`` (``None`` for ``none``).

    ``client`` is the evaluated model's client (used by ``openai``); ``search_client`` the client
    of the proxy model (defaults to ``client``). ``kw`` go to the backend's constructor.
    """
    spec = spec.strip()
    if spec in ("none", ""):
        return None
    if spec == "local":
        from trek.search.local import LocalSearch

        if store is None:
            raise ValueError("the local search backend needs a page store")
        return LocalSearch(store, cache=cache, **kw)
    if spec == "tavily":
        from trek.search.tavily import TavilySearch

        return TavilySearch(cache=cache, **kw)
    if spec in ("duckduckgo", "ddg", "ddgs"):
        from trek.search.duckduckgo import DuckDuckGoSearch

        return DuckDuckGoSearch(cache=cache, **kw)
    if spec == "openai":
        from trek.search.openai_search import OpenAISearch

        if client is None:
            raise ValueError("the openai search backend needs the evaluated model's LLM client")
        return OpenAISearch(client, cache=cache, **kw)
    if spec.startswith("proxy:"):
        from trek.search.proxy import ProxySearch

        c = search_client or client
        if c is None:
            raise ValueError("proxy search needs an LLM client for the proxy model")
        return ProxySearch(c, spec.split(":", 1)[1], cache=cache, **kw)
    raise ValueError(f"unknown search backend {spec!r}; choose one of {', '.join(BACKEND_NAMES)}")
