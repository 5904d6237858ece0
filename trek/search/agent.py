"""Search-augmented answering systems, each recording a :class:`~trek.types.Trajectory`.

* ``agentic`` — the model gets two function tools, ``web_search(query)`` and ``open_url(url)``,
  and may call them for up to ``max_rounds`` rounds; a reply without a tool call is the final
  answer. After the last round one more call is made with ``tool_choice="none"`` and a short
  instruction to answer now. Opened pages come from the page store, head-truncated with a marker.
  With the ``openai`` backend the model instead uses its built-in web search in one Responses
  call (native mode); the search actions and returned URLs are read from the reply.
* ``search-then-read`` — one search with the question as the query, the top ``top_k`` pages
  (their snippets when a page is unavailable), then one answer call.
* ``no-search`` — the answer prompt alone.

Every trajectory lists each search (query, backend, ranked results), every returned URL in order
(``retrieved_urls``: all searches, exact duplicates removed keeping the first), the opened URLs,
the final answer, the summed model usage, the system configuration and the prompt version. A model
call that stays pending or a search that keeps failing yields ``status="pending"`` with
``final_answer=None`` and the error: it is retried on the next run and never graded as an answer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from trek.answer_prompts import answer_prompt, answer_prompt_version
from trek.llm.client import LLMClient, LLMResult
from trek.pages import NON_GOLD_CHARS, Page, PageStore, normalize_url
from trek.search.base import SearchBackend, SearchUnavailable
from trek.search.openai_search import INCLUDE_SOURCES, OpenAISearch, parse_web_search_output
from trek.templates import render, template_version
from trek.types import Question, SearchCall, SearchResult, Trajectory, Usage

__all__ = [
    "SYSTEMS",
    "EFFORTS",
    "SystemConfig",
    "SearchSystem",
    "TOOLS",
    "AGENTIC_SYSTEM_PROMPT",
    "FORCE_ANSWER_PROMPT",
    "READ_CONTEXT_PROMPT",
    "format_search_results",
]

SYSTEMS = ("agentic", "search-then-read", "no-search")
EFFORTS = ("low", "medium", "high")
SYSTEM_PROMPTS_VERSION = "systems-1"

AGENTIC_SYSTEM_PROMPT = """\
You answer questions whose answers may depend on recent or changing facts. You have two tools: \
web_search(query) returns a ranked list of web results (URL, title, date, snippet), and \
open_url(url) returns the text of a page. Search and read as much as you need, up to {max_rounds} \
rounds of tool calls. Check publication dates and sources, and rely on evidence that fits the \
time the question is about. When you are ready, reply without calling a tool, following the \
answer instructions of the question."""

FORCE_ANSWER_PROMPT = """\
You cannot call any more tools. Based on what you have found so far, give your final answer now, \
following the answer instructions of the question."""

NATIVE_SYSTEM_PROMPT = """\
You answer questions whose answers may depend on recent or changing facts. Use web search as \
much as you need. Check publication dates and sources, and rely on evidence that fits the time \
the question is about."""

READ_CONTEXT_PROMPT = """\
Here are web pages found for the question below. Use them where they help; they may be outdated, \
irrelevant or in conflict with each other.

{documents}

