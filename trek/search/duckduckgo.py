"""``duckduckgo``: text search through the ``ddgs`` package (``DDGS().text``).

``ddgs`` is imported only when a search runs (``pip install ddgs``). It is synchronous, so each
call runs in a worker thread. Its rate-limit and timeout exceptions are retried by the base class;
"no results" is an empty result list, not a failure.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

from trek.search.base import FatalSearchError, SearchBackend, TransientSearchError
from trek.types import SearchResult

__all__ = ["DuckDuckGoSearch", "parse_ddgs"]


class DuckDuckGoSearch(SearchBackend):
    """DuckDuckGo via ``ddgs``; ``engine`` is ddgs's ``backend`` argument."""

    name = "duckduckgo"

    def __init__(
        self,
        *,
        region: str = "us-en",
        safesearch: str = "moderate",
        engine: str = "duckduckgo",
        timeout: int = 20,
        **kw: Any,
    ):
        kw.setdefault("max_concurrency", 2)
        super().__init__(**kw)
        self.region = region
        self.safesearch = safesearch
        self.engine = engine
        self.timeout = timeout

    def cache_params(self) -> dict[str, Any]:
        return {"region": self.region, "safesearch": self.safesearch, "engine": self.engine}

    def _text(self, query: str, k: int) -> list[dict[str, Any]]:
        """One blocking ``DDGS().text`` call, exceptions mapped to Trek's search errors."""
        try:
            from ddgs import DDGS
            from ddgs.exceptions import DDGSException, RatelimitException, TimeoutException
        except ImportError:
            raise FatalSearchError(
                "the duckduckgo search backend needs the 'ddgs' package (pip install ddgs)"
            ) from None
        count = {_count_keyword(DDGS): k}
        try:
            with DDGS(timeout=self.timeout) as ddgs:
                return list(
                    ddgs.text(
                        query, region=self.region, safesearch=self.safesearch, backend=self.engine, **count
                    )
                    or []
                )
        except RatelimitException as e:
            raise TransientSearchError(f"rate limited by DuckDuckGo: {e}") from None
        except TimeoutException as e:
            raise TransientSearchError(f"DuckDuckGo timed out: {e}") from None
        except DDGSException as e:
            if "no results" in str(e).lower():
                return []
            raise TransientSearchError(f"DuckDuckGo search failed: {e}") from None

    async def _search_once(self, query: str, k: int) -> list[SearchResult]:
        return parse_ddgs(await asyncio.to_thread(self._text, query, k))[:k]


def _count_keyword(ddgs_cls: Any) -> str:
    """``num_results`` for ddgs releases that use it, else the older ``max_results``."""
    for fn in (getattr(ddgs_cls, "text", None), getattr(ddgs_cls, "_search", None)):
        try:
            if fn is not None and "num_results" in inspect.signature(fn).parameters:
                return "num_results"
        except (TypeError, ValueError):
            continue
    return "max_results"


def parse_ddgs(items: list[dict[str, Any]]) -> list[SearchResult]:
    """Results of ``DDGS().text`` (``title``, ``href``, ``body``; news items use ``url``/``date``)."""
    out = []
    for item in items:
        if not isinstance(item, dict):
            continue
        url = item.get("href") or item.get("url")
        if not url:
            continue
        out.append(
            SearchResult(
                url=str(url),
                title=str(item.get("title") or ""),
                snippet=str(item.get("body") or ""),
                date=str(item["date"]) if item.get("date") else None,
            )
        )
    return out
