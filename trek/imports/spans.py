"""One trace's spans as a trajectory: the part of ``otlp`` and ``langfuse`` they share.

Both importers turn their input into :class:`Span` objects with flat attributes (an OTLP
span's typed attributes, a Langfuse observation's ``metadata.attributes``) and hand the spans of
one trace to :func:`parse_spans`. Attributes are read in two dialects:

* OpenTelemetry's GenAI conventions: ``gen_ai.operation.name`` (``execute_tool``,
  ``retrieval``, ``chat``/``text_completion``/``generate_content``, ``invoke_agent``),
  ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.tool.call.arguments``,
  ``gen_ai.tool.call.result``, ``gen_ai.retrieval.query.text``, ``gen_ai.retrieval.documents``,
  ``gen_ai.input.messages``/``gen_ai.output.messages`` (``text``, ``tool_call``,
  ``tool_call_response``, ``server_tool_call``/``server_tool_call_response`` parts), the older
  ``gen_ai.content.prompt``/``gen_ai.content.completion`` events (``gen_ai.prompt``,
  ``gen_ai.completion``) and flattened ``gen_ai.prompt.N.*``/``gen_ai.completion.N.*``
  attributes, ``gen_ai.request.model``/``gen_ai.response.model``, ``gen_ai.usage.*``;
* OpenInference: ``openinference.span.kind`` (``TOOL``, ``RETRIEVER``, ``LLM``, ``AGENT``),
  ``tool.name``, ``input.value``, ``output.value``, ``retrieval.documents.N.document.{id,
  content, score, metadata}``, ``llm.input_messages.N.message.*`` and
  ``llm.output_messages.N.message.*`` (``role``, ``content``, ``contents``, ``tool_calls.M.
  tool_call.{id, function.name, function.arguments}``, ``tool_call_id``),
  ``llm.model_name``, ``llm.token_count.*``.

OpenLLMetry's spans are GenAI spans, with older names it still writes: ``llm.request.type``
(a model span), ``traceloop.span.kind`` ``tool``/``agent`` with ``traceloop.entity.name``,
``traceloop.entity.input`` and ``traceloop.entity.output`` (a tool span).

A Langfuse observation without OTel attributes is read from its ``type`` (``TOOL``,
``RETRIEVER``, ``GENERATION``, ``AGENT``), ``name``, ``input``, ``output``, ``model`` and
``usageDetails``; a ``SPAN`` observation without children whose name matches a search-tool
pattern and that has an input is a tool call too (older Langfuse SDKs wrote tools as spans).

Searches: every retrieval span, and every tool call whose name matches one of the search-tool
patterns (globs, :data:`DEFAULT_SEARCH_TOOLS` unless ``--search-tool`` names others). A tool
whose name matches :data:`OPEN_TOOLS` and whose arguments hold a URL is an opened page (its
result the page's text); any other tool call is a ``tool`` step, and so is a tool span with
model or tool spans below it (an agent run as a tool, such as a ``research_agent``: its own calls
count). A trace without tool or
retrieval spans shows its tool calls in the model's messages (tool calls in the output,
tool responses in the next input), read the same way. Several spans of one tool call id (or, with no id, a failed call
followed by the same call under the same parent) are retries of one call: the last attempt counts,
and a note says so. Rounds are model turns: a call's round is the number of model spans
that started before it. The answer is Langfuse's ``trace.output``, else the root span's output,
else the text of the last model span that ends without tool calls.

Coverage: ``queries`` ``all``/``some``/``none`` as the searches' arguments were recorded;
``results`` ``all`` when every search's result (or its error) was recorded, ``none`` when none was,
``cited_only`` when some were (a lower bound). A trace in which no span carries any content
(content capture off, the default of OpenTelemetry instrumentations) is said to be so in its
notes, with queries and results ``none``, so TrekTrace skips the tests it cannot do instead of
labelling queries it never saw.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from trek.imports.common import PageText, Parsed
from trek.imports.tool_results import maybe_json, parse_result
from trek.types import SearchCall, TrajectoryStep, Usage

__all__ = ["DEFAULT_SEARCH_TOOLS", "OPEN_TOOLS", "Span", "TraceOptions", "parse_spans", "question_id_of",
           "REDACTED"]

#: Tool names that are searches unless ``--search-tool`` says otherwise (globs, case-insensitive):
#: the issue's two, and the search tools whose names say neither (LangChain's
#: ``duckduckgo_results_json`` and ``wikipedia``, BeeAI's ``DuckDuckGo`` and ``Wikipedia``, Tavily's).
DEFAULT_SEARCH_TOOLS: tuple[str, ...] = ("*search*", "*retriev*", "duckduckgo*", "wikipedia*", "tavily*")
#: Tool names that open a page when their arguments hold a URL (globs, case-insensitive).
OPEN_TOOLS: tuple[str, ...] = ("*fetch*", "*open*", "*browse*", "*scrape*", "*crawl*", "*visit*", "*read_url*")
#: What OpenInference writes in place of hidden inputs and outputs.
REDACTED = "__REDACTED__"

_LLM_OPS = ("chat", "text_completion", "generate_content", "completion")
_AGENT_OPS = ("invoke_agent", "create_agent")
_QUERY_KEYS = ("query", "q", "search_query", "search_term", "searchQuery", "keywords", "question", "term", "input",
               "text", "topic")
_URL_KEYS = ("url", "link", "href", "uri", "page_url")
_NO_CONTENT = ("the trace carries no content (inputs, outputs and messages were not captured: content capture "
               "is off by default in OpenTelemetry instrumentations): its queries, results and answer are not known")


@dataclass
class Span:
    """One span (or Langfuse observation) of a trace, as both importers give it.

    ``attrs``: flat attributes (typed OTLP values already unwrapped); ``events``: ``(name,
    attributes)`` pairs; ``error``: the status message of a failed span; ``kind``: Langfuse's
    observation type when the span came from Langfuse; ``input``/``output``/``model``/``usage``:
    Langfuse's own fields (read when the attributes do not say); ``order``: position in the
    input, to keep ties of start time in file order."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str = ""
    start: int = 0
    end: int = 0
    attrs: dict[str, Any] = field(default_factory=dict)
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    error: str | None = None
    kind: str | None = None
    input: Any = None
    output: Any = None
    model: str | None = None
    usage: Usage | None = None
    order: int = 0


