"""One trace's spans as a trajectory: the part of ``otlp`` and ``langfuse`` they share.

The API other span sources build on (names kept stable): :class:`Span` (one span, flat
attributes), :class:`TraceOptions`, :func:`parse_spans` (a trace's spans to a
:class:`~trek.imports.common.Parsed` record), :func:`question_id_of` and :func:`question_texts`
(what a trace says of its question, for :func:`trek.imports.common.match_traces`),
:func:`adopt_dialects` (the Langfuse SDK's and MLflow's attributes as Langfuse fields),
:func:`keep_attributes` (the attributes worth keeping while reading many spans),
:func:`answer_text` and :func:`usage_of`; :func:`trek.imports.otlp.attributes` and
:func:`trek.imports.otlp.any_value` read OTLP's typed values.

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

import bisect
import fnmatch
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trek.imports.common import PageText, Parsed
from trek.imports.fields import FieldError, count, model_name
from trek.imports.tool_results import maybe_json, parse_result
from trek.jsonio import MAX_DEPTH
from trek.types import SearchCall, TrajectoryStep, Usage

__all__ = ["DEFAULT_SEARCH_TOOLS", "OPEN_TOOLS", "Span", "TraceOptions", "parse_spans", "question_id_of",
           "REDACTED", "adopt_dialects", "answer_text", "usage_of", "question_texts", "keep_attributes",
           "READ_PREFIXES", "READ_NAMES"]

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


@dataclass(slots=True)
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
    #: Names of text attributes of conventions Trek does not read, left out when the span was read
    #: (:func:`keep_attributes`); the coverage note names them when nothing else carries content.
    unread: tuple[str, ...] = ()


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
    dicts; ``None`` when there are none. A key of more than :data:`~trek.jsonio.MAX_DEPTH` parts
    is refused (a broken or hostile attribute)."""
    root: dict[str, Any] = {}
    start = prefix + "."
    for k, v in attrs.items():
        if not k.startswith(start):
            continue
        node = root
        parts = k[len(start):].split(".")
        if len(parts) > MAX_DEPTH:
            raise FieldError(k[:80], f"an attribute name of more than {MAX_DEPTH} parts: refused")
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
    value = maybe_json(value, "content") if isinstance(value, str) and value.strip()[:1] == "[" else value
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(_text(v) for v in value if not isinstance(v, dict) or (
            v.get("type") in (None, "text", "output_text") and not v.get("thought")))
    if isinstance(value, dict):
        for k in ("content", "text"):
            if isinstance(value.get(k), (str, list)):
                return _text(value[k])
        inner = value.get("message_content")
        if isinstance(inner, dict):
            return _text(inner.get("text"))
    return ""


#: Attribute name prefixes and names the span readers look at; others are left out as a span is
#: read (:func:`keep_attributes`), so a trace of many framework spans (HTTP, database) stays small.
READ_PREFIXES = ("gen_ai.", "llm.", "openinference.", "input.", "output.", "retrieval.", "tool.", "tool_call.",
                 "traceloop.", "langfuse.", "mlflow.", "metadata", "tag.")
READ_NAMES = ("target", "error", "final_result", "tools")


def keep_attributes(attrs: dict[str, Any], question_key: str) -> tuple[dict[str, Any], tuple[str, ...]]:
    """``attrs`` without the attributes no span reader looks at (:data:`READ_PREFIXES`,
    :data:`READ_NAMES`, ``question_key``), and the names of the text attributes of 40 characters
    or more left out (for the coverage note)."""
    keep: dict[str, Any] = {}
    unread: list[str] = []
    for k, v in attrs.items():
        if k.startswith(READ_PREFIXES) or k in READ_NAMES or k == question_key:
            keep[k] = v
        elif isinstance(v, str) and len(v) >= 40 and not k.startswith(("telemetry.", "service.", "process.")):
            unread.append(k)
    return keep, tuple(unread)


#: What each MLflow span type is, as a Langfuse observation type.
_MLFLOW_KINDS = {"TOOL": "TOOL", "RETRIEVER": "RETRIEVER", "CHAT_MODEL": "GENERATION", "LLM": "GENERATION",
                 "AGENT": "AGENT"}


def _attr(span: Span, *keys: str) -> Any:
    for k in keys:
        v = _present(span.attrs.get(k))
        if v is not None:
            return v
    return None


def adopt_dialects(span: Span) -> Span:
    """Fill the Langfuse-style fields of ``span`` (``kind``, ``input``, ``output``, ``model``,
    ``usage``) from the attributes of the SDKs that keep everything in their own namespace, when
    the span does not have them yet:

    * the Langfuse SDK (v3+, OpenTelemetry-based): ``langfuse.observation.type`` / ``.input`` /
      ``.output`` / ``.model.name`` / ``.usage_details``;
    * MLflow tracing: ``mlflow.spanType`` (``TOOL``, ``RETRIEVER``, ``CHAT_MODEL``, ``LLM``,
      ``AGENT``; others are plain spans), ``mlflow.spanInputs``, ``mlflow.spanOutputs``,
      ``mlflow.llm.model``, ``mlflow.chat.tokenUsage`` (JSON text, as MLflow's server keeps them,
      or OTLP structures, as ``Span.to_otel_proto`` writes them).

    :func:`parse_spans` calls it on every span; it changes ``span`` in place and returns it."""
    if span.kind is None:
        t = _attr(span, "langfuse.observation.type")
        if isinstance(t, str):
            span.kind = t.strip().upper()
        else:
            t = maybe_json(_attr(span, "mlflow.spanType"), "mlflow.spanType")
            if isinstance(t, str) and t.strip():
                span.kind = _MLFLOW_KINDS.get(t.strip().upper(), "SPAN")
    if span.input is None:
        span.input = _attr(span, "langfuse.observation.input", "mlflow.spanInputs")
    if span.output is None:
        span.output = _attr(span, "langfuse.observation.output", "mlflow.spanOutputs")
    if span.model is None:
        m = _attr(span, "langfuse.observation.model.name", "mlflow.llm.model")
        span.model = model_name(m, "langfuse.observation.model.name") if m is not None else None
    if span.usage is None:
        for key in ("langfuse.observation.usage_details", "mlflow.chat.tokenUsage"):
            raw = _attr(span, key)
            if raw is not None:
                span.usage = usage_of(maybe_json(raw, key), key)
                break
    return span


