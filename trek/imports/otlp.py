"""``otlp``: OpenTelemetry traces as OTLP/JSON, one trajectory per trace id.

A record is an ``ExportTraceServiceRequest`` (``resourceSpans[].scopeSpans[].spans[]``): a
``.json`` file holds one (or an array of them), a ``.jsonl`` file one a line, as the
OpenTelemetry Collector's file exporter writes them. A trace's spans may be spread over several
lines and files; they are gathered by ``traceId`` (hex, as OTLP/JSON writes it; base64 ids of a
protobuf JSON dump are turned into hex) in the order
the traces first appear. Each span's ``attributes`` (OTLP's typed ``AnyValue``:
``stringValue``, ``intValue``, ``doubleValue``, ``boolValue``, ``arrayValue``, ``kvlistValue``,
``bytesValue``), ``events``, ``status`` (``code`` 2 / ``STATUS_CODE_ERROR`` with its
``message``; an ``exception`` event's ``exception.message``), ``parentSpanId`` and times are
read, and the spans of a trace become a trajectory through :mod:`trek.imports.spans` (both
dialects: OpenTelemetry GenAI and OpenInference).

Questions: a trace naming its question id (``--question-key``, default ``question_id``: a span
or resource attribute, OpenInference's ``metadata``, ``tag.tags``) is matched by it; a trace
naming none by the question text it holds (:func:`trek.imports.spans.question_texts`), or in
order with ``--in-order`` (:func:`trek.imports.common.match_traces`). The trajectory's ``source.record_id``
and ``details.trace`` hold the trace id and its root span id (``trek trace export`` writes the
labels back there).
"""

from __future__ import annotations

import base64
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trek.imports.common import ImportFailure, InputRecord, Parsed, as_dict, get, iter_records
from trek.imports.fields import FieldError
from trek.imports.spans import (
    Span,
    TraceOptions,
    keep_attributes,
    parse_spans,
    question_id_of,
    question_texts,
)

NAME = "otlp"

__all__ = ["NAME", "any_value", "attributes", "read_traces", "parse"]


def any_value(v: Any) -> Any:
    """The Python value of an OTLP/JSON ``AnyValue``."""
    if not isinstance(v, dict):
        return v
    if "stringValue" in v:
        return v["stringValue"]
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "intValue" in v:
        try:
            return int(v["intValue"])
        except (TypeError, ValueError):
            return v["intValue"]
    if "doubleValue" in v:
        try:
            return float(v["doubleValue"])
        except (TypeError, ValueError):
            return v["doubleValue"]
    if "arrayValue" in v:
        return [any_value(x) for x in as_dict(v["arrayValue"]).get("values") or []]
    if "kvlistValue" in v:
        return attributes(as_dict(v["kvlistValue"]).get("values"))
    if "bytesValue" in v:
        try:
            return base64.b64decode(v["bytesValue"]).hex()
        except (ValueError, TypeError):
            return v["bytesValue"]
    return None


def attributes(kvs: Any) -> dict[str, Any]:
    """OTLP key-value pairs (``[{"key": ..., "value": {...}}]``) as a flat dict (names and short
    text values interned: a trace of many spans repeats them)."""
    out: dict[str, Any] = {}
    for kv in kvs if isinstance(kvs, list) else []:
        if isinstance(kv, dict) and isinstance(kv.get("key"), str):
            v = any_value(kv.get("value"))
            out[sys.intern(kv["key"])] = sys.intern(v) if isinstance(v, str) and len(v) <= 64 else v
    return out


def _hex_id(v: Any, size: int) -> str | None:
    """An OTLP trace or span id as lower-case hex: OTLP/JSON writes hex; a protobuf JSON dump
    writes the bytes as base64 (decoded when they are ``size`` bytes long)."""
    if not isinstance(v, str) or not v.strip():
        return None
    v = v.strip()
    if len(v) == 2 * size and all(c in "0123456789abcdefABCDEF" for c in v):
        return v.lower()
    try:
        raw = base64.b64decode(v, validate=True)
    except (ValueError, TypeError):
        return v
    return raw.hex() if len(raw) == size else v


def _ns(v: Any) -> int:
    try:
        return int(v or 0)
    except (TypeError, ValueError):
        return 0