@dataclass(frozen=True)
class TraceOptions:
    """How to read a trace: the search-tool globs and the key naming the question id."""

    search_tools: tuple[str, ...] = DEFAULT_SEARCH_TOOLS
    question_key: str = "question_id"


# -- small readers ---------------------------------------------------------------------------------
def _present(value: Any) -> Any:
    """``value`` unless it is missing, empty or redacted (then ``None``)."""
    if value is None or value == REDACTED or (isinstance(value, str) and not value.strip()):
        return None
    return value


def _nested(attrs: dict[str, Any], prefix: str) -> Any:
    """Flattened attributes under ``prefix`` (``prefix.0.message.role`` ...) as nested lists and
    dicts; ``None`` when there are none."""
    root: dict[str, Any] = {}
    start = prefix + "."
    for k, v in attrs.items():
        if not k.startswith(start):
            continue
        node = root
        parts = k[len(start):].split(".")
        for p in parts[:-1]:
            nxt = node.get(p)
            if not isinstance(nxt, dict):
                nxt = node[p] = {}
            node = nxt
        node[parts[-1]] = v
    return _lists(root) if root else None


def _lists(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    if node and all(k.isdigit() for k in node):
        return [_lists(node[k]) for k in sorted(node, key=int)]
    return {k: _lists(v) for k, v in node.items()}


def _text(value: Any) -> str:
    """The text of a message content value (a string, parts, or a content dict)."""
    value = maybe_json(value) if isinstance(value, str) and value.strip()[:1] == "[" else value
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(_text(v) for v in value if not isinstance(v, dict) or v.get("type") in (None, "text",
                                                                                                 "output_text"))
    if isinstance(value, dict):
        for k in ("content", "text"):
            if isinstance(value.get(k), (str, list)):
                return _text(value[k])
        inner = value.get("message_content")
        if isinstance(inner, dict):
            return _text(inner.get("text"))
    return ""


def _tool_kind(span: Span) -> str:
    """``tool``, ``retrieval``, ``llm``, ``agent`` or ``other``."""
    op = str(span.attrs.get("gen_ai.operation.name") or "").lower()
    oi = str(span.attrs.get("openinference.span.kind") or "").upper()
    tl = str(span.attrs.get("traceloop.span.kind") or "").lower()  # OpenLLMetry's decorators
    if op == "execute_tool" or oi == "TOOL" or tl == "tool":
        return "tool"
    if op == "retrieval" or oi == "RETRIEVER":
        return "retrieval"
    if op in _LLM_OPS or oi == "LLM" or str(span.attrs.get("llm.request.type") or "").lower() in _LLM_OPS:
        return "llm"
    if op in _AGENT_OPS or oi == "AGENT" or tl == "agent":
        return "agent"
    lf = (span.kind or "").upper()
    return {"TOOL": "tool", "RETRIEVER": "retrieval", "GENERATION": "llm", "AGENT": "agent"}.get(lf, "other")


def _tool_name(span: Span) -> str:
    name = span.attrs.get("gen_ai.tool.name") or span.attrs.get("tool.name") or span.attrs.get("traceloop.entity.name")
    if isinstance(name, str) and name.strip():
        return name.strip()
    n = span.name or ""
    for p in ("execute_tool ", "retrieval "):
        if n.startswith(p):
            return n[len(p):].strip()
    return n.strip()


def _matches(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name.lower(), p.lower()) for p in patterns)


