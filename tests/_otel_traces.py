"""Traces written for Trek's tests: one agent run described once (:class:`Run`) and written as
OTLP/JSON in the OpenTelemetry GenAI dialect or the OpenInference dialect, and as the Langfuse
export that OTLP ingestion would make of either (observations carrying the span attributes in
``metadata.attributes``), or a Langfuse export made without OpenTelemetry (no attributes, only
``type``/``input``/``output``).

Every fact, name and URL is invented (``.example`` domains). The converters model only the
fields the importers read; they are fixtures, not an implementation of Langfuse.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

BASE_NS = 1_764_000_000_000_000_000  # a fixed start time


def kv(key: str, value: Any) -> dict[str, Any]:
    """One OTLP attribute in the typed form."""
    return {"key": key, "value": typed(value)}


def typed(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list):
        return {"arrayValue": {"values": [typed(v) for v in value]}}
    if isinstance(value, dict):
        return {"kvlistValue": {"values": [kv(k, v) for k, v in value.items()]}}
    return {"stringValue": str(value)}


def hexid(seed: str, n: int) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()[:n]


@dataclass
class Tool:
    """One tool call of a model turn: name, arguments, result (None: failed or not captured)."""

    name: str
    args: dict[str, Any]
    result: Any = None
    error: str | None = None
    call_id: str = ""
    retrieval: bool = False  # a retrieval span, not a tool call
    retries: int = 0  # failed attempts before the one that worked
    agent: Run | None = None  # a nested agent run inside this tool call


@dataclass
class Turn:
    """One model turn: the tool calls it makes (in parallel), or its final text."""

    tools: list[Tool] = field(default_factory=list)
    text: str | None = None
    prompt_tokens: int = 100
    completion_tokens: int = 20


@dataclass
class Run:
    name: str
    turns: list[Turn]
    model: str = "gpt-4.1-mini-2025-04-14"
    question_id: str | None = None
    content: bool = True
    question: str | None = None  # the question as the agent was given it (the root span's input)

    @property
    def answer(self) -> str | None:
        return self.turns[-1].text


class _Clock:
    def __init__(self) -> None:
        self.t = BASE_NS

    def tick(self, ms: int = 10) -> int:
        self.t += ms * 1_000_000
        return self.t


def _span(tid: str, sid: str, parent: str | None, name: str, start: int, end: int, attrs: dict[str, Any],
          error: str | None = None, events: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    s: dict[str, Any] = {"traceId": tid, "spanId": sid, "name": name, "kind": 1,
                         "startTimeUnixNano": str(start), "endTimeUnixNano": str(end),
                         "attributes": [kv(k, v) for k, v in attrs.items()]}
    if parent:
        s["parentSpanId"] = parent
    if error:
        s["status"] = {"code": 2, "message": error}
    if events:
        s["events"] = events
    return s


def _dump(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v)


def spans(run: Run, dialect: str, *, tid: str | None = None, parent: str | None = None,
          clock: _Clock | None = None) -> list[dict[str, Any]]:
    """The spans of ``run`` in ``dialect`` (``genai`` or ``openinference``)."""
    tid = tid or hexid(run.name, 32)
    clock = clock or _Clock()
    oi = dialect == "openinference"
    root = hexid(run.name + "/root", 16)
    out: list[dict[str, Any]] = []
    start = clock.tick()
    history: list[dict[str, Any]] = []
    for i, turn in enumerate(run.turns, start=1):
        llm = hexid(f"{run.name}/llm{i}", 16)
        t0 = clock.tick()
        calls = [t for t in turn.tools if not t.retrieval]
        t1 = clock.tick(100)
        attrs: dict[str, Any]
        if oi:
            attrs = {"openinference.span.kind": "LLM", "llm.model_name": run.model,
                     "llm.token_count.prompt": turn.prompt_tokens, "llm.token_count.completion": turn.completion_tokens}
            if run.content:
                for j, m in enumerate(history):
                    for k, v in m.items():
                        attrs[f"llm.input_messages.{j}.message.{k}"] = v
                attrs["llm.output_messages.0.message.role"] = "assistant"
                if turn.text is not None:
                    attrs["llm.output_messages.0.message.content"] = turn.text
                for j, c in enumerate(calls):
                    p = f"llm.output_messages.0.message.tool_calls.{j}.tool_call"
                    attrs[f"{p}.id"] = c.call_id
                    attrs[f"{p}.function.name"] = c.name
                    attrs[f"{p}.function.arguments"] = json.dumps(c.args)
        else:
            attrs = {"gen_ai.operation.name": "chat", "gen_ai.request.model": run.model.rsplit("-", 3)[0],
                     "gen_ai.response.model": run.model, "gen_ai.usage.input_tokens": turn.prompt_tokens,
                     "gen_ai.usage.output_tokens": turn.completion_tokens}
            if run.content:
                parts: list[dict[str, Any]] = []
                if turn.text is not None:
                    parts.append({"type": "text", "content": turn.text})
                parts += [{"type": "tool_call", "id": c.call_id, "name": c.name, "arguments": c.args} for c in calls]
                attrs["gen_ai.output.messages"] = json.dumps([{"role": "assistant", "parts": parts}])
        out.append(_span(tid, llm, root, f"chat {run.model}" if not oi else "ChatCompletion", t0, t1, attrs))
        tool_start = clock.tick()
        ends = []
        for j, c in enumerate(turn.tools):
            for attempt in range(c.retries + 1):
                failed = attempt < c.retries
                sid = hexid(f"{run.name}/tool{i}.{j}.{attempt}", 16)
                s0 = tool_start + j * 1_000_000 + attempt * 50_000_000  # parallel calls overlap
                s1 = s0 + 40_000_000
                ends.append(s1)
                err = "connection reset" if failed else c.error
                result = None if (failed or c.error) else c.result
                out.append(_span(tid, sid, root, ("retrieval " if c.retrieval else "execute_tool ") + c.name
                                 if not oi else c.name, s0, s1, _tool_attrs(c, result, oi, run.content), err))
                if c.agent is not None and not failed:
                    sub = _Clock()
                    sub.t = s0
                    out += spans(c.agent, dialect, tid=tid, parent=sid, clock=sub)
                    ends.append(sub.t)
            if run.content and not c.retrieval:
                history.append({"role": "tool", "tool_call_id": c.call_id,
                                "content": _dump(c.result) if c.result is not None else (c.error or "")})
        if ends:
            clock.t = max(ends)
    end = clock.tick()
    if oi:
        rattrs: dict[str, Any] = {"openinference.span.kind": "AGENT", "agent.name": run.name}
        if run.content and run.answer is not None:
            rattrs["output.value"] = run.answer
    else:
        rattrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": run.name}
        if run.content and run.answer is not None:
            rattrs["gen_ai.output.messages"] = json.dumps([{"role": "assistant",
                                                            "parts": [{"type": "text", "content": run.answer}]}])
    if run.question_id and parent is None:
        rattrs["question_id"] = run.question_id
    if run.question and run.content:
        if oi:
            rattrs["input.value"] = run.question
        else:
            rattrs["gen_ai.input.messages"] = json.dumps([{"role": "user",
                                                           "parts": [{"type": "text", "content": run.question}]}])
    out.insert(0, _span(tid, root, parent, f"invoke_agent {run.name}" if not oi else run.name, start, end, rattrs))
    return out


def _tool_attrs(c: Tool, result: Any, oi: bool, content: bool) -> dict[str, Any]:
    if c.retrieval:
        if oi:
            a: dict[str, Any] = {"openinference.span.kind": "RETRIEVER"}
            if content:
                a["input.value"] = c.args.get("query", "")
                for i, d in enumerate(result or []):
                    for k, v in d.items():
                        a[f"retrieval.documents.{i}.document.{k}"] = json.dumps(v) if isinstance(v, dict) else v
            return a
        a = {"gen_ai.operation.name": "retrieval", "gen_ai.data_source.id": c.name}
        if content:
            a["gen_ai.retrieval.query.text"] = c.args.get("query", "")
            if result is not None:
                a["gen_ai.retrieval.documents"] = json.dumps(result)
        return a
    if oi:
        a = {"openinference.span.kind": "TOOL", "tool.name": c.name}
        if c.call_id:
            a["tool_call.id"] = c.call_id
        if content:
            a["input.value"] = json.dumps(c.args)
            if result is not None:
                a["output.value"] = _dump(result)
        return a
    a = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": c.name}
    if c.call_id:
        a["gen_ai.tool.call.id"] = c.call_id
    if content:
        a["gen_ai.tool.call.arguments"] = json.dumps(c.args)
        if result is not None:
            a["gen_ai.tool.call.result"] = _dump(result)
    return a


def request(span_list: list[dict[str, Any]], resource: dict[str, Any] | None = None) -> dict[str, Any]:
    """An ExportTraceServiceRequest holding ``span_list``."""
    res = {"service.name": "test-agent", **(resource or {})}
    return {"resourceSpans": [{"resource": {"attributes": [kv(k, v) for k, v in res.items()]},
                               "scopeSpans": [{"scope": {"name": "test.instrumentation"}, "spans": span_list}]}]}


# -- Langfuse --------------------------------------------------------------------------------------
def _iso(ns: int) -> str:
    t = _dt.datetime.fromtimestamp(ns // 1_000_000_000, _dt.UTC).replace(microsecond=(ns // 1000) % 1_000_000)
    return t.isoformat().replace("+00:00", "Z")


def _flat(kvs: list[dict[str, Any]]) -> dict[str, Any]:
    def val(v: dict[str, Any]) -> Any:
        if "arrayValue" in v:
            return [val(x) for x in v["arrayValue"]["values"]]
        if "kvlistValue" in v:
            return {x["key"]: val(x["value"]) for x in v["kvlistValue"]["values"]}
        if "intValue" in v:
            return int(v["intValue"])
        return next(iter(v.values()))
    return {x["key"]: val(x["value"]) for x in kvs}


_TYPES = {"execute_tool": "TOOL", "TOOL": "TOOL", "retrieval": "RETRIEVER", "RETRIEVER": "RETRIEVER",
          "chat": "GENERATION", "LLM": "GENERATION", "invoke_agent": "AGENT", "AGENT": "AGENT"}


def langfuse_export(req: dict[str, Any], *, attributes: bool = True, trace: dict[str, Any] | None = None
                    ) -> dict[str, Any]:
    """The ``{"trace", "observations"}`` export of one request's (single) trace: with
    ``attributes`` the observations keep the span attributes (OTLP ingestion); without, only
    ``type``, ``input`` and ``output`` say what each was (an export made without OTel)."""
    obs = []
    tid = None
    root_output = None
    for rs in req["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for s in ss["spans"]:
                tid = s["traceId"]
                a = _flat(s["attributes"])
                kind = _TYPES.get(a.get("gen_ai.operation.name") or a.get("openinference.span.kind"), "SPAN")
                inp = a.get("gen_ai.tool.call.arguments", a.get("input.value", a.get("gen_ai.retrieval.query.text")))
                out = a.get("gen_ai.tool.call.result", a.get("output.value", a.get("gen_ai.retrieval.documents")))
                if kind == "GENERATION" and "gen_ai.output.messages" in a:
                    msgs = json.loads(a["gen_ai.output.messages"])
                    parts = msgs[0]["parts"]
                    out = {"role": "assistant", "content": "".join(p["content"] for p in parts if p["type"] == "text"),
                           "tool_calls": [{"id": p["id"], "type": "function", "function": {
                               "name": p["name"], "arguments": json.dumps(p["arguments"])}}
                               for p in parts if p["type"] == "tool_call"]}
                o: dict[str, Any] = {"id": s["spanId"], "traceId": tid, "type": kind, "name": s["name"],
                                     "startTime": _iso(int(s["startTimeUnixNano"])),
                                     "endTime": _iso(int(s["endTimeUnixNano"])),
                                     "parentObservationId": s.get("parentSpanId"), "input": inp, "output": out,
                                     "level": "ERROR" if s.get("status", {}).get("code") == 2 else "DEFAULT",
                                     "statusMessage": s.get("status", {}).get("message")}
                if kind == "GENERATION":
                    o["model"] = a.get("gen_ai.response.model", a.get("llm.model_name"))
                    o["usageDetails"] = {"input": a.get("gen_ai.usage.input_tokens", a.get("llm.token_count.prompt")),
                                         "output": a.get("gen_ai.usage.output_tokens",
                                                         a.get("llm.token_count.completion"))}
                if attributes:
                    o["metadata"] = {"attributes": a, "resourceAttributes": _flat(rs["resource"]["attributes"]),
                                     "scope": ss["scope"]}
                if not s.get("parentSpanId"):
                    root_output = a.get("output.value")
                    if "gen_ai.output.messages" in a:
                        root_output = json.loads(a["gen_ai.output.messages"])[0]["parts"][0]["content"]
                    o["output"] = root_output
                obs.append(o)
    t = {"id": tid, "name": "agent run", "timestamp": obs[0]["startTime"], "output": root_output, "metadata": {},
         "tags": [], **(trace or {})}
    return {"trace": t, "observations": obs}


def write_jsonl(path: Any, objs: list[Any]) -> Any:
    path.write_text("".join(json.dumps(o) + "\n" for o in objs), encoding="utf-8")
    return path