def _error(span: dict[str, Any], events: list[tuple[str, dict[str, Any]]]) -> str | None:
    status = as_dict(span.get("status"))
    code = status.get("code")
    if code in (2, "2", "STATUS_CODE_ERROR", "ERROR"):
        msg = status.get("message")
        exc = next((a.get("exception.message") for n, a in events if n == "exception" and a.get("exception.message")),
                   None)
        return str(msg or exc or "the span's status is ERROR")
    return None


def _spans(rec: InputRecord, order: int, question_key: str = "question_id") -> list[tuple[Span, dict[str, Any]]]:
    """The spans of one request, each with its resource attributes; a span keeps the attributes
    the span readers look at (:func:`~trek.imports.spans.keep_attributes`)."""
    data = rec.data
    rs = get(data, "resourceSpans", "resource_spans") if isinstance(data, dict) else None
    if not isinstance(rs, list):
        raise rec.fail("not an OTLP ExportTraceServiceRequest (no 'resourceSpans' list)")
    out = []
    for i, r in enumerate(rs, start=1):
        res = attributes(as_dict(as_dict(r).get("resource")).get("attributes"))
        for ss in get(as_dict(r), "scopeSpans", "scope_spans", "instrumentationLibrarySpans") or []:
            for j, s in enumerate(get(as_dict(ss), "spans") or [], start=1):
                where = f"resourceSpans {i}, span {j}"
                if not isinstance(s, dict):
                    raise rec.fail(f"{where}: expected a JSON object")
                tid, sid = _hex_id(get(s, "traceId", "trace_id"), 16), _hex_id(get(s, "spanId", "span_id"), 8)
                if tid is None or sid is None:
                    raise rec.fail(f"{where} ({s.get('name')!r}): no 'traceId' or 'spanId'")
                events = [(str(e.get("name") or ""), attributes(e.get("attributes")))
                          for e in get(s, "events") or [] if isinstance(e, dict)]
                parent = _hex_id(get(s, "parentSpanId", "parent_span_id"), 8)
                attrs, unread = keep_attributes(attributes(s.get("attributes")), question_key)
                out.append((Span(trace_id=sys.intern(tid), span_id=sid, parent_id=sys.intern(parent) if parent else None,
                                 name=sys.intern(str(s.get("name") or "")),
                                 start=_ns(get(s, "startTimeUnixNano", "start_time_unix_nano")),
                                 end=_ns(get(s, "endTimeUnixNano", "end_time_unix_nano")),
                                 attrs=attrs, events=events, error=_error(s, events),
                                 order=order + len(out), unread=unread), res))
    if not out:
        raise rec.fail("the request holds no span")
    return out


def read_traces(files: Sequence[str | os.PathLike[str]], options: TraceOptions) -> list[InputRecord]:
    """One record per trace id over all ``files`` (see the module docstring)."""
    traces: dict[str, dict[str, Any]] = {}
    order = 0
    for f in files:
        for rec in iter_records(f):  # one request at a time: only the spans' reduced form is kept
            if rec.question_id is not None:
                raise rec.fail("a wrapper {\"question_id\", \"record\"} around OTLP: name the question in the "
                               "trace instead (a span attribute, see --question-key)")
            for span, res in _spans(rec, order, options.question_key):
                order += 1
                t = traces.get(span.trace_id)
                if t is None:  # where the trace starts (the record's data is not kept)
                    t = traces[span.trace_id] = {"spans": [], "resources": [],
                                                 "first": InputRecord(rec.file, rec.position, None, unit=rec.unit)}
                t["spans"].append(span)
                if res not in t["resources"]:
                    t["resources"].append(res)
    out = []
    for tid, t in traces.items():
        first: InputRecord = t["first"]
        qid = question_id_of(t["spans"], options.question_key, *t["resources"])
        try:
            texts = () if qid is not None else question_texts(t["spans"])
        except FieldError as e:
            raise first.fail(f"trace {tid}: {e}") from None
        out.append(InputRecord(Path(first.file), first.position, {"trace_id": tid, "spans": t["spans"],
                                                                  "options": options}, qid, unit=first.unit,
                               texts=texts, label=f"trace {tid}"))
    return out


def parse(rec: InputRecord) -> Parsed:
    try:
        return parse_spans(rec.data["spans"], rec.data["options"])
    except (TypeError, AttributeError, KeyError) as e:  # a shape the readers did not expect
        raise ImportFailure(f"{rec.where} (trace {rec.data['trace_id']}): cannot be read ({e!r})") from None