def _call_id(span: Span) -> str | None:
    v = span.attrs.get("gen_ai.tool.call.id") or span.attrs.get("tool_call.id")
    return str(v) if v not in (None, "") else None


def _arguments(span: Span) -> Any:
    for v in (span.attrs.get("gen_ai.tool.call.arguments"), span.attrs.get("input.value"),
              span.attrs.get("traceloop.entity.input"), span.input):
        if _present(v) is not None:
            return maybe_json(v)
    return None


def _result(span: Span) -> Any:
    for v in (span.attrs.get("gen_ai.tool.call.result"), span.attrs.get("output.value"),
              span.attrs.get("traceloop.entity.output"), span.output):
        if _present(v) is not None:
            return v
    return None


def _queries(args: Any) -> list[str]:
    """The search queries in a tool call's arguments."""
    if isinstance(args, str):
        return [args.strip()] if args.strip() else []
    if isinstance(args, dict):
        for k in ("queries", "search_queries"):
            if isinstance(args.get(k), list):
                return [q.strip() for q in args[k] if isinstance(q, str) and q.strip()]
        for k in _QUERY_KEYS:
            if isinstance(args.get(k), str) and args[k].strip():
                return [args[k].strip()]
        for k in ("input", "args", "kwargs", "arguments", "tool_input"):
            inner = maybe_json(args.get(k))
            if isinstance(inner, dict):
                return _queries(inner)
        strings = [v.strip() for v in args.values() if isinstance(v, str) and v.strip()]
        if len(strings) == 1:
            return strings
    return []


def _url_arg(args: Any) -> str | None:
    if isinstance(args, str) and args.strip().startswith(("http://", "https://")):
        return args.strip()
    if isinstance(args, dict):
        for k in _URL_KEYS:
            if isinstance(args.get(k), str) and args[k].startswith(("http://", "https://")):
                return args[k]
    return None


def _has_content(span: Span) -> bool:
    keys = ("gen_ai.tool.call.arguments", "gen_ai.tool.call.result", "gen_ai.retrieval.query.text",
            "gen_ai.retrieval.documents", "gen_ai.input.messages", "gen_ai.output.messages", "input.value",
            "output.value", "gen_ai.prompt", "gen_ai.completion", "traceloop.entity.input",
            "traceloop.entity.output")
    if any(_present(span.attrs.get(k)) is not None for k in keys):
        return True
    if any(k.startswith(("llm.input_messages.", "llm.output_messages.", "retrieval.documents.", "gen_ai.prompt.",
                         "gen_ai.completion.")) for k in span.attrs):
        return True
    if any(n in ("gen_ai.content.prompt", "gen_ai.content.completion") for n, _ in span.events):
        return True
    return _present(span.input) is not None or _present(span.output) is not None


# -- model messages --------------------------------------------------------------------------------
@dataclass
class _Message:
    role: str
    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # {id, name, arguments}
    tool_results: list[dict[str, Any]] = field(default_factory=list)  # {id, result}
    server_calls: list[dict[str, Any]] = field(default_factory=list)  # {id, name, call}
    server_results: dict[str, Any] = field(default_factory=dict)  # id -> response