{question_prompt}"""

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "web_search",
            "description": "Search the web. Returns a numbered list of results with URL, title, date and snippet.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string", "description": "The search query."}},
                "required": ["query"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "open_url",
            "description": "Open a web page and return its text (long pages are cut after the beginning).",
            "parameters": {
                "type": "object",
                "properties": {"url": {"type": "string", "description": "The address of the page."}},
                "required": ["url"],
            },
        },
    },
]


@dataclass
class SystemConfig:
    """Settings of a system; :meth:`as_dict` is what a trajectory records in ``system``."""

    system: str = "agentic"
    effort: str | None = None
    max_rounds: int = 8
    results_per_search: int = 5
    top_k: int = 5
    page_chars: int = NON_GOLD_CHARS
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.system not in SYSTEMS:
            raise ValueError(f"unknown system {self.system!r}; choose one of {', '.join(SYSTEMS)}")
        if self.effort is not None and self.effort not in EFFORTS:
            raise ValueError(f"unknown reasoning effort {self.effort!r}; choose one of {', '.join(EFFORTS)}")
        if self.max_rounds < 1 or self.results_per_search < 1 or self.top_k < 1 or self.page_chars < 1:
            raise ValueError("max_rounds, results_per_search, top_k and page_chars must be positive")


def format_search_results(call: SearchCall) -> str:
    """The text a model sees for one ``web_search`` call."""
    if not call.results:
        return f"No results for: {call.query}"
    lines = [f"Search results for: {call.query}", ""]
    for i, r in enumerate(call.results, start=1):
        lines.append(f"[{i}] {r.title or '(no title)'}")
        lines.append(f"URL: {r.url}")
        if r.date:
            lines.append(f"Date: {r.date}")
        if r.snippet:
            lines.append(r.snippet)
        lines.append("")
    return "\n".join(lines).rstrip()


def _dedupe(urls: list[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for u in urls:
        if u not in seen:
            seen.add(u)
            out.append(u)
    return out


class _Record:
    """The trajectory being built for one question."""

    def __init__(self) -> None:
        self.searches: list[SearchCall] = []
        self.opened: list[str] = []
        self.usage = Usage()
        self.messages: list[dict[str, Any]] = []
        self.seen_results: dict[str, SearchResult] = {}
        self.native_urls: list[str] | None = None

    def add_usage(self, res: LLMResult) -> None:
        self.usage = self.usage + res.usage

    def add_search(self, call: SearchCall) -> None:
        self.searches.append(call)
        for r in call.results:
            self.seen_results.setdefault(normalize_url(r.url), r)

    def open(self, url: str) -> None:
        if url not in self.opened:
            self.opened.append(url)


class SearchSystem:
    """One configured system: a model client, a search backend (``None`` for no-search) and a
    page store for opened pages."""

    def __init__(
        self,
        client: LLMClient,
        backend: SearchBackend | None,
        store: PageStore | None = None,
        config: SystemConfig | None = None,
    ):
        self.client = client
        self.backend = backend
        self.store = store
        cfg = config or SystemConfig()
        if backend is None and cfg.system != "no-search":
            cfg = SystemConfig(**{**cfg.__dict__, "system": "no-search"})
        if backend is not None and cfg.system == "no-search":
            raise ValueError("the no-search system takes no search backend")
        self.config = cfg

    @property
    def native(self) -> bool:
        return self.config.system == "agentic" and isinstance(self.backend, OpenAISearch)

    def system_dict(self) -> dict[str, Any]:
        cfg = self.config
        d: dict[str, Any] = {
            "system": cfg.system,
            "search": self.backend.name if self.backend else "none",
            "effort": cfg.effort,
        }
        if cfg.system == "agentic" and not self.native:
            d.update(
                max_rounds=cfg.max_rounds,
                results_per_search=cfg.results_per_search,
                page_chars=cfg.page_chars,
            )
        elif self.native:
            d["native_search"] = True
        elif cfg.system == "search-then-read":
            d.update(top_k=cfg.top_k, page_chars=cfg.page_chars)
        if self.backend is not None:
            d.update({k: v for k, v in self.backend.describe().items() if k != "search"})
        if cfg.params:
            d["params"] = dict(cfg.params)
        return d

    def system_prompt_version(self) -> str:
        if self.config.system == "agentic" and self.native:
            parts = [("agent.native_system", NATIVE_SYSTEM_PROMPT)]
        elif self.config.system == "agentic":
            parts = [("agent.system", AGENTIC_SYSTEM_PROMPT), ("agent.force_answer", FORCE_ANSWER_PROMPT)]
        elif self.config.system == "search-then-read":
            parts = [("agent.read_context", READ_CONTEXT_PROMPT)]
        else:
            return ""
        versions = {template_version(n, d, SYSTEM_PROMPTS_VERSION) for n, d in parts}
        return "+".join(sorted(versions))

    def prompt_version(self, q: Question) -> str:
        sp = self.system_prompt_version()
        return answer_prompt_version(q) + (f";{sp}" if sp else "")

    def _params(self) -> dict[str, Any]:
        p = dict(self.config.params)
        if self.config.effort:
            p["reasoning_effort"] = self.config.effort
        return p

    # -- running ----------------------------------------------------------------------------------
    async def arun(self, q: Question) -> Trajectory:
        """Answer ``q``; model and search failures give a pending trajectory (fatal ones raise)."""
        rec = _Record()
        error: str | None = None
        answer: str | None = None
        try:
            if self.config.system == "no-search":
                answer, error = await self._no_search(q, rec)
            elif self.config.system == "search-then-read":
                answer, error = await self._search_then_read(q, rec)
            elif self.native:
                answer, error = await self._native(q, rec)
            else:
                answer, error = await self._agentic(q, rec)
        except SearchUnavailable as e:
            if e.call is not None:
                rec.searches.append(e.call)
            answer, error = None, f"search failed: {e}"
        if rec.native_urls is not None:
            retrieved = rec.native_urls
        else:
            retrieved = _dedupe([r.url for c in rec.searches for r in c.results])
        return Trajectory(
            question_id=q.id,
            model=self.client.model or "",
            system=self.system_dict(),
            search_calls=rec.searches,
            retrieved_urls=retrieved,
            opened_urls=rec.opened,
            final_answer=None if error else (answer or "").strip(),
            status="pending" if error else "ok",
            error=error,
            usage=rec.usage,
            messages=rec.messages,
            prompt_version=self.prompt_version(q),
        )

    async def _answer_call(
        self, messages: list[dict[str, Any]], rec: _Record
    ) -> tuple[str | None, str | None]:
        res = await self.client.achat(messages, **self._params())
        rec.add_usage(res)
        rec.messages = [*messages]
        if not res.ok:
            return None, f"model call failed: {res.error}"
        content = res.content or ""
        rec.messages.append({"role": "assistant", "content": content})
        return content, None

    async def _no_search(self, q: Question, rec: _Record) -> tuple[str | None, str | None]:
        return await self._answer_call([{"role": "user", "content": answer_prompt(q)}], rec)

    async def _search_then_read(self, q: Question, rec: _Record) -> tuple[str | None, str | None]:
        assert self.backend is not None
        out = await self.backend.acall(q.question, self.config.top_k)
        rec.add_search(out.call)
        blocks = []
        for i, r in enumerate(out.call.results, start=1):
            page = await self._page(r.url)
            if page.available:
                rec.open(r.url)
                body = page.render(self.config.page_chars)
            else:
                body = _snippet_block(r)
            blocks.append(f"[Document {i}]\n{body}")
        documents = "\n\n".join(blocks) if blocks else "(the search returned no pages)"
        prompt = render(
            "agent.read_context", READ_CONTEXT_PROMPT, documents=documents, question_prompt=answer_prompt(q)
        )
        return await self._answer_call([{"role": "user", "content": prompt}], rec)

    async def _page(self, url: str) -> Page:
        if self.store is not None:
            return await self.store.aget(url)
        return Page(
            url=url,
            key=normalize_url(url),
            text=f"[Page unavailable: {url} (no page store)]",
            status="missing",
            source="none",
        )

    async def _agentic(self, q: Question, rec: _Record) -> tuple[str | None, str | None]:
        cfg = self.config
        messages: list[dict[str, Any]] = [
            {
                "role": "system",
                "content": render("agent.system", AGENTIC_SYSTEM_PROMPT, max_rounds=cfg.max_rounds),
            },
            {"role": "user", "content": answer_prompt(q)},
        ]
        rec.messages = messages
        for rnd in range(cfg.max_rounds + 1):
            last = rnd == cfg.max_rounds
            params = self._params()
            if last:
                messages.append(
                    {"role": "user", "content": render("agent.force_answer", FORCE_ANSWER_PROMPT)}
                )
                params["tool_choice"] = "none"
            res = await self.client.achat(messages, tools=TOOLS, **params)
            rec.add_usage(res)
            if not res.ok:
                return None, f"model call failed: {res.error}"
            calls = res.tool_calls
            msg = res.message or {}
            if not calls or last:
                content = res.content or ""
                messages.append({"role": "assistant", "content": content})
                return content, None
            messages.append(
                {
                    "role": "assistant",
                    "content": msg.get("content"),
                    "tool_calls": [_echo_call(c) for c in calls],
                }
            )
            for c in calls:
                try:
                    content = await self._run_tool(c, rec)
                except SearchUnavailable:
                    messages.append(
                        {"role": "tool", "tool_call_id": c.get("id"), "content": "[search failed]"}
                    )
                    raise
                messages.append({"role": "tool", "tool_call_id": c.get("id"), "content": content})
        raise AssertionError("unreachable")  # pragma: no cover

    async def _run_tool(self, call: dict[str, Any], rec: _Record) -> str:
        fn = call.get("function") or {}
        name = fn.get("name")
        raw_args = fn.get("arguments")
        try:
            args = raw_args if isinstance(raw_args, dict) else json.loads(raw_args or "{}")
        except (json.JSONDecodeError, TypeError):
            return "Error: the tool arguments were not valid JSON. Call the tool again with a JSON object."
        if not isinstance(args, dict):
            return "Error: the tool arguments must be a JSON object."
        if name == "web_search":
            query = args.get("query")
            if not isinstance(query, str) or not query.strip():
                return 'Error: web_search needs a non-empty "query" string.'
            assert self.backend is not None
            out = await self.backend.acall(query, self.config.results_per_search)
            rec.add_search(out.call)
            return format_search_results(out.call)
        if name == "open_url":
            url = args.get("url")
            if not isinstance(url, str) or not url.strip():
                return 'Error: open_url needs a non-empty "url" string.'
            url = url.strip()
            rec.open(url)
            page = await self._page(url)
            if page.available:
                return page.render(self.config.page_chars)
            seen = rec.seen_results.get(normalize_url(url))
            if seen is not None and seen.snippet:
                return page.text + "\nThe search result for this page said:\n" + _snippet_block(seen)
            return page.text
        return f"Error: there is no tool named {name!r}; use web_search or open_url."

    async def _native(self, q: Question, rec: _Record) -> tuple[str | None, str | None]:
        backend = self.backend
        assert isinstance(backend, OpenAISearch)
        inp: list[dict[str, Any]] = [
            {"role": "system", "content": render("agent.native_system", NATIVE_SYSTEM_PROMPT)},
            {"role": "user", "content": answer_prompt(q)},
        ]
        params = dict(self.config.params)
        res = await self.client.aresponses(
            inp,
            tools=[backend.tool()],
            include=INCLUDE_SOURCES,
            reasoning_effort=self.config.effort,
            **params,
        )
        rec.add_usage(res)
        rec.messages = list(inp)
        if not res.ok:
            return None, f"model call failed: {res.error}"
        raw = res.raw or {}
        trace = parse_web_search_output(raw, backend.name)
        rec.searches.extend(trace.searches)
        for url in trace.opened:
            rec.open(url)
        rec.native_urls = trace.retrieved_urls()
        rec.messages.extend(
            {k: v for k, v in item.items() if k != "encrypted_content"}
            for item in raw.get("output") or []
            if isinstance(item, dict)
        )
        return trace.answer if trace.answer is not None else (res.content or ""), None


def _echo_call(c: dict[str, Any]) -> dict[str, Any]:
    """A tool call as sent back in the conversation (arguments always a JSON string)."""
    fn = c.get("function") or {}
    args = fn.get("arguments")
    if not isinstance(args, str):
        args = json.dumps(args if args is not None else {}, ensure_ascii=False)
    return {"id": c.get("id"), "type": "function", "function": {"name": fn.get("name"), "arguments": args}}


def _snippet_block(r: SearchResult) -> str:
    lines = [f"URL: {r.url}"]
    if r.title:
        lines.append(f"Title: {r.title}")
    if r.date:
        lines.append(f"Date: {r.date}")
    lines.append("")
    lines.append(r.snippet or "(no text available)")
    return "\n".join(lines)
