"""``langfuse``: Langfuse trace exports, one trajectory per trace.

A record is ``{"trace": {...}, "observations": [...]}`` (the public API's trace and its
observations), or the API's trace with its observations inside (``{"id": ..., "observations":
[...]}``); a ``.json`` file holds one (or an array), a ``.jsonl`` file one a line. Read:

* ``trace``: ``id`` (the trajectory's ``source.record_id``: ``trek trace export`` writes the
  scores back to it), ``output`` (the answer, when set), ``metadata`` and ``tags`` (the
  question id, see below);
* each observation: ``id``, ``parentObservationId``, ``type`` (``TOOL``, ``RETRIEVER``,
  ``GENERATION``, ``AGENT``, ``SPAN``, ...), ``name``, ``startTime``/``endTime``, ``input``,
  ``output``, ``model``, ``usageDetails`` (or ``usage``), ``level`` ``ERROR`` with its
  ``statusMessage``, and ``metadata.attributes``: the span's OpenTelemetry attributes when the
  trace reached Langfuse over OTLP, read by the same code as ``otlp``
  (:mod:`trek.imports.spans`), so both imports of one run give the same trajectory.

Questions: matched by the question id in ``trace.metadata``, ``trace.tags``
(``KEY:VALUE``) or a span attribute (``--question-key``, default ``question_id``), else by the
question text in ``trace.input`` or the root observation's input, or in file order with
``--in-order`` (:func:`trek.imports.common.match_traces`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trek.imports.common import ImportFailure, InputRecord, Parsed, as_dict, get, iso_time_ns, iter_records
from trek.imports.fields import FieldError, model_name
from trek.imports.spans import Span, TraceOptions, parse_spans, question_id_of, question_texts, usage_of
from trek.imports.tool_results import maybe_json
from trek.types import Usage

NAME = "langfuse"

__all__ = ["NAME", "read_traces", "parse"]


def _usage(o: dict[str, Any]) -> Usage | None:
    """An observation's ``usageDetails`` (or ``usage``), every count by the typed-field rule."""
    name = "usageDetails" if "usageDetails" in o else "usage"
    return usage_of(get(o, "usageDetails", "usage"), name)


def _split(rec: InputRecord) -> tuple[dict[str, Any], list[Any]]:
    data = rec.data
    if not isinstance(data, dict):
        raise rec.fail(f"not a Langfuse trace export: expected a JSON object, got {type(data).__name__}")
    if isinstance(data.get("trace"), dict):
        trace, obs = data["trace"], data.get("observations", data["trace"].get("observations"))
    elif "id" in data and "observations" in data:
        trace, obs = data, data["observations"]
    else:
        raise rec.fail("not a Langfuse trace export: expected {\"trace\": {...}, \"observations\": [...]}")
    if obs is None:
        raise rec.fail("the export has no 'observations' (export the trace with its observations)")
    if not isinstance(obs, list) or not obs:
        raise rec.fail("field 'observations': expected a non-empty list of observations")
    if not isinstance(trace.get("id"), str) or not trace["id"].strip():
        raise rec.fail("field 'trace.id': missing or empty")
    return trace, obs


def _span(trace_id: str, o: Any, i: int, rec: InputRecord) -> Span:
    if not isinstance(o, dict):
        raise rec.fail(f"observation {i}: expected a JSON object, got {type(o).__name__}")
    if not isinstance(o.get("id"), str) or not o["id"].strip():
        raise rec.fail(f"observation {i}: field 'id' missing or empty")
    meta = as_dict(maybe_json(o.get("metadata")))
    attrs = as_dict(maybe_json(meta.get("attributes")))
    error = None
    if str(o.get("level") or "").upper() == "ERROR":
        error = str(o.get("statusMessage") or "the observation's level is ERROR")
    parent = o.get("parentObservationId")
    return Span(trace_id=trace_id, span_id=o["id"].strip(), parent_id=parent.strip() if isinstance(parent, str) and
                parent.strip() else None, name=str(o.get("name") or ""), start=iso_time_ns(o.get("startTime")),
                end=iso_time_ns(o.get("endTime")), attrs=dict(attrs), error=error, kind=str(o.get("type") or "") or None,
                input=o.get("input"), output=o.get("output"), model=model_name(o.get("model"), "model"), usage=_usage(o),
                order=i)


def read_traces(files: Sequence[str | os.PathLike[str]], options: TraceOptions) -> list[InputRecord]:
    """One record per exported trace (see the module docstring)."""
    out = []
    seen: dict[str, str] = {}
    for f in files:
        for rec in iter_records(f):
            if rec.question_id is not None:
                raise rec.fail("a wrapper {\"question_id\", \"record\"} around a Langfuse export: name the "
                               "question in the trace's metadata or tags instead (see --question-key)")
            trace, obs = _split(rec)
            tid = trace["id"].strip()
            if tid in seen:
                raise rec.fail(f"trace {tid!r} again (also in {seen[tid]})")
            seen[tid] = rec.where
            try:
                spans = [_span(tid, o, i, rec) for i, o in enumerate(obs, start=1)]
            except FieldError as e:
                raise rec.fail(f"trace {tid!r}: {e}") from None
            meta = as_dict(maybe_json(trace.get("metadata")))
            qid = question_id_of(spans, options.question_key, meta, as_dict(meta.get("attributes")),
                                 trace.get("tags") or [])
            try:
                texts = () if qid is not None else question_texts(spans, trace.get("input"))
            except FieldError as e:
                raise rec.fail(f"trace {tid!r}: {e}") from None
            out.append(InputRecord(Path(rec.file), rec.position, {"trace": trace, "spans": spans, "options": options},
                                   qid, unit=rec.unit, label=f"trace {tid}", texts=texts))
    return out


def parse(rec: InputRecord) -> Parsed:
    trace = rec.data["trace"]
    try:
        return parse_spans(rec.data["spans"], rec.data["options"], trace_output=trace.get("output"))
    except (TypeError, AttributeError, KeyError) as e:  # a shape the readers did not expect
        raise ImportFailure(f"{rec.where} (trace {trace.get('id')}): cannot be read ({e!r})") from None
