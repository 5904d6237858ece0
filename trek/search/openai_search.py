"""``openai``: OpenAI's built-in web search through the Responses API.

The model searches with the hosted ``web_search`` tool. Its reply holds ``web_search_call`` output
items, whose ``action`` says what was done (``search`` with ``query``/``queries`` and, when the
request asks for ``include=["web_search_call.action.sources"]``, the ``sources`` it read;
``open_page``; ``find_in_page``, called ``find`` in older replies), and message text whose ``url_citation`` annotations name the
pages cited. :func:`parse_web_search_output` turns all of it into Trek records so that failure
attribution can analyse the queries and every returned URL, not only the citations.

Two uses:

* as a native system (``--search openai`` with the agentic system): the evaluated model answers
  in one Responses call with the tool enabled; see :mod:`trek.search.agent`;
* as a plain backend (:class:`OpenAISearch.search`): the model is asked to search for a query
  and list what it found; the results are the sources and citations of that call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trek.llm.client import LLMClient
from trek.pages import strip_openai_tracking
from trek.search.base import SearchBackend, SearchUnavailable
from trek.templates import register, render, template_version
from trek.types import SearchCall, SearchResult, TrajectoryStep

__all__ = [
    "OpenAISearch",
    "NativeSearchTrace",
    "parse_web_search_output",
    "INCLUDE_SOURCES",
    "SEARCH_ONLY_PROMPT",
]

#: Ask the Responses API to return the full list of sources of each search action.
INCLUDE_SOURCES = ["web_search_call.action.sources"]

SEARCH_ONLY_VERSION = "openai-search-1"
SEARCH_ONLY_PROMPT = register(
    "search.openai",
    """\
Use web search to look up the query below, then list the pages you found, most relevant first, \
at most {k}, one per line as "title - URL". Do not answer the query itself.