def usage_of(u: Any, where: str) -> Usage | None:
    """One model call's usage from a usage mapping (OpenAI's ``prompt_tokens`` /
    ``completion_tokens``, Anthropic's and MLflow's ``input_tokens`` / ``output_tokens``,
    Langfuse's ``input`` / ``output``, camelCase too), every count read by the typed-field rule
    (:func:`trek.imports.fields.count`: a count that is not a whole number in range is refused,
    naming ``where`` and the key). ``None`` when it names neither side."""
    if not isinstance(u, dict):
        if u is None:
            return None
        raise FieldError(where, f"expected a mapping of token counts, got {type(u).__name__}")

    def one(*keys: str) -> tuple[int, bool]:
        for k in keys:
            if k in u and u[k] is not None:
                return count(u[k], f"{where}.{k}", digits=True), True
        return 0, False

    prompt, has_p = one("input", "prompt_tokens", "input_tokens", "promptTokens", "inputTokens")
    completion, has_c = one("output", "completion_tokens", "output_tokens", "completionTokens", "outputTokens")
    if not (has_p or has_c):
        return None
    cached, _ = one("cache_read_input_tokens", "input_cached_tokens", "cached_tokens")
    details = u.get("completion_tokens_details")
    reasoning = count(details.get("reasoning_tokens"), f"{where}.completion_tokens_details.reasoning_tokens",
                      digits=True) \
        if isinstance(details, dict) else 0
    return Usage(prompt_tokens=prompt, completion_tokens=completion, cached_tokens=cached, reasoning_tokens=reasoning,
                 calls=1, cost_usd=None)


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


#: A tool span that is one event of a tool run (BeeAI: ``tool.search.wikipedia.start-12``,
#: ``...finish-12``, ``...success-12``): the run's name, the event and the run's number.
_TOOL_EVENT = re.compile(r"^(?P<base>.+?)\.(?P<event>start|finish|success|error|end|done)(?:-(?P<run>\d+))?$")


def _tool_event(span: Span) -> re.Match[str] | None:
    for name in (span.attrs.get("target"), span.name):
        if isinstance(name, str):
            m = _TOOL_EVENT.match(name.strip())
            if m:
                return m
    return None


def _tool_name(span: Span) -> str:
    name = span.attrs.get("gen_ai.tool.name") or span.attrs.get("tool.name") or span.attrs.get("traceloop.entity.name") \
        or span.attrs.get("mlflow.spanFunctionName")
    if isinstance(name, str) and name.strip():
        return name.strip()
    ev = _tool_event(span)
    if ev is not None:
        return ev.group("base").removeprefix("tool.")
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


_ARG_KEYS = ("gen_ai.tool.call.arguments", "input.value", "traceloop.entity.input")


def _arguments(span: Span) -> Any:
    for k in _ARG_KEYS:
        if _present(span.attrs.get(k)) is not None:
            return maybe_json(span.attrs[k], k)
    params = maybe_json(_present(span.attrs.get("tool.parameters")), "tool.parameters")
    if isinstance(params, dict) and "properties" not in params:  # BeeAI writes a call's arguments there
        return params
    if _present(span.input) is not None:
        return maybe_json(span.input, "input")
    return None


def _result(span: Span) -> Any:
    for v in (span.attrs.get("gen_ai.tool.call.result"), span.attrs.get("output.value"),
              span.attrs.get("traceloop.entity.output"), span.output):
        if _present(v) is not None:
            return v
    return None


def _positional(args: dict[str, Any]) -> bool:
    """Whether ``args`` is a Python call's record: ``{"args": [...], "kwargs": {...}}``."""
    return isinstance(args.get("args"), list) and set(args) <= {"args", "kwargs"} and \
        isinstance(args.get("kwargs", {}), (dict, type(None)))


def _queries(args: Any, params: Sequence[str] | None = None, why: list[str] | None = None) -> list[str]:
    """The search queries in a tool call's arguments. ``params``: the tool's parameter names in
    order, when the trace defines the tool (a positional argument is then named by them); ``why``
    gets the reason a positional call gives no query."""
    if isinstance(args, str):
        return [args.strip()] if args.strip() else []
    if isinstance(args, dict):
        if _positional(args):
            pos, kw = args["args"], args.get("kwargs") or {}
            if params:
                return _queries({**dict(zip(params, pos, strict=False)), **kw})
            if kw:
                got = _queries(kw)
                if got:
                    return got
            if len(pos) == 1 and not kw and isinstance(pos[0], str):
                return [pos[0].strip()] if pos[0].strip() else []
            if why is not None:
                why.append(f"called with {len(pos)} positional argument(s) and the trace does not define the "
                           "tool's parameters, so which one is the query is not known")
            return []
        for k in ("queries", "search_queries"):
            if isinstance(args.get(k), list):
                return [q.strip() for q in args[k] if isinstance(q, str) and q.strip()]
        for k in _QUERY_KEYS:
            if isinstance(args.get(k), str) and args[k].strip():
                return [args[k].strip()]
        for k in ("input", "args", "kwargs", "arguments", "tool_input"):
            inner = maybe_json(args.get(k), k)
            if isinstance(inner, dict):
                return _queries(inner, params, why)
        strings = [v.strip() for v in args.values() if isinstance(v, str) and v.strip()]
        if len(strings) == 1:
            return strings
    return []