def _genai_messages(value: Any) -> list[_Message]:
    out = []
    for m in maybe_json(value) if isinstance(maybe_json(value), list) else []:
        if not isinstance(m, dict):
            continue
        msg = _Message(role=str(m.get("role") or ""))
        for p in m.get("parts") or []:
            if not isinstance(p, dict):
                continue
            t = p.get("type")
            if t == "text":
                msg.text += _text(p.get("content"))
            elif t == "tool_call":
                msg.tool_calls.append({"id": p.get("id"), "name": p.get("name"),
                                       "arguments": maybe_json(p.get("arguments"))})
            elif t == "tool_call_response":
                msg.tool_results.append({"id": p.get("id"), "result": p.get("response", p.get("result"))})
            elif t == "server_tool_call":
                msg.server_calls.append({"id": p.get("id"), "name": p.get("name"),
                                         "call": p.get("server_tool_call") or {}})
            elif t == "server_tool_call_response":
                msg.server_results[str(p.get("id"))] = p.get("server_tool_call_response")
        if not m.get("parts") and m.get("content") is not None:  # the older {role, content} shape
            msg.text = _text(m.get("content"))
        out.append(msg)
    return out


def _plain_messages(value: Any) -> list[_Message]:
    """Messages in the OpenAI shape (``role``, ``content``, ``tool_calls``, ``tool_call_id``),
    as Langfuse stores a generation's input and output and old ``gen_ai.prompt`` holds them."""
    value = maybe_json(value)
    if isinstance(value, dict):
        value = value.get("messages") if isinstance(value.get("messages"), list) else [value]
    if isinstance(value, str):
        return [_Message(role="assistant", text=value)]
    out = []
    for m in value if isinstance(value, list) else []:
        if not isinstance(m, dict):
            continue
        if isinstance(m.get("message"), dict):  # {"message": {...}} (OpenInference) or a choice
            m = m["message"]
        role = str(m.get("role") or m.get("message.role") or m.get("type") or "")
        msg = _Message(role={"ai": "assistant", "human": "user"}.get(role, role))
        msg.text = _text(m.get("content", m.get("message.content", m.get("contents", ""))))
        for c in m.get("tool_calls") or []:
            if isinstance(c, dict):
                c = c.get("tool_call", c)
                fn = c.get("function") if isinstance(c.get("function"), dict) else {}
                msg.tool_calls.append({"id": c.get("id"), "name": fn.get("name", c.get("name")),
                                       "arguments": maybe_json(fn.get("arguments", c.get("arguments", c.get("args"))))})
        tid = m.get("tool_call_id")
        if msg.role == "tool" and tid:
            msg.tool_results.append({"id": tid, "result": m.get("content")})
        out.append(msg)
    return out


def _messages(span: Span, side: str) -> list[_Message]:
    """The model's input (``input``) or output (``output``) messages of an LLM span."""
    a = span.attrs
    v = _present(a.get(f"gen_ai.{side}.messages"))
    if v is not None:
        return _genai_messages(v)
    oi = _nested(a, f"llm.{side}_messages")
    if isinstance(oi, list):
        return _plain_messages(oi)
    old = "gen_ai.completion" if side == "output" else "gen_ai.prompt"
    flat = _nested(a, old)
    if isinstance(flat, list):
        return _plain_messages(flat)
    event = "gen_ai.content.completion" if side == "output" else "gen_ai.content.prompt"
    for name, attrs in span.events:
        if name == event and _present(attrs.get(old)) is not None:
            return _plain_messages(attrs[old])
    if _present(a.get(old)) is not None:
        return _plain_messages(a[old])
    v = span.output if side == "output" else span.input
    if _present(v) is not None:
        return _plain_messages(v)
    return []


# -- answers ---------------------------------------------------------------------------------------
def answer_text(value: Any) -> str | None:
    """The final answer in an agent's or trace's output: text, or the last assistant message's
    text, or the ``output``/``answer``/``content`` of a result object."""
    value = maybe_json(value)
    if _present(value) is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        msgs = [m for m in _plain_messages(value) if m.role in ("assistant", "model", "")]
        for m in reversed(msgs):
            if m.text.strip():
                return m.text
        return None
    if isinstance(value, dict):
        if isinstance(value.get("messages"), list):
            return answer_text(value["messages"])
        for k in ("output", "final_output", "answer", "response", "result", "content", "text"):
            if value.get(k) is not None:
                return answer_text(value[k])
        if isinstance(value.get("parts"), list):
            return _text([p for p in value["parts"] if isinstance(p, dict) and p.get("type") == "text"]) or None
    return None


