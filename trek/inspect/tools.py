"""The tool ``trek/search``: Trek's search backends as an inspect tool.

Each call goes through Trek's backend (:mod:`trek.search`: ``local`` BM25 over a page store,
``tavily``, ``duckduckgo``) and its search cache, and answers with one text part per result whose
citation holds the result's URL, title and snippet, so the transcript records exactly what was
retrieved (``trek import inspect-ai`` and ``trek/trektrace`` read these citations as the search's
results). The model sees the tool as ``search(query)``.
"""

from __future__ import annotations

from typing import Any

from inspect_ai.tool import ContentText, Tool, ToolError, UrlCitation, tool

from trek import runs
from trek.inspect._names import name
from trek.pages import PageStore

__all__ = ["search", "make_search_backend", "BACKENDS", "mini_store"]

#: The backends the tool offers.
BACKENDS = ("local", "tavily", "duckduckgo")

_MINI_STORE: PageStore | None = None


def mini_store() -> PageStore:
    """An in-memory page store of TrekBench-Mini's hand-written pages (its search corpus; built once)."""
    global _MINI_STORE
    if _MINI_STORE is None:
        from trek.inspect.transcript import MINI_CORPUS, corpus_documents

        store = PageStore(None)
        store.add_documents(corpus_documents({"corpus": MINI_CORPUS}))
        _MINI_STORE = store
    return _MINI_STORE


def make_search_backend(backend: str = "local", *, pages: str | None = None, cache: str | None = None) -> Any:
    """The Trek backend behind the tool: ``local`` searches ``pages`` (a ``pages.sqlite``, or a
    folder holding one; default TrekBench-Mini's pages); ``cache`` is the search cache file (default
    for the web backends: Trek's search cache, ``$TREK_SEARCH_CACHE`` or ``search-cache.sqlite`` here;
    none for the deterministic local search)."""
    from pathlib import Path

    from trek.search import make_backend
    from trek.search.base import SearchCache

    if backend not in BACKENDS:
        raise ValueError(f"search backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    path = cache or (None if backend == "local" else runs.default_search_cache_path(None))
    store = None
    if backend == "local":
        if pages is None:
            store = mini_store()
        else:
            p = Path(pages)
            p = p / runs.PAGES if p.is_dir() else p
            if not p.exists():
                raise ValueError(f"pages={pages}: no page store there (a pages.sqlite file, or a folder holding one)")
            store = PageStore(p)
    return make_backend(backend, store=store, cache=SearchCache(path) if path else None)


def _result_text(i: int, r: Any) -> str:
    head = f"[{i}] {r.title}".rstrip() + f"\n{r.url}"
    return head + (f"\n{r.snippet}" if r.snippet else "")


@tool(name=name("search"))
def search(backend: str = "local", results: int = 5, pages: str | None = None, cache: str | None = None) -> Tool:
    """Trek's search as a tool (module docstring): ``backend`` local, tavily or duckduckgo,
    ``results`` per search, ``pages`` the local backend's page store."""
    engine = make_search_backend(backend, pages=pages, cache=cache)

    async def execute(query: str) -> str | list[ContentText]:
        """Search the web and return the top results (title, URL and a snippet of each).

        Args:
            query: What to search for.
        """
        from trek.search.base import SearchError

        try:
            found = await engine.asearch(query, results)
        except SearchError as e:
            raise ToolError(str(e)) from None
        if not found:
            return "No results."
        return [ContentText(text=_result_text(i, r),
                            citations=[UrlCitation(url=r.url, title=r.title or None, cited_text=r.snippet or None)])
                for i, r in enumerate(found, start=1)]

    return execute