def _url_arg(args: Any) -> str | None:
    if isinstance(args, str) and args.strip().startswith(("http://", "https://")):
        return args.strip()
    if isinstance(args, dict):
        if _positional(args) and len(args["args"]) == 1:
            return _url_arg(args["args"][0])
        for k in _URL_KEYS:
            if isinstance(args.get(k), str) and args[k].startswith(("http://", "https://")):
                return args[k]
    return None


_CONTENT_KEYS = ("gen_ai.tool.call.arguments", "gen_ai.tool.call.result", "gen_ai.retrieval.query.text",
                 "gen_ai.retrieval.documents", "gen_ai.input.messages", "gen_ai.output.messages", "input.value",
                 "output.value", "gen_ai.prompt", "gen_ai.completion", "traceloop.entity.input",
                 "traceloop.entity.output", "tool.parameters")
_CONTENT_PREFIXES = ("llm.input_messages.", "llm.output_messages.", "retrieval.documents.", "gen_ai.prompt.",
                     "gen_ai.completion.")


def _has_content(span: Span) -> bool:
    if any(_present(span.attrs.get(k)) is not None for k in _CONTENT_KEYS):
        return True
    if any(k.startswith(_CONTENT_PREFIXES) for k in span.attrs):
        return True
    if any(n in ("gen_ai.content.prompt", "gen_ai.content.completion") for n, _ in span.events):
        return True
    return _present(span.input) is not None or _present(span.output) is not None


def _no_content_note(spans: Sequence[Span]) -> str:
    """What the coverage note says of a trace in which no span holds content Trek reads: the text
    attributes it does hold, when there are any (another convention), else that none was captured."""
    other = sorted({k for s in spans for k, v in s.attrs.items()
                    if isinstance(v, str) and len(v) >= 40 and not k.startswith(("telemetry.", "service.", "process."))}
                   | {k for s in spans for k in s.unread})
    if other:
        shown = ", ".join(other[:5]) + (f" and {len(other) - 5} more" if len(other) > 5 else "")
        return ("no span holds inputs, outputs or messages under a convention Trek reads (OpenTelemetry GenAI, "
                f"OpenInference, OpenLLMetry, Langfuse, MLflow); the spans' text attributes are {shown}: the "
                "trace's queries, results and answer are not known")
    return _NO_CONTENT


# -- model messages --------------------------------------------------------------------------------
@dataclass
class _Message:
    role: str
    text: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # {id, name, arguments}
    tool_results: list[dict[str, Any]] = field(default_factory=list)  # {id, result}
    server_calls: list[dict[str, Any]] = field(default_factory=list)  # {id, name, call}
    server_results: dict[str, Any] = field(default_factory=dict)  # id -> response


_ROLES = {"ai": "assistant", "human": "user", "model": "assistant", "AIMessage": "assistant",
          "AIMessageChunk": "assistant", "HumanMessage": "user", "HumanMessageChunk": "user",
          "SystemMessage": "system", "ToolMessage": "tool", "FunctionMessage": "tool"}


def _tool_call(c: Any) -> dict[str, Any] | None:
    """One tool call in any of the shapes messages write it (OpenAI's ``function``, LangChain's
    ``args``, OpenInference's ``tool_call``, Gemini's ``function_call``, Anthropic's ``tool_use``,
    the Vercel AI SDK's ``toolCallId``/``toolName``)."""
    if not isinstance(c, dict):
        return None
    c = c.get("tool_call", c) if isinstance(c.get("tool_call"), dict) else c
    fc = c.get("function_call", c.get("functionCall"))
    if isinstance(fc, dict):
        return {"id": fc.get("id"), "name": fc.get("name"), "arguments": fc.get("args")}
    if "toolName" in c:
        return {"id": c.get("toolCallId"), "name": c.get("toolName"),
                "arguments": maybe_json(c.get("input", c.get("args")), "input")}
    fn = c.get("function") if isinstance(c.get("function"), dict) else {}
    args = fn.get("arguments", c.get("arguments", c.get("args", c.get("input"))))
    return {"id": c.get("id"), "name": fn.get("name", c.get("name")), "arguments": maybe_json(args, "arguments")}