# -- the trajectory --------------------------------------------------------------------------------
@dataclass
class _Call:
    span: Span | None
    name: str
    call_id: str | None
    args: Any
    result: Any
    error: str | None
    start: int
    order: int
    retrieval: bool = False
    documents: Any = None
    attempts: int = 1
    parent: str | None = None


def _documents(span: Span) -> Any:
    docs = _present(span.attrs.get("gen_ai.retrieval.documents"))
    if docs is not None:
        return maybe_json(docs)
    oi = _nested(span.attrs, "retrieval.documents")
    if oi is not None:
        return oi
    return _result(span)


def _legacy_tool(span: Span, parents: set[str], patterns: Sequence[str]) -> bool:
    """A Langfuse ``SPAN`` observation that older SDKs (LangChain callbacks before observation
    types) wrote for a tool call: no OTel attributes, a leaf, with an input, named like a search."""
    return ((span.kind or "").upper() == "SPAN" and not span.attrs and span.span_id not in parents
            and _present(span.input) is not None and _matches(span.name, patterns))


def _calls_from_spans(spans: Sequence[Span], patterns: Sequence[str] = ()) -> list[_Call]:
    calls = []
    parents = {s.parent_id for s in spans if s.parent_id}
    for s in spans:
        kind = _tool_kind(s)
        if kind == "other" and _legacy_tool(s, parents, patterns):
            kind = "tool"
        if kind == "tool":
            calls.append(_Call(s, _tool_name(s), _call_id(s), _arguments(s), _result(s), s.error, s.start, s.order,
                               parent=s.parent_id))
        elif kind == "retrieval":
            q = _present(s.attrs.get("gen_ai.retrieval.query.text"))
            args = q if q is not None else _arguments(s)
            docs = _documents(s)
            calls.append(_Call(s, _tool_name(s) or "retrieval", _call_id(s), args, docs, s.error, s.start, s.order,
                               retrieval=True, documents=docs, parent=s.parent_id))
    return calls


def _calls_from_messages(llm: Sequence[Span]) -> list[_Call]:
    """Tool calls the model's messages show (for traces without tool spans)."""
    results: dict[str, Any] = {}
    for s in llm:
        for m in _messages(s, "input"):
            for r in m.tool_results:
                if r.get("id"):
                    results[str(r["id"])] = r.get("result")
    calls = []
    for s in llm:
        for m in _messages(s, "output"):
            for i, c in enumerate(m.tool_calls):
                cid = str(c["id"]) if c.get("id") else None
                calls.append(_Call(None, str(c.get("name") or ""), cid, c.get("arguments"),
                                   results.get(cid) if cid else None, None, s.end or s.start, s.order * 1000 + i))
    return calls


def _server_calls(llm: Sequence[Span]) -> list[_Call]:
    """Provider-side tool calls (``server_tool_call`` parts): a hosted web search."""
    calls = []
    for s in llm:
        for m in _messages(s, "output"):
            for i, c in enumerate(m.server_calls):
                call = c.get("call") if isinstance(c.get("call"), dict) else {}
                name = str(c.get("name") or call.get("type") or "")
                action = call.get("action") if isinstance(call.get("action"), dict) else {}
                args = {k: v for k, v in {**action, **call}.items() if k in ("query", "queries")}
                resp = m.server_results.get(str(c.get("id")))
                calls.append(_Call(None, name, c.get("id"), args or None, resp, None, s.end or s.start,
                                   s.order * 1000 + 500 + i))
    return calls


def _merge_retries(calls: list[_Call], parsed: Parsed) -> list[_Call]:
    """One call per tool call: later attempts of one call id (or, without an id, of a failed
    call with the same name, arguments and parent) replace the earlier ones."""
    out: list[_Call] = []
    by_id: dict[str, int] = {}
    for c in calls:
        prev = by_id.get(c.call_id) if c.call_id else None
        if prev is None and not c.call_id and out:
            last = out[-1]
            if (last.error and not last.call_id and last.name == c.name and last.args == c.args
                    and last.parent == c.parent):
                prev = len(out) - 1
        if prev is not None:
            c.attempts = out[prev].attempts + 1
            out[prev] = c
            parsed.note(f"tool call {c.call_id or c.name!r} was tried {c.attempts} times: its last attempt is kept")
            continue
        if c.call_id:
            by_id[c.call_id] = len(out)
        out.append(c)
    return out


