"""Search-augmented answering systems, each recording a :class:`~trek.types.Trajectory`.

* ``agentic`` — the model gets two function tools, ``web_search(query)`` and ``open_url(url)``,
  and may call them for up to ``max_rounds`` rounds; a reply without a tool call is the final
  answer. After the last round one more call is made with ``tool_choice="none"`` and a short
  instruction to answer now; a model that still calls a tool then gives no answer
  (``status="no_answer"``). Opened pages come from the page store (which may fetch them live),
  head-truncated at ``page_chars`` with a marker. With the ``openai`` backend the model instead
  uses its built-in web search in one Responses call (native mode); the search actions and
  returned URLs are read from the reply.
* ``search-then-read`` — one search with the question as the query, the top ``top_k`` pages
  (their snippets when a page is unavailable), then one answer call.
* ``no-search`` — the answer prompt alone.

``SystemConfig.first_search`` (``--first-search``, off by default) makes the agentic system's first
call require a ``web_search`` call (``tool_choice`` naming the function, which both OpenAI and
llama.cpp's function-calling format honour): a deviation for a small model that otherwise never
searches; the system dict records it.

The prompts give the model the tools, the round limit and the dataset's answer prompt, and no
advice on how to judge evidence: the paper's systems got none. Such advice is an explicit option,
``SystemConfig.hints`` (``--hints``), off by default; when on, :data:`HINTS_PROMPT` is added
(agentic and native: to the system message; search-then-read: before the pages) and the
system dict and prompt version say so.

Every trajectory lists each search (query, backend, ranked results, round, cache flag), every
call in order (``steps``: searches, page reads, the answer, with round, cache flag and page
status), every URL met (``retrieved_urls``: all search results and opened pages, exact
duplicates removed keeping the first), the opened URLs, the final answer, the summed usage
(search-model usage included, and apart in ``search_usage``), the system configuration and the
prompt version. A model call that stays pending or a search that keeps failing yields
``status="pending"`` (retried on the next run); a call rejected for this question alone (a 400
such as an over-long context, a refused search query) yields ``status="failed"`` with the error.
Neither is ever graded as an answer. Errors that doom every question (a rejected key, an unknown
model, an unsupported parameter: see :func:`is_run_fatal`) raise and stop the run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from trek.answer_prompts import answer_prompt, answer_prompt_version
from trek.errors import is_run_fatal
from trek.llm.client import FatalLLMError, LLMClient, LLMResult
from trek.pages import AGENT_PAGE_CHARS, Page, PageStore, normalize_url
from trek.search.base import RejectedSearchError, SearchBackend, SearchOutcome, SearchUnavailable
from trek.search.openai_search import INCLUDE_SOURCES, OpenAISearch, parse_web_search_output
from trek.templates import register, render, template_version
from trek.types import Question, SearchCall, SearchResult, Trajectory, TrajectoryStep, Usage
from trek.urls import unique_urls

__all__ = [
    "SYSTEMS",
    "EFFORTS",
    "SystemConfig",
    "SearchSystem",
    "TOOLS",
    "AGENTIC_SYSTEM_PROMPT",
    "FORCE_ANSWER_PROMPT",
    "FIRST_SEARCH_CHOICE",
    "HINTS_PROMPT",
    "READ_CONTEXT_PROMPT",
    "format_search_results",
    "is_run_fatal",
]

SYSTEMS = ("agentic", "search-then-read", "no-search")
EFFORTS = ("low", "medium", "high")
SYSTEM_PROMPTS_VERSION = "systems-2"
HINTS_VERSION = "hints-1"

AGENTIC_SYSTEM_PROMPT = register(
    "agent.system",
    """\
You have two tools: web_search(query) returns a ranked list of web results (URL, title, date, \
snippet), and open_url(url) returns the text of a page. You may call them for up to {max_rounds} \
rounds. When you are ready, reply without calling a tool, following the answer instructions of \
the question.""",
)

FORCE_ANSWER_PROMPT = register(
    "agent.force_answer",
    """\
You cannot call any more tools. Give your final answer now, following the answer instructions \
of the question.""",
)

READ_CONTEXT_PROMPT = register(
    "agent.read_context",
    """\
Here are web pages found for the question below.

{documents}

{question_prompt}""",
)

#: Evidence-handling advice the paper's systems did not get; only sent with ``hints=True``.
HINTS_PROMPT = register(
    "agent.hints",
    """\