def _parts(msg: _Message, parts: list[Any]) -> None:
    """The parts of a message (OpenTelemetry GenAI's typed parts, Gemini's ``text`` /
    ``function_call`` / ``function_response`` parts, content blocks) into ``msg``."""
    for p in parts:
        if not isinstance(p, dict):
            if isinstance(p, str):
                msg.text += p
            continue
        t = p.get("type")
        if t in ("text", "output_text") or (t is None and isinstance(p.get("text"), str)):
            if not p.get("thought"):
                msg.text += _text(p.get("content", p.get("text")))
        elif t in ("tool_call", "tool_use", "tool-call", "function_call") or (
                t is None and isinstance(p.get("function_call", p.get("functionCall")), dict)):
            call = _tool_call(p)
            if call:
                msg.tool_calls.append(call)
        elif t in ("tool_call_response", "tool_result", "tool-result") or (
                t is None and isinstance(p.get("function_response", p.get("functionResponse")), dict)):
            fr = p.get("function_response", p.get("functionResponse"))
            if isinstance(fr, dict):
                msg.tool_results.append({"id": fr.get("id"), "result": fr.get("response")})
            else:
                msg.tool_results.append({"id": p.get("id", p.get("tool_use_id", p.get("toolCallId"))),
                                         "result": p.get("response", p.get("result", p.get("content",
                                                                                           p.get("output"))))})
        elif t == "server_tool_call":
            msg.server_calls.append({"id": p.get("id"), "name": p.get("name"),
                                     "call": p.get("server_tool_call") or {}})
        elif t == "server_tool_call_response":
            msg.server_results[str(p.get("id"))] = p.get("server_tool_call_response")


def _one_message(m: Any) -> _Message | None:
    if not isinstance(m, dict):
        return None
    if m.get("type") == "constructor" and isinstance(m.get("kwargs"), dict):  # a serialized LangChain message
        ids = m.get("id") if isinstance(m.get("id"), list) else []
        cls = str(ids[-1]) if ids else ""
        m = {**m["kwargs"], "role": _ROLES.get(cls, m["kwargs"].get("role") or m["kwargs"].get("type") or cls)}
    if isinstance(m.get("message"), dict):  # {"message": {...}} (OpenInference) or a choice
        m = m["message"]
    if "toolName" in m and "role" not in m:  # a Vercel AI SDK tool call alone
        call = _tool_call(m)
        return _Message(role="assistant", tool_calls=[call] if call else [])
    role = str(m.get("role") or m.get("message.role") or m.get("type") or "")
    msg = _Message(role=_ROLES.get(role, role))
    if isinstance(m.get("parts"), list):
        _parts(msg, m["parts"])
    else:
        content = m.get("content", m.get("message.content", m.get("contents", m.get("text", ""))))
        content = maybe_json(content, "content") if isinstance(content, str) and content.strip()[:1] == "[" else content
        if isinstance(content, list) and any(isinstance(p, dict) and p.get("type") not in (None, "text", "output_text")
                                             for p in content):
            _parts(msg, content)
        else:
            msg.text = _text(content)
    calls = m.get("tool_calls")
    if not calls and isinstance(m.get("additional_kwargs"), dict):
        calls = m["additional_kwargs"].get("tool_calls")
    for c in calls if isinstance(calls, list) else []:
        call = _tool_call(c)
        if call:
            msg.tool_calls.append(call)
    tid = m.get("tool_call_id")
    if msg.role == "tool" and tid:
        msg.tool_results.append({"id": tid, "result": m.get("content")})
    return msg


def _read_messages(value: Any, where: str = "messages", side: str = "output") -> list[_Message]:
    """Messages in any of the shapes traces hold them: OpenAI's (``role``, ``content``,
    ``tool_calls``, ``tool_call_id``; a completion's ``choices``), OpenTelemetry GenAI's
    (``role``, ``parts``), LangChain's (serialized messages, a graph state's ``messages``),
    Gemini's (``candidates``, ``role`` ``model`` with ``parts``), a list of Vercel AI SDK tool
    calls; a plain text is one message (the assistant's on the output ``side``)."""
    value = maybe_json(value, where)
    if isinstance(value, str):
        return [_Message(role="assistant" if side == "output" else "user", text=value)]
    if isinstance(value, dict):
        if isinstance(value.get("messages"), list):
            value = value["messages"]
        elif isinstance(value.get("choices"), list):
            value = value["choices"]
        elif isinstance(value.get("candidates"), list):
            value = [c.get("content") for c in value["candidates"] if isinstance(c, dict)]
        else:
            value = [value]
    out = []
    for m in value if isinstance(value, list) else []:
        msg = _one_message(m)
        if msg is not None:
            out.append(msg)
    return out


def _messages(span: Span, side: str) -> list[_Message]:
    """The model's input (``input``) or output (``output``) messages of an LLM span."""
    a = span.attrs
    key = f"gen_ai.{side}.messages"
    if _present(a.get(key)) is not None:
        return _read_messages(a[key], key, side)
    oi = _nested(a, f"llm.{side}_messages")
    if isinstance(oi, list):
        return _read_messages(oi, f"llm.{side}_messages", side)
    old = "gen_ai.completion" if side == "output" else "gen_ai.prompt"
    flat = _nested(a, old)
    if isinstance(flat, list):
        return _read_messages(flat, old, side)
    event = "gen_ai.content.completion" if side == "output" else "gen_ai.content.prompt"
    for name, attrs in span.events:
        if name == event and _present(attrs.get(old)) is not None:
            return _read_messages(attrs[old], old, side)
    if _present(a.get(old)) is not None:
        return _read_messages(a[old], old, side)
    v = span.output if side == "output" else span.input
    if _present(v) is not None:
        return _read_messages(v, side, side)
    return []


# -- answers ---------------------------------------------------------------------------------------
@dataclass
class _End:
    """How a run ends: its answer ``text``, or the names of the tool calls it ends on."""

    text: str | None = None
    tools: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool((self.text and self.text.strip()) or self.tools)