def _usage(llm: Sequence[Span]) -> Usage:
    total = Usage(cost_usd=None)
    for s in llm:
        a = s.attrs

        def num(*keys: str, attrs: dict[str, Any] = a) -> int:
            for k in keys:
                if attrs.get(k) is not None:
                    try:
                        return int(float(attrs[k]))
                    except (TypeError, ValueError):
                        return 0
            return 0

        prompt = num("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt")
        completion = num("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens", "llm.token_count.completion")
        if prompt or completion:
            total = total + Usage(prompt_tokens=prompt, completion_tokens=completion,
                                  cached_tokens=num("gen_ai.usage.cache_read.input_tokens",
                                                    "llm.token_count.prompt_details.cache_read"),
                                  reasoning_tokens=num("gen_ai.usage.reasoning.output_tokens",
                                                       "llm.token_count.completion_details.reasoning"),
                                  calls=1, cost_usd=None)
        elif s.usage is not None:
            total = total + s.usage
        else:
            total = total + Usage(calls=1, cost_usd=None)
    return total


def _model(llm: Sequence[Span]) -> str | None:
    for s in reversed(llm):
        for k in ("gen_ai.response.model", "gen_ai.request.model", "llm.model_name"):
            if isinstance(s.attrs.get(k), str) and s.attrs[k].strip():
                return s.attrs[k].strip()
        if s.model:
            return s.model
    return None


def _answer(spans: Sequence[Span], llm: Sequence[Span], trace_output: Any) -> str | None:
    text = answer_text(trace_output)
    if text is not None and text.strip():
        return text
    ids = {s.span_id for s in spans}
    for root in (s for s in spans if not s.parent_id or s.parent_id not in ids):
        out = _present(root.attrs.get("output.value")) or _present(root.attrs.get("final_result"))
        if out is None and _tool_kind(root) == "agent":
            msgs = _messages(root, "output")
            out = next((m.text for m in reversed(msgs) if m.text.strip()), None)
        if out is None:
            out = root.output
        text = answer_text(out)
        if text is not None and text.strip():
            return text
    for s in sorted(llm, key=lambda s: (s.end or s.start, s.order), reverse=True):
        msgs = _messages(s, "output")
        if msgs and not any(m.tool_calls or m.server_calls for m in msgs):
            text = next((m.text for m in reversed(msgs) if m.text.strip()), None)
            if text:
                return text
    return None


def parse_spans(spans: Sequence[Span], options: TraceOptions, *, trace_output: Any = None) -> Parsed:
    """The :class:`~trek.imports.common.Parsed` record of one trace's spans (see the module
    docstring); ``trace_output``: Langfuse's ``trace.output``."""
    spans = sorted(spans, key=lambda s: (s.start, s.order))
    ids = {s.span_id for s in spans}
    roots = [s for s in spans if not s.parent_id or s.parent_id not in ids]
    parsed = Parsed(record_id=spans[0].trace_id if spans else None)
    parsed.details["trace"] = {"trace_id": spans[0].trace_id if spans else None,
                               "root_span_id": roots[0].span_id if roots else None}
    llm = [s for s in spans if _tool_kind(s) == "llm"]
    wrappers = {s.parent_id for s in spans if s.parent_id and _tool_kind(s) in ("tool", "retrieval", "llm")}
    calls = _calls_from_spans(spans, options.search_tools)
    if not calls:
        calls = _calls_from_messages(llm)
    calls += _server_calls(llm)
    calls.sort(key=lambda c: (c.start, c.order))
    calls = _merge_retries(calls, parsed)
    starts = sorted(s.start for s in llm)
    content = any(_has_content(s) for s in spans)
    searches_seen = with_query = with_result = 0
    for c in calls:
        rnd = max(1, sum(1 for t in starts if t <= c.start)) if starts else 1
        wraps = c.span is not None and _wraps(c.span, wrappers, spans)
        is_search = c.retrieval or (_matches(c.name, options.search_tools) and not wraps)
        if is_search:
            searches_seen += 1
            queries = _queries(c.args)
            with_query += bool(queries)
            pr = parse_result(c.documents if c.retrieval else c.result, c.name, documents=c.retrieval)
            if c.result is not None or c.error or (c.retrieval and c.documents is not None):
                with_result += 1  # a failed search returned nothing: that is recorded too
            if pr.how:
                parsed.note(pr.how)
            parsed.pages += pr.pages
            for q in queries or [""]:
                parsed.steps.append(TrajectoryStep(kind="search", round=rnd, tool=c.name or None, call_id=c.call_id,
                                                   query=q, result_urls=[r.url for r in pr.results],
                                                   search_index=len(parsed.searches), error=c.error))
                parsed.searches.append(SearchCall(query=q, backend=c.name or "trace", results=list(pr.results),
                                                  round=rnd, error=c.error))
            continue
        url = _url_arg(c.args) if _matches(c.name, OPEN_TOOLS) else None
        if url:
            parsed.opened.append(url)
            text = _result_text(c.result)
            if text:
                parsed.pages.append(PageText(url=url, kind="full", text=text))
            parsed.steps.append(TrajectoryStep(kind="open", round=rnd, tool=c.name or None, call_id=c.call_id,
                                               url=url, error=c.error, shown_chars=len(text) if text else None))
            continue
        text = _result_text(c.result)
        parsed.steps.append(TrajectoryStep(kind="tool", round=rnd, tool=c.name or None, call_id=c.call_id,
                                           error=c.error, shown_chars=len(text) if c.result is not None else None))
    if not content:
        parsed.note(_NO_CONTENT)
        parsed.queries, parsed.results = "none", "none"
    else:
        if searches_seen and with_query < searches_seen:
            parsed.queries = "none" if not with_query else "some"
            parsed.note(f"{searches_seen - with_query} of {searches_seen} search(es) carry no query in the trace")
        if searches_seen and with_result < searches_seen:
            parsed.results = "none" if not with_result else "cited_only"
            parsed.note(f"the results of {searches_seen - with_result} of {searches_seen} search(es) are not in "
                        "the trace" + ("" if not with_result else ": the pages retrieved are a lower bound"))
    if parsed.results == "none":
        for s in parsed.searches:
            s.results = []
        for st in parsed.steps:
            st.result_urls = []
    parsed.model = _model(llm)
    parsed.usage = _usage(llm)
    parsed.answer = _answer(spans, llm, trace_output)
    if llm:
        parsed.answer_round = len(starts)
    if parsed.answer is None:
        parsed.status = "failed"
        parsed.error = "the trace shows no final answer" + (" (it carries no content)" if not content else "")
    return parsed