Check the publication dates and the sources of what you find, and rely on evidence that fits \
the time the question is about: pages may be outdated, irrelevant or in conflict with each \
other.""",
)

#: Longest query and address the tools take: a grammar-constrained endpoint (llama.cpp) then closes
#: the arguments' JSON even when a small model repeats itself until ``max_tokens``.
QUERY_MAX_CHARS, URL_MAX_CHARS = 200, 300

#: The ``tool_choice`` of the first round with ``first_search``: the search tool, by name.
FIRST_SEARCH_CHOICE: dict[str, Any] = {"type": "function", "function": {"name": "web_search"}}

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "web_search",
            "description": "Search the web. Returns a numbered list of results with URL, title, date and snippet.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string", "description": "The search query.",
                                         "maxLength": QUERY_MAX_CHARS}},
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
                "properties": {"url": {"type": "string", "description": "The address of the page.",
                                       "maxLength": URL_MAX_CHARS}},
                "required": ["url"],
            },
        },
    },
]


@dataclass
class SystemConfig:
    """Settings of a system; :meth:`SearchSystem.system_dict` is what a trajectory records.

    ``page_chars`` is how much of a page the evaluated system sees (default
    :data:`~trek.pages.AGENT_PAGE_CHARS`; not the TrekTrace judge's 3,500). ``hints`` adds
    :data:`HINTS_PROMPT` (off by default: the paper's systems got no such advice).
    ``first_search`` requires a ``web_search`` call on the agentic system's first round
    (:data:`FIRST_SEARCH_CHOICE`; off by default).
    """

    system: str = "agentic"
    effort: str | None = None
    max_rounds: int = 8
    results_per_search: int = 5
    top_k: int = 5
    page_chars: int = AGENT_PAGE_CHARS
    hints: bool = False
    first_search: bool = False
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


class _Record:
    """The trajectory being built for one question."""

    def __init__(self) -> None:
        self.searches: list[SearchCall] = []
        self.opened: list[str] = []
        self.steps: list[TrajectoryStep] = []
        self.usage = Usage()
        self.search_usage = Usage()
        self.messages: list[dict[str, Any]] = []
        self.seen_results: dict[str, SearchResult] = {}
        self.citations: list[str] = []
        self.no_answer = False

    def _step(self, kind: str, rnd: int, **fields: Any) -> None:
        self.steps.append(TrajectoryStep(kind=kind, round=rnd, **fields))

    def add_usage(self, res: LLMResult) -> None:
        self.usage = self.usage + res.usage

    def add_search(
        self, call: SearchCall, rnd: int, *, cached: bool | None, tool: str | None = None,
        call_id: str | None = None, usage: Usage | None = None,
    ) -> None:
        call = call.model_copy(update={"round": rnd, "cached": cached})
        self._step(
            "search", rnd, tool=tool, call_id=call_id, query=call.query, result_urls=[r.url for r in call.results],
            search_index=len(self.searches), cached=cached, error=call.error,
        )
        self.searches.append(call)
        for r in call.results:
            self.seen_results.setdefault(normalize_url(r.url), r)
        if usage is not None:
            u = usage.model_copy(update={"cost_usd": usage.cost_usd or 0.0})
            self.search_usage = self.search_usage + u
            self.usage = self.usage + u

    def add_outcome(self, out: SearchOutcome, rnd: int, **kw: Any) -> None:
        self.add_search(out.call, rnd, cached=out.cached, usage=out.usage, **kw)

    def add_open(
        self, url: str, rnd: int, page: Page, shown: str, *, tool: str | None = None,
        call_id: str | None = None, opened: bool = True,
    ) -> None:
        if opened and url not in self.opened:
            self.opened.append(url)
        self._step(
            "open", rnd, tool=tool, call_id=call_id, url=url, cached=page.cached if page.source != "none" else None,
            page_status=page.status, page_source=page.source, shown_chars=len(shown), error=page.error,
        )

    def add_answer(self, rnd: int, res: LLMResult, content: str | None, error: str | None = None) -> None:
        self._step(
            "answer", rnd, cached=res.cached, shown_chars=len(content) if content is not None else None, error=error
        )

    def retrieved_urls(self) -> list[str]:
        urls: list[str] = []
        for s in self.steps:
            urls.extend(s.result_urls)
            if s.kind == "open" and s.url:
                urls.append(s.url)
        return unique_urls(urls + self.citations)


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
        if cfg.hints and cfg.system == "no-search":
            raise ValueError("hints are advice on search evidence; the no-search system takes none")
        if cfg.first_search and cfg.system != "agentic":
            raise ValueError("first_search applies to the agentic system (search-then-read always searches)")
        self.config = cfg
        if cfg.first_search and self.native:
            raise ValueError("first_search needs function tools; the openai backend's native search has none")

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
        if cfg.system != "no-search":
            d["hints"] = cfg.hints
        if cfg.first_search:  # recorded only when on, so runs made before the option keep their identity
            d["first_search"] = True
        if self.backend is not None:
            d.update({k: v for k, v in self.backend.describe().items() if k != "search"})
        if cfg.params:
            d["params"] = dict(cfg.params)
        return d

    def system_prompt_version(self) -> str:
        """``systems-N`` (with override hashes) for the system prompts in use, ``;hints-N``
        when hints are on; empty for no-search."""
        if self.config.system == "agentic" and self.native:
            parts: list[tuple[str, str]] = []
        elif self.config.system == "agentic":
            parts = [("agent.system", AGENTIC_SYSTEM_PROMPT), ("agent.force_answer", FORCE_ANSWER_PROMPT)]
        elif self.config.system == "search-then-read":
            parts = [("agent.read_context", READ_CONTEXT_PROMPT)]
        else:
            return ""
        versions = {template_version(n, d, SYSTEM_PROMPTS_VERSION) for n, d in parts} or {
            SYSTEM_PROMPTS_VERSION
        }
        out = "+".join(sorted(versions))
        if self.config.hints:
            out += ";" + template_version("agent.hints", HINTS_PROMPT, HINTS_VERSION)
        return out

    def prompt_version(self, q: Question) -> str:
        sp = self.system_prompt_version()
        return answer_prompt_version(q) + (f";{sp}" if sp else "")

    def _params(self) -> dict[str, Any]:
        p = dict(self.config.params)
        if self.config.effort:
            p["reasoning_effort"] = self.config.effort
        return p

    def _hints(self) -> str:
        return render("agent.hints", HINTS_PROMPT) if self.config.hints else ""

    # -- running ----------------------------------------------------------------------------------
    async def arun(self, q: Question) -> Trajectory:
        """Answer ``q``. Transient failures give a pending trajectory, failures of this question
        alone a failed one; errors that doom every question (:func:`is_run_fatal`, a
        :class:`~trek.search.base.FatalSearchError`) raise."""
        rec = _Record()
        error: str | None = None
        answer: str | None = None
        status = "ok"
        try:
            if self.config.system == "no-search":
                answer, error = await self._no_search(q, rec)
            elif self.config.system == "search-then-read":
                answer, error = await self._search_then_read(q, rec)
            elif self.native:
                answer, error = await self._native(q, rec)
            else:
                answer, error = await self._agentic(q, rec)
            if error:
                status = "pending"
            elif rec.no_answer:
                status, answer = "no_answer", None
                error = "the model called a tool after the final round instead of answering"
        except SearchUnavailable as e:
            if e.call is not None:
                rec.add_search(e.call, _last_round(rec), cached=False)
            status, answer, error = "pending", None, f"search failed: {e}"
        except RejectedSearchError as e:
            if e.call is not None:
                rec.add_search(e.call, _last_round(rec), cached=False)
            status, answer, error = "failed", None, f"search rejected: {e}"
        except FatalLLMError as e:
            if is_run_fatal(e):
                raise
            status, answer, error = "failed", None, f"model call rejected: {e}"
        return Trajectory(
            question_id=q.id,
            model=self.client.model or "",
            system=self.system_dict(),
            search_calls=rec.searches,
            retrieved_urls=rec.retrieved_urls(),
            opened_urls=rec.opened,
            final_answer=None if status != "ok" else (answer or "").strip(),
            status=status,  # type: ignore[arg-type]
            error=error,
            usage=rec.usage,
            messages=rec.messages,
            prompt_version=self.prompt_version(q),
            steps=rec.steps,
            search_usage=rec.search_usage,
        )

    async def _answer_call(
        self, messages: list[dict[str, Any]], rec: _Record, rnd: int = 1
    ) -> tuple[str | None, str | None]:
        res = await self.client.achat(messages, **self._params())
        rec.add_usage(res)
        rec.messages = [*messages]
        if not res.ok:
            return None, f"model call failed: {res.error}"
        content = res.content or ""
        rec.messages.append({"role": "assistant", "content": content})
        rec.add_answer(rnd, res, content)
        return content, None

    async def _no_search(self, q: Question, rec: _Record) -> tuple[str | None, str | None]:
        return await self._answer_call([{"role": "user", "content": answer_prompt(q)}], rec)

    async def _search_then_read(self, q: Question, rec: _Record) -> tuple[str | None, str | None]:
        assert self.backend is not None
        question_prompt = answer_prompt(q)
        out = await self.backend.acall(q.question, self.config.top_k)
        rec.add_outcome(out, 0)
        blocks = []
        for i, r in enumerate(out.call.results, start=1):
            page = await self._page(r.url)
            body = page.render(self.config.page_chars) if page.available else _snippet_block(r)
            rec.add_open(r.url, 0, page, body, opened=page.available)
            blocks.append(f"[Document {i}]\n{body}")
        documents = "\n\n".join(blocks) if blocks else "(the search returned no pages)"
        hints = self._hints()
        if hints:
            documents = hints + "\n\n" + documents
        prompt = render(
            "agent.read_context", READ_CONTEXT_PROMPT, documents=documents, question_prompt=question_prompt
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
            error="no page store",
        )

    async def _agentic(self, q: Question, rec: _Record) -> tuple[str | None, str | None]:
        cfg = self.config
        system = render("agent.system", AGENTIC_SYSTEM_PROMPT, max_rounds=cfg.max_rounds)
        hints = self._hints()
        if hints:
            system += "\n\n" + hints
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": system},
            {"role": "user", "content": answer_prompt(q)},
        ]
        rec.messages = messages
        for rnd in range(1, cfg.max_rounds + 2):
            last = rnd == cfg.max_rounds + 1
            params = self._params()
            if last:
                messages.append(
                    {"role": "user", "content": render("agent.force_answer", FORCE_ANSWER_PROMPT)}
                )
                params["tool_choice"] = "none"
            elif rnd == 1 and cfg.first_search:
                params["tool_choice"] = FIRST_SEARCH_CHOICE
            res = await self.client.achat(messages, tools=TOOLS, **params)
            rec.add_usage(res)
            if not res.ok:
                return None, f"model call failed: {res.error}"
            calls = res.tool_calls
            msg = res.message or {}
            if not calls:
                content = res.content or ""
                messages.append({"role": "assistant", "content": content})
                rec.add_answer(rnd, res, content)
                return content, None
            if last:  # tool_choice="none" ignored: no final answer
                messages.append(_echo_turn(msg.get("content"), calls))
                rec.no_answer = True
                rec.add_answer(rnd, res, None, error="tool call after the final round: no answer")
                return None, None
            messages.append(_echo_turn(msg.get("content"), calls))
            for c in calls:
                try:
                    content = await self._run_tool(c, rec, rnd)
                except (SearchUnavailable, RejectedSearchError):
                    messages.append(
                        {"role": "tool", "tool_call_id": c.get("id"), "content": "[search failed]"}
                    )
                    raise
                messages.append({"role": "tool", "tool_call_id": c.get("id"), "content": content})
        raise AssertionError("unreachable")  # pragma: no cover

    async def _run_tool(self, call: dict[str, Any], rec: _Record, rnd: int) -> str:
        fn = call.get("function") or {}
        name = fn.get("name")
        call_id = call.get("id")
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
            try:
                out = await self.backend.acall(query, self.config.results_per_search)
            except (SearchUnavailable, RejectedSearchError) as e:
                if e.call is not None:
                    rec.add_search(e.call, rnd, cached=False, tool="web_search", call_id=call_id)
                    e.call = None
                raise
            rec.add_outcome(out, rnd, tool="web_search", call_id=call_id)
            return format_search_results(out.call)
        if name == "open_url":
            url = args.get("url")
            if not isinstance(url, str) or not url.strip():
                return 'Error: open_url needs a non-empty "url" string.'
            url = url.strip()
            page = await self._page(url)
            if page.available:
                shown = page.render(self.config.page_chars)
            else:
                shown = page.text
                seen = rec.seen_results.get(normalize_url(url))
                if seen is not None and seen.snippet:
                    shown += "\nThe search result for this page said:\n" + _snippet_block(seen)
            rec.add_open(url, rnd, page, shown, tool="open_url", call_id=call_id)
            return shown
        return f"Error: there is no tool named {name!r}; use web_search or open_url."

    async def _native(self, q: Question, rec: _Record) -> tuple[str | None, str | None]:
        backend = self.backend
        assert isinstance(backend, OpenAISearch)
        inp: list[dict[str, Any]] = []
        hints = self._hints()
        if hints:
            inp.append({"role": "system", "content": hints})
        inp.append({"role": "user", "content": answer_prompt(q)})
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
        trace = parse_web_search_output(raw, backend.name, round=1)
        rec.searches.extend(trace.searches)
        rec.steps.extend(trace.steps)
        for url in trace.opened:
            if url not in rec.opened:
                rec.opened.append(url)
        rec.citations = [c.url for c in trace.citations]
        rec.messages.extend(
            {k: v for k, v in item.items() if k != "encrypted_content"}
            for item in raw.get("output") or []
            if isinstance(item, dict)
        )
        answer = trace.answer if trace.answer is not None else (res.content or "")
        rec.add_answer(1, res, answer)
        return answer, None


def _last_round(rec: _Record) -> int:
    return rec.steps[-1].round if rec.steps else 0


def _echo_turn(content: str | None, calls: list[dict[str, Any]]) -> dict[str, Any]:
    """The assistant turn that made ``calls``, as sent back. Without text it has no ``content`` key
    (OpenAI allows that beside tool calls; llama.cpp's server rejects ``"content": null``)."""
    turn: dict[str, Any] = {"role": "assistant"}
    if content is not None:
        turn["content"] = content
    turn["tool_calls"] = [_echo_call(c) for c in calls]
    return turn


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