_ANSWER_KEYS = ("output", "final_output", "answer", "response", "result", "content", "text", "completion")


def _end_of(msgs: Sequence[_Message]) -> _End:
    """The end of a conversation: the last assistant message's text, or the tool calls it makes."""
    for m in reversed(msgs):
        if m.role not in ("assistant", ""):
            continue
        if m.tool_calls:
            return _End(tools=[str(c.get("name") or "?") for c in m.tool_calls])
        if m.text.strip():
            return _End(text=m.text)
    return _End()


def _is_message(value: dict[str, Any]) -> bool:
    return any(k in value for k in ("role", "parts", "tool_calls", "toolName")) or value.get("type") == "constructor"


def _prose(value: Any) -> bool:
    return isinstance(value, str) and len(value.split()) >= 3


def _final(value: Any, where: str = "output", depth: int = 0) -> _End:
    value = maybe_json(value, where)
    if _present(value) is None or depth > 8:
        return _End()
    if isinstance(value, str):
        return _End(text=value)
    if isinstance(value, list):
        return _end_of(_read_messages(value, where))
    if not isinstance(value, dict):
        return _End()
    if any(isinstance(value.get(k), list) for k in ("messages", "choices", "candidates")) or _is_message(value):
        return _end_of(_read_messages(value, where))
    for k in _ANSWER_KEYS:
        if value.get(k) is not None:
            got = _final(value[k], f"{where}.{k}", depth + 1)
            if got:
                return got
    prose = [v for v in value.values() if _prose(v)]
    if len(prose) == 1:  # a result object with one text field (an answer tool's {"comment": ..., "status": ...})
        return _End(text=prose[0])
    for v in value.values():  # or one wrapping object holding it
        if isinstance(v, dict):
            got = _final(v, where, depth + 1)
            if got.text:
                return got
    return _End()


def answer_text(value: Any) -> str | None:
    """The final answer in an agent's or trace's output, decoded fully (JSON text, string
    literals, layers of encoding): a text; the last assistant message's text of a message list
    (OpenAI, OpenTelemetry GenAI, LangChain message state, Gemini ``candidates``); the
    ``output``/``answer``/``response``/``content``/... of a result object, or its one prose field.
    ``None`` when there is none, and when the conversation ends on a tool call."""
    end = _final(value)
    return end.text if end.text and end.text.strip() else None


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
    events: int = 1
    #: A model span's reply read as the provider object it is (:func:`_provider_reply`).
    provider: Parsed | None = None


def _documents(span: Span) -> Any:
    docs = _present(span.attrs.get("gen_ai.retrieval.documents"))
    if docs is not None:
        return maybe_json(docs, "gen_ai.retrieval.documents")
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
    calls: list[_Call] = []
    parents = {s.parent_id for s in spans if s.parent_id}
    runs: dict[tuple[str | None, str, str | None], _Call] = {}  # the open tool run of each event-span group
    for s in spans:
        kind = _tool_kind(s)
        if kind == "other" and _legacy_tool(s, parents, patterns):
            kind = "tool"
        if kind == "tool":
            ev = _tool_event(s)
            call = _Call(s, _tool_name(s), _call_id(s), _arguments(s), _result(s), s.error, s.start, s.order,
                         parent=s.parent_id)
            if ev is None:
                calls.append(call)
                continue
            key = (s.parent_id, ev.group("base"), ev.group("run"))
            run = runs.get(key)
            if run is None or (ev.group("event") == "start" and run.events and run.args is not None):
                runs[key] = call
                calls.append(call)
                continue
            run.events += 1  # one more event of the same tool run: one call
            run.args = run.args if run.args is not None else call.args
            run.result = call.result if call.result is not None else run.result
            run.error = run.error or call.error or (str(s.attrs.get("error") or "the tool failed")
                                                     if ev.group("event") == "error" else None)
        elif kind == "retrieval":
            q = _present(s.attrs.get("gen_ai.retrieval.query.text"))
            args = q if q is not None else _arguments(s)
            docs = _documents(s)
            calls.append(_Call(s, _tool_name(s) or "retrieval", _call_id(s), args, docs, s.error, s.start, s.order,
                               retrieval=True, documents=docs, parent=s.parent_id))
    return calls


def _calls_from_messages(llm: Sequence[Span], read: set[str] = frozenset()) -> list[_Call]:  # type: ignore[assignment]
    """Tool calls the model's messages show (for traces without tool spans); of a span whose
    reply was read as a provider object (``read``), its hosted tools' calls are left out."""
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
                if s.span_id in read and str(c.get("name") or "") in _HOSTED_ITEMS:
                    continue
                cid = str(c["id"]) if c.get("id") else None
                calls.append(_Call(None, str(c.get("name") or ""), cid, c.get("arguments"),
                                   results.get(cid) if cid else None, None, s.end or s.start, s.order * 1000 + i))
    return calls


def _server_calls(llm: Sequence[Span], read: set[str] = frozenset()) -> list[_Call]:  # type: ignore[assignment]
    """Provider-side tool calls (``server_tool_call`` parts): a hosted web search (not of the
    spans whose reply was read as a provider object, ``read``)."""
    calls = []
    for s in llm:
        if s.span_id in read:
            continue
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


#: Output item types of a Responses object that are tool calls run by the provider: an
#: instrumentation may show each as a tool call of that name (with no arguments) in the output
#: messages; they are read from the object instead.
_HOSTED_ITEMS = ("web_search_call", "file_search_call", "computer_call", "code_interpreter_call",
                 "image_generation_call", "mcp_call", "x_search_call", "web_search", "google_search")