def _wraps(span: Span, parents: set[str], spans: Sequence[Span]) -> bool:
    """Whether ``span`` holds model or tool spans below it (an agent run as a tool: its own
    calls count, the wrapper is not a search)."""
    if span.span_id in parents:
        return True
    children = {s.span_id for s in spans if s.parent_id == span.span_id}
    return any(c in parents for c in children)


def _result_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    text = answer_text(value)
    return text if text else json.dumps(value, ensure_ascii=False, sort_keys=True)


# -- question ids ----------------------------------------------------------------------------------
def _from_tags(tags: Any, key: str) -> str | None:
    tags = maybe_json(tags)
    for t in tags if isinstance(tags, list) else []:
        if isinstance(t, str):
            for sep in (":", "="):
                k, s, v = t.partition(sep)
                if s and k.strip() == key and v.strip():
                    return v.strip()
    return None


def question_id_of(spans: Sequence[Span], key: str, *extra: Any) -> str | None:
    """The question id a trace names: ``key`` in ``extra`` mappings (Langfuse's trace metadata,
    OTLP resource attributes) or tags, or in a span's attributes (``key`` itself,
    ``langfuse.trace.metadata.KEY``, OpenInference's ``metadata`` JSON, ``tag.tags`` /
    ``langfuse.trace.tags`` as ``KEY:VALUE``), root spans first."""

    def scalar(v: Any) -> str | None:
        return str(v).strip() if isinstance(v, (str, int)) and not isinstance(v, bool) and str(v).strip() else None

    for m in extra:
        if isinstance(m, dict):
            if scalar(m.get(key)):
                return scalar(m.get(key))
        elif isinstance(m, list) and _from_tags(m, key):
            return _from_tags(m, key)
    ordered = sorted(spans, key=lambda s: (bool(s.parent_id), s.start, s.order))
    for s in ordered:
        a = s.attrs
        for v in (a.get(key), a.get(f"langfuse.trace.metadata.{key}"), a.get(f"metadata.{key}")):
            if scalar(v):
                return scalar(v)
        meta = maybe_json(a.get("metadata"))
        if isinstance(meta, dict) and scalar(meta.get(key)):
            return scalar(meta.get(key))
        for tags in (a.get("tag.tags"), a.get("langfuse.trace.tags")):
            if _from_tags(tags, key):
                return _from_tags(tags, key)
    return None
