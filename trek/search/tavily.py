"""``tavily``: Tavily's web search REST API (``POST /search``), called with httpx.

The key comes from ``TAVILY_API_KEY`` (or the constructor) and is sent only in the
``Authorization`` header; it never enters the cache key, a record or an error message.
A 429 (honouring ``Retry-After``), 5xx replies, timeouts and connection errors are retried by the
base class; a 400/422 (a query Tavily refuses) fails that question only; 401/403 and Tavily's
plan-limit codes (432, 433) stop the run with a message.
"""

from __future__ import annotations

import os
from typing import Any

import httpx

from trek.retry import retry_after
from trek.search.base import FatalSearchError, RejectedSearchError, SearchBackend, TransientSearchError
from trek.types import SearchResult

__all__ = ["TavilySearch", "DEFAULT_TAVILY_URL"]

DEFAULT_TAVILY_URL = "https://api.tavily.com"


class TavilySearch(SearchBackend):
    """Tavily search. ``search_depth`` and ``topic`` are passed through (they change results)."""

    name = "tavily"

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str | None = None,
        search_depth: str = "basic",
        topic: str = "general",
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
        **kw: Any,
    ):
        super().__init__(**kw)
        self._api_key = api_key or os.environ.get("TAVILY_API_KEY") or ""
        if not self._api_key:
            raise FatalSearchError("the tavily search backend needs an API key: set TAVILY_API_KEY")
        self.base_url = (base_url or os.environ.get("TAVILY_BASE_URL") or DEFAULT_TAVILY_URL).rstrip("/")
        self.search_depth = search_depth
        self.topic = topic
        self.timeout = timeout
        self._transport = transport

    def __repr__(self) -> str:  # never show the key
        return f"TavilySearch(base_url={self.base_url!r}, search_depth={self.search_depth!r})"

    def secrets(self) -> list[str]:
        return [self._api_key]

    def cache_params(self) -> dict[str, Any]:
        return {"endpoint": self.base_url, "search_depth": self.search_depth, "topic": self.topic}

    def describe(self) -> dict[str, Any]:
        return {"search": self.name, "search_depth": self.search_depth, "topic": self.topic}

    async def _search_once(self, query: str, k: int) -> list[SearchResult]:
        body = {
            "query": query,
            "max_results": k,
            "search_depth": self.search_depth,
            "topic": self.topic,
            "include_answer": False,
            "include_raw_content": False,
            "include_images": False,
        }
        headers = {"Authorization": f"Bearer {self._api_key}", "Content-Type": "application/json"}
        kwargs: dict[str, Any] = {"timeout": self.timeout}
        if self._transport is not None:
            kwargs["transport"] = self._transport
        else:
            from trek.pages import shared_ssl_context

            kwargs["verify"] = shared_ssl_context()
        try:
            async with httpx.AsyncClient(**kwargs) as http:
                resp = await http.post(f"{self.base_url}/search", json=body, headers=headers)
        except httpx.TimeoutException:
            raise TransientSearchError(
                f"timed out after {self.timeout:g}s waiting for {self.base_url}"
            ) from None
        except httpx.TransportError as e:
            raise TransientSearchError(f"connection error to {self.base_url}: {type(e).__name__}") from None
        status = resp.status_code
        if status == 429:
            raise TransientSearchError(f"429 rate limited by {self.base_url}", retry_after(resp.headers))
        if status >= 500 or status in (408, 409):
            raise TransientSearchError(f"{status} from {self.base_url}")
        if status in (400, 422):
            raise RejectedSearchError(f"{status} from {self.base_url}: {_detail(resp)} (Tavily refused this query)")
        if status != 200:
            hint = {
                401: "check TAVILY_API_KEY",
                403: "the key is not allowed to use this endpoint",
                432: "the Tavily plan's credit limit is reached",
                433: "the Tavily pay-as-you-go limit is reached",
            }.get(status, "the request was rejected")
            raise FatalSearchError(f"{status} from {self.base_url}: {_detail(resp)} ({hint})")
        try:
            data = resp.json()
        except ValueError:
            raise TransientSearchError(f"malformed JSON body from {self.base_url}") from None
        if not isinstance(data, dict) or not isinstance(data.get("results"), list):
            raise TransientSearchError(f"unexpected reply shape from {self.base_url}")
        return parse_tavily(data)


def parse_tavily(data: dict[str, Any]) -> list[SearchResult]:
    """Results of a Tavily ``/search`` reply, in Tavily's order."""
    out = []
    for item in data.get("results") or []:
        if not isinstance(item, dict) or not item.get("url"):
            continue
        out.append(
            SearchResult(
                url=str(item["url"]),
                title=str(item.get("title") or ""),
                snippet=str(item.get("content") or ""),
                date=str(item["published_date"]) if item.get("published_date") else None,
            )
        )
    return out


def _detail(resp: httpx.Response) -> str:
    try:
        data = resp.json()
    except ValueError:
        return resp.text[:200]
    if isinstance(data, dict):
        d = data.get("detail", data)
        if isinstance(d, dict):
            return str(d.get("error") or d)[:200]
        return str(d)[:200]
    return str(data)[:200]