def _provider_kind(value: Any) -> str | None:
    """Which provider object ``value`` is: ``openai-responses`` (a Responses object),
    ``chat-completions`` (a chat.completion, Perplexity's included) or ``gemini`` (a
    GenerateContentResponse); ``None`` for anything else."""
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("output"), list) and (value.get("object") == "response" or any(
            isinstance(i, dict) and i.get("type") in ("message", "web_search_call", "reasoning", "function_call")
            for i in value["output"])):
        return "openai-responses"
    if isinstance(value.get("choices"), list) and value["choices"] and (
            str(value.get("object", "")).startswith("chat.completion") or isinstance(
                value["choices"][0], dict) and "message" in value["choices"][0]):
        return "chat-completions"
    if isinstance(value.get("candidates"), list) and value["candidates"]:
        return "gemini"
    return None


def _reply_value(span: Span) -> Any:
    """The reply a model span records whole: OpenInference's ``output.value`` (JSON text), else
    the Langfuse observation's output."""
    v = _present(span.attrs.get("output.value"))
    if v is None:
        v = _present(span.output)
    return maybe_json(v, "output.value") if isinstance(v, str) else v


def _provider_reply(span: Span) -> tuple[Parsed | None, str | None]:
    """(the model span's reply read by the provider-log importer of its kind, or None; a note
    when the reply is a JSON object Trek does not read). The same parsers as ``trek import
    openai-responses``, ``chat-completions`` and ``gemini``, so a span's hosted searches, sources,
    opened pages and citations are read as those logs are, never guessed from tool-call names."""
    from trek.imports import chat_completions, gemini, openai_responses
    from trek.imports.common import ImportFailure, InputRecord
    from trek.pages import strip_openai_tracking

    value = _reply_value(span)
    kind = _provider_kind(value)
    if kind is None:
        if isinstance(value, dict) and value and not _is_message(value) and _has_links(value):
            return None, (f"model span {span.name!r} records its reply (output.value) as a JSON object that is not a "
                          "Responses, Chat Completions or Gemini reply: the links it holds are in the trace but not "
                          "read")
        return None, None
    mod = {"openai-responses": openai_responses, "chat-completions": chat_completions, "gemini": gemini}[kind]
    rec = InputRecord(file=Path("output.value"), position=1, data=value, unit="span")
    try:
        if kind == "openai-responses":  # a turn of an agent loop may end on tool calls, without a message
            items, _ = openai_responses.output_items(rec)
            got = Parsed(has_page_text=False)
            openai_responses.parse_items(items, got)
            got.answer = openai_responses.answer_of(items)
            got.citations = [c.model_copy(update={"url": strip_openai_tracking(c.url)}) for c in got.citations]
        else:
            got = mod.parse(rec)
    except (ImportFailure, FieldError, ValueError) as e:
        return None, (f"model span {span.name!r} records a {kind} reply that could not be read ({e}): it is in the "
                      "trace but not read")
    got.details["reply_format"] = kind
    return got, None


def _has_links(value: Any) -> bool:
    """Whether ``value`` (a decoded reply) holds an http(s) URL anywhere."""
    try:
        text = json.dumps(value, default=str)
    except (TypeError, ValueError, RecursionError):
        return False
    return "http://" in text or "https://" in text


def _provider_calls(llm: Sequence[Span], notes: list[str]) -> tuple[list[_Call], set[str]]:
    """One pseudo-call per model span whose reply is a provider object (:func:`_provider_reply`),
    placed at the span's end; and the ids of those spans (their hosted tool calls shown as
    message tool calls are then not read again)."""
    calls, read = [], set()
    for s in llm:
        got, note = _provider_reply(s)
        if note:
            notes.append(note)
        if got is None:
            continue
        read.add(s.span_id)
        if got.searches or got.opened or got.citations or got.seen_urls or got.steps:
            calls.append(_Call(s, "", None, None, None, None, s.end or s.start, s.order * 1000 + 999,
                               provider=got))
    return calls, read


def _merge_provider(c: _Call, rnd: int, parsed: Parsed) -> tuple[int, int, int]:
    """A model span's reply read as a provider object (``c.provider``) into ``parsed`` at round
    ``rnd``; returns (searches, with a query, with results) for the coverage counts."""
    p = c.provider
    assert p is not None
    offset = len(parsed.searches)
    for sc in p.searches:
        parsed.searches.append(sc.model_copy(update={"round": rnd}))
    for st in p.steps:
        parsed.steps.append(st.model_copy(update={"round": rnd, "search_index": None if st.search_index is None
                                                  else st.search_index + offset}))
    parsed.opened += [u for u in p.opened if u not in parsed.opened]
    parsed.citations += [x for x in p.citations if all(x.url != y.url for y in parsed.citations)]
    parsed.seen_urls += [u for u in p.seen_urls if u not in parsed.seen_urls]
    parsed.pages += p.pages
    if p.url_identity and not parsed.url_identity:
        parsed.url_identity = p.url_identity
    for n in p.notes:
        parsed.note(n)
    if not p.has_page_text:
        parsed.details["reply_without_page_text"] = True
    n = len(p.searches)
    return n, sum(1 for x in p.searches if x.query.strip()), n if p.results == "all" else 0


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