Query: {query}""",
)


@dataclass
class NativeSearchTrace:
    """What one Responses reply with the ``web_search`` tool did.

    ``searches`` has one :class:`SearchCall` per search query, in order. One ``search`` action can
    run several queries (``queries``) while the API lists its ``sources`` once per action, so
    every query of an action is recorded with that action's sources and the action's index in
    ``SearchCall.action``. ``opened`` are the pages of ``open_page`` / ``find_in_page`` actions,
    ``citations`` the ``url_citation`` annotations of the answer text, ``steps`` every action in
    order (round 1: the whole reply is one model turn).

    Every URL read from the reply has OpenAI's ``utm_source=openai`` tracking parameter removed
    (:func:`~trek.pages.strip_openai_tracking`) so that a cited page and the same page among a
    search's sources have one identity; nothing else in the URL is changed. The raw reply,
    parameter included, stays in the trajectory's ``messages``.
    """

    searches: list[SearchCall] = field(default_factory=list)
    opened: list[str] = field(default_factory=list)
    citations: list[SearchResult] = field(default_factory=list)
    steps: list[TrajectoryStep] = field(default_factory=list)
    answer: str | None = None
    failed_actions: int = 0

    def results(self) -> list[SearchResult]:
        """Sources of all searches in order, then cited pages not among them (exact URLs)."""
        seen: set[str] = set()
        out: list[SearchResult] = []
        for r in [r for c in self.searches for r in c.results] + self.citations:
            if r.url not in seen:
                seen.add(r.url)
                out.append(r)
        return out

    def retrieved_urls(self) -> list[str]:
        """Every URL the reply shows the model met: search sources and opened pages in action
        order, then cited pages; exact duplicates removed keeping the first."""
        urls: list[str] = []
        for step in self.steps:
            urls.extend(step.result_urls)
            if step.kind == "open" and step.url:
                urls.append(step.url)
        urls.extend(c.url for c in self.citations)
        seen: set[str] = set()
        return [u for u in urls if not (u in seen or seen.add(u))]


def parse_web_search_output(raw: dict[str, Any], backend: str = "openai", round: int = 1) -> NativeSearchTrace:
    """Read the ``output`` of a Responses API reply (a dict, as returned over the wire)."""
    trace = NativeSearchTrace()
    texts: list[str] = []
    action_index = -1
    for item in raw.get("output") or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "web_search_call":
            action_index += 1
            action = item.get("action") or {}
            failed = item.get("status") in ("failed", "incomplete")
            trace.failed_actions += int(failed)
            error = f"web_search_call {item.get('status')}" if failed else None
            atype = action.get("type")
            if atype == "search" or (atype is None and (action.get("query") or action.get("queries"))):
                queries: list[str] = []
                for q in [action.get("query"), *(action.get("queries") or [])]:
                    if isinstance(q, str) and q.strip() and q not in queries:
                        queries.append(q)
                sources = [
                    SearchResult(url=strip_openai_tracking(str(s["url"])))
                    for s in action.get("sources") or []
                    if isinstance(s, dict) and s.get("url")  # "api" sources have a name, no URL
                ]
                for q in queries or [""]:
                    trace.steps.append(
                        TrajectoryStep(
                            kind="search",
                            round=round,
                            tool="web_search",
                            call_id=item.get("id"),
                            query=q,
                            result_urls=[r.url for r in sources],
                            search_index=len(trace.searches),
                            error=error,
                        )
                    )
                    trace.searches.append(
                        SearchCall(
                            query=q,
                            backend=backend,
                            results=list(sources),
                            error=error,
                            round=round,
                            action=action_index,
                        )
                    )
            elif atype in ("open_page", "find_in_page", "find"):  # older logs call find_in_page "find"
                url = action.get("url")
                url = strip_openai_tracking(url) if isinstance(url, str) else None
                pattern = action.get("pattern")
                trace.steps.append(
                    TrajectoryStep(
                        kind="open",
                        round=round,
                        tool=atype,
                        call_id=item.get("id"),
                        url=url or None,
                        query=pattern if isinstance(pattern, str) else None,
                        error=error,
                    )
                )
                if url and url not in trace.opened:
                    trace.opened.append(url)
        elif kind == "message":
            for part in item.get("content") or []:
                if not isinstance(part, dict) or part.get("type") != "output_text":
                    continue
                texts.append(str(part.get("text") or ""))
                for ann in part.get("annotations") or []:
                    if isinstance(ann, dict) and ann.get("type") == "url_citation" and ann.get("url"):
                        trace.citations.append(
                            SearchResult(
                                url=strip_openai_tracking(str(ann["url"])), title=str(ann.get("title") or "")
                            )
                        )
    trace.answer = "".join(texts) if texts else None
    titles = {c.url: c.title for c in trace.citations if c.title}
    if titles:
        for call in trace.searches:
            call.results = [
                r.model_copy(update={"title": titles[r.url]}) if not r.title and r.url in titles else r
                for r in call.results
            ]
    return trace


class OpenAISearch(SearchBackend):
    """OpenAI's hosted web search, driven by ``client`` (its endpoint and key) and ``model``."""

    name = "openai"
    native = True

    def __init__(
        self,
        client: LLMClient,
        model: str | None = None,
        *,
        search_context_size: str | None = None,
        **kw: Any,
    ):
        super().__init__(**kw)
        self.client = client
        self.model = model or client.model
        if not self.model:
            raise ValueError("the openai search backend needs a model")
        self.search_context_size = search_context_size

    def tool(self) -> dict[str, Any]:
        """The hosted tool entry for a Responses request."""
        t: dict[str, Any] = {"type": "web_search"}
        if self.search_context_size:
            t["search_context_size"] = self.search_context_size
        return t

    def cache_params(self) -> dict[str, Any]:
        return {
            "endpoint": self.client.cache_endpoint,
            "model": self.model,
            "tool": self.tool(),
            "prompt": template_version("search.openai", SEARCH_ONLY_PROMPT, SEARCH_ONLY_VERSION),
        }

    def describe(self) -> dict[str, Any]:
        return {"search": self.name, "search_model": self.model, "tool": self.tool()}

    async def _search_once(self, query: str, k: int):  # type: ignore[override]
        prompt = render("search.openai", SEARCH_ONLY_PROMPT, query=query, k=k)
        res = await self.client.aresponses(
            prompt, model=self.model, tools=[self.tool()], include=INCLUDE_SOURCES
        )
        if not res.ok:
            raise SearchUnavailable(f"openai web search call failed: {res.error}")
        trace = parse_web_search_output(res.raw or {}, self.name)
        return trace.results()[:k], res.usage

    async def aclose(self) -> None:
        await self.client.aclose()