_USAGE_KEYS = {"prompt": ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt"),
               "completion": ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens",
                              "llm.token_count.completion"),
               "cached": ("gen_ai.usage.cache_read.input_tokens", "llm.token_count.prompt_details.cache_read"),
               "reasoning": ("gen_ai.usage.reasoning.output_tokens", "llm.token_count.completion_details.reasoning")}


def _usage(llm: Sequence[Span]) -> Usage:
    """The model usage of a trace: each model span's token counts, read by the typed-field rule
    (:func:`trek.imports.fields.count`: ``"lots"``, ``true``, ``12.7``, ``-5``, ``"1e400"``,
    ``Infinity`` or ``10**40`` is refused naming the attribute)."""
    total = Usage(cost_usd=None)
    for s in llm:
        a = s.attrs

        def num(which: str, attrs: dict[str, Any] = a) -> tuple[int, bool]:
            for k in _USAGE_KEYS[which]:
                if attrs.get(k) is not None:
                    return count(attrs[k], k, digits=True), True
            return 0, False

        (prompt, has_p), (completion, has_c) = num("prompt"), num("completion")
        if has_p or has_c:
            total = total + Usage(prompt_tokens=prompt, completion_tokens=completion, cached_tokens=num("cached")[0],
                                  reasoning_tokens=num("reasoning")[0], calls=1, cost_usd=None)
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


def _answer(roots: Sequence[Span], llm: Sequence[Span], trace_output: Any) -> _End:
    """How the run ends: Langfuse's ``trace.output``, else a root span's output, else the last
    model span that shows output messages (its text, or the tool calls it ends on)."""
    ending = _final(trace_output, "trace.output")
    if ending.text and ending.text.strip():
        return ending
    for root in roots:
        out = _present(root.attrs.get("output.value")) or _present(root.attrs.get("final_result"))
        if out is None and _tool_kind(root) == "agent":
            msgs = _messages(root, "output")
            out = next((m.text for m in reversed(msgs) if m.text.strip()), None)
        if out is None:
            out = root.output
        got = _final(out, f"output of span {root.name!r}")
        if got.text and got.text.strip():
            return got
        ending = ending or got
    for s in sorted(llm, key=lambda s: (s.end or s.start, s.order), reverse=True):
        msgs = _messages(s, "output")
        if msgs:
            got = _end_of(msgs)
            if got:
                return got
    return ending


def _tool_params(llm: Sequence[Span]) -> dict[str, list[str]]:
    """The parameter names of each tool the model was offered (in the trace's model spans: the
    request's ``tools``, ``gen_ai.tool.definitions``, ``llm.tools``, ``mlflow.chat.tools``)."""
    out: dict[str, list[str]] = {}
    for s in llm:
        sources = [s.attrs.get("gen_ai.tool.definitions"), s.attrs.get("mlflow.chat.tools"), s.attrs.get("tools")]
        inp = maybe_json(s.input, "input") if isinstance(s.input, str) else s.input
        if isinstance(inp, dict):
            sources.append(inp.get("tools"))
        oi = _nested(s.attrs, "llm.tools")
        if isinstance(oi, list):
            sources.append([maybe_json(t.get("tool", {}).get("json_schema"), "llm.tools") for t in oi
                            if isinstance(t, dict) and isinstance(t.get("tool"), dict)])
        for src in sources:
            src = maybe_json(src, "tools")
            for t in src if isinstance(src, list) else []:
                if not isinstance(t, dict):
                    continue
                fn = t.get("function") if isinstance(t.get("function"), dict) else t
                schema = fn.get("parameters", fn.get("input_schema", fn.get("inputSchema")))
                props = schema.get("properties") if isinstance(schema, dict) else None
                if isinstance(fn.get("name"), str) and isinstance(props, dict):
                    out.setdefault(fn["name"], list(props))
    return out


def parse_spans(spans: Sequence[Span], options: TraceOptions, *, trace_output: Any = None) -> Parsed:
    """The :class:`~trek.imports.common.Parsed` record of one trace's spans (see the module
    docstring); ``trace_output``: Langfuse's ``trace.output``. Linear in the number of spans
    (sorting aside). A field that does not fit (a count that is not a whole number, JSON text
    nested too deep) raises :class:`~trek.imports.fields.FieldError` naming it."""
    spans = sorted((adopt_dialects(s) for s in spans), key=lambda s: (s.start, s.order))
    ids = {s.span_id for s in spans}
    roots = [s for s in spans if not s.parent_id or s.parent_id not in ids]
    parsed = Parsed(record_id=spans[0].trace_id if spans else None)
    parsed.details["trace"] = {"trace_id": spans[0].trace_id if spans else None,
                               "root_span_id": roots[0].span_id if roots else None}
    llm = [s for s in spans if _tool_kind(s) == "llm"]
    wrappers = {s.parent_id for s in spans if s.parent_id and _tool_kind(s) in ("tool", "retrieval", "llm")}
    children: dict[str, list[str]] = {}
    for s in spans:
        if s.parent_id:
            children.setdefault(s.parent_id, []).append(s.span_id)
    unread: list[str] = []
    replies, read = _provider_calls(llm, unread)
    calls = _calls_from_spans(spans, options.search_tools)
    if not calls:
        calls = _calls_from_messages(llm, read)
    calls += _server_calls(llm, read)
    calls += replies
    calls.sort(key=lambda c: (c.start, c.order))
    calls = _merge_retries(calls, parsed)
    starts = sorted(s.start for s in llm)
    content = any(_has_content(s) for s in spans)
    params = _tool_params(llm) if any(isinstance(c.args, dict) and _positional(c.args) for c in calls) else {}
    searches_seen = with_query = with_result = 0
    for c in calls:
        if c.provider is not None:  # a model span's reply, read as the provider object it is
            rnd = max(1, bisect.bisect_right(starts, c.span.start if c.span else c.start)) if starts else 1
            n, q, r = _merge_provider(c, rnd, parsed)
            searches_seen, with_query, with_result = searches_seen + n, with_query + q, with_result + r
            continue
        rnd = max(1, bisect.bisect_right(starts, c.start)) if starts else 1
        wraps = c.span is not None and (c.span.span_id in wrappers
                                        or any(k in wrappers for k in children.get(c.span.span_id, ())))
        is_search = c.retrieval or (_matches(c.name, options.search_tools) and not wraps)
        if is_search:
            searches_seen += 1
            why: list[str] = []
            queries = _queries(c.args, params.get(c.name), why)
            with_query += bool(queries)
            for w in why:
                parsed.note(f"search {c.name!r} was {w}")
            pr = parse_result(c.documents if c.retrieval else c.result, c.name, documents=c.retrieval)
            if c.result is not None or c.error or (c.retrieval and c.documents is not None):
                with_result += 1  # a failed search returned nothing: that is recorded too
            if pr.how:
                parsed.note(pr.how)
            if c.events > 1:
                parsed.note(f"the {c.events} event spans of one run of {c.name!r} (start, finish, ...) are one call")
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
        parsed.note(_no_content_note(spans))
        parsed.queries, parsed.results = "none", "none"
    else:
        # "not in the trace" only when every part of the trace was read; else "not in what was read"
        gap = "in what Trek read of the trace (a reply it does not read is noted)" if unread else "in the trace"
        if searches_seen and with_query < searches_seen:
            parsed.queries = "none" if not with_query else "some"
            parsed.note(f"{searches_seen - with_query} of {searches_seen} search(es) carry no query {gap}")
        if searches_seen and with_result < searches_seen:
            parsed.results = "none" if not with_result else "cited_only"
            parsed.note(f"the results of {searches_seen - with_result} of {searches_seen} search(es) are not "
                        f"{gap}" + ("" if not with_result else ": the pages retrieved are a lower bound"))
        for n in unread:
            parsed.note(n)
    if parsed.results == "none":
        for s in parsed.searches:
            s.results = []
        for st in parsed.steps:
            st.result_urls = []
    parsed.model = _model(llm)
    parsed.usage = _usage(llm)
    end = _answer(roots, llm, trace_output)
    parsed.answer = end.text if end.text and end.text.strip() else None
    if parsed.answer is None and replies and replies[-1].provider is not None and replies[-1].provider.answer:
        parsed.answer = replies[-1].provider.answer  # the last reply read as a provider object
    if llm:
        parsed.answer_round = len(starts)
    if parsed.answer is None and end.tools:
        parsed.status = "no_answer"
        parsed.error = (f"the run ends on a tool call ({', '.join(dict.fromkeys(end.tools))}): it gives no text "
                        "answer")
        parsed.note(parsed.error)
    elif parsed.answer is None:
        parsed.status = "failed"
        parsed.error = "the trace shows no final answer" + (" (it carries no content)" if not content else "")
        parsed.note(parsed.error)
    return parsed


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


def _strings(value: Any, out: list[str], budget: list[int]) -> None:
    """The strings in ``value`` (a decoded input), depth-first, at most ``budget[0]`` of them."""
    stack = [value]
    while stack and budget[0] > 0:
        v = stack.pop()
        if isinstance(v, str):
            budget[0] -= 1
            decoded = maybe_json(v, "input") if v.strip()[:1] in ("{", "[", '"') else v
            if isinstance(decoded, str):
                out.append(decoded)
            else:
                stack.append(decoded)
        elif isinstance(v, dict):
            stack.extend(reversed(list(v.values())))
        elif isinstance(v, list):
            stack.extend(reversed(v))


def question_texts(spans: Sequence[Span], *extra: Any) -> tuple[str, ...]:
    """The texts of a trace where its question may be, for matching a trace that names no
    question id (:func:`trek.imports.common.match_traces`): ``extra`` (Langfuse's
    ``trace.input``), the strings of each root span's input (``input.value``,
    ``traceloop.entity.input``, the Langfuse SDK's and MLflow's inputs: ``{"args": [question]}``,
    ``{"question": ...}``; an agent span's user messages), and the user messages of the trace's
    first model call."""
    out: list[str] = []
    budget = [200]
    for v in extra:
        _strings(v, out, budget)
    ids = {s.span_id for s in spans}
    ordered = sorted(spans, key=lambda s: (s.start, s.order))
    for s in ordered:
        if s.parent_id and s.parent_id in ids:
            continue
        adopt_dialects(s)
        for v in (s.attrs.get("input.value"), s.attrs.get("traceloop.entity.input"), s.input):
            if _present(v) is not None:
                _strings(v, out, budget)
        if _present(s.attrs.get("gen_ai.input.messages")) is not None:  # an invoke_agent span's input
            out += [m.text for m in _messages(s, "input") if m.role in ("user", "human") and m.text.strip()]
    first = next((s for s in ordered if _tool_kind(adopt_dialects(s)) == "llm"), None)
    if first is not None:
        out += [m.text for m in _messages(first, "input") if m.role in ("user", "human") and m.text.strip()]
    return tuple(dict.fromkeys(t for t in out if t.strip()))
