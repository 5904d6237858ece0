"""TrekTrace's labels back into the traces they came from (``trek trace export``).

A run imported from traces (``trek import otlp|langfuse|phoenix|mlflow``) keeps each
trajectory's trace id (``source.record_id``) and root span id (``details.trace``). After
``trek trace``, every traced case becomes, per label of :data:`~trek.trace.labels.LABELS`, one
score whose value is 1 when TrekTrace gave the label and 0 when it did not, plus one
``trektrace.status`` (``done``/``incomplete``/``pending``/``failed``, with the reason). A label
whose side of C.4 did not run (an incomplete case's skipped tests) is not written: no 0 from a
test that did not run, and Randomness only for a case that is ``done``.

* ``langfuse``: JSONL, one score object a line for Langfuse's public API (``POST
  /api/public/scores``, or as ``score-create`` bodies of ``/api/public/ingestion``):
  ``id`` (stable, so sending again updates instead of duplicating), ``traceId``, ``name``
  ``trektrace.<label>``, ``value``, ``dataType`` (``BOOLEAN`` for labels, ``CATEGORICAL`` for the
  status) and ``comment`` (why);
* ``otlp``: one OTLP/JSON ``ExportTraceServiceRequest`` holding, per traced case, a span
  ``trektrace`` in the imported trace (same ``traceId``, ``parentSpanId`` the root span) with one
  ``gen_ai.evaluation.result`` event per score (``gen_ai.evaluation.name``,
  ``gen_ai.evaluation.score.value``, ``gen_ai.evaluation.score.label`` ``yes``/``no`` or the
  status, ``gen_ai.evaluation.explanation``), ready for a collector's OTLP/HTTP receiver.

When ``trek trace verify`` has run (``verify.jsonl``), each traced case also gets one categorical
score per experiment it was put to: ``trektrace.verify_distractor_search`` and
``trektrace.verify_query_repair``, whose value is the verdict (``confirmed``, ``refuted``,
``inconclusive``, ``skipped``; ``pending`` or ``failed`` while the experiment has none), whose
comment is the reason, and whose details (Langfuse ``metadata``, OTLP event attributes
``trek.verify.*``) carry the label tested, the minimal distracting set (``minimal_set``: URL and
Ctrl kind) and the repaired queries (``repaired_queries``, ``gold_found``). The label scores stay
the trace's: a verdict never changes them. A run without ``verify.jsonl`` exports as before.

Nothing is sent here; :mod:`trek.trace.destinations` sends the same scores to Phoenix, MLflow or
an OTLP/HTTP collector (``trek trace export --to``). A traced case whose trajectory has no trace id (a run not
imported from traces) is an error naming it.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trek import __version__, runs
from trek.outputs import atomic_write, check_out
from trek.trace.labels import LABELS, POST_RETRIEVAL, UPSTREAM
from trek.trace.pipeline import load_trace
from trek.trace.records import TraceRecord
from trek.trace.verified import has_verify, minimal_set_text, repair_text, state, verdict_text, verify_by_case
from trek.trace.verify import EXPERIMENTS, VerifyRecord
from trek.types import Trajectory

__all__ = ["FORMATS", "Score", "scores", "langfuse_rows", "otlp_request", "export_labels", "score_name",
           "verify_score_name", "VERIFY_SCORE_NAMES"]

#: The import formats whose trajectories keep a trace id to write labels back to.
TRACE_FORMATS = ("otlp", "langfuse", "phoenix", "mlflow")
#: The output formats of :func:`export_labels`.
FORMATS = ("langfuse", "otlp")
_HEX32 = re.compile(r"^[0-9a-f]{32}$")
_HEX16 = re.compile(r"^[0-9a-f]{16}$")


def score_name(label: str) -> str:
    """``trektrace.<label>`` in lower case with ``_`` for other characters (``Pre-retrieval`` ->
    ``trektrace.pre_retrieval``)."""
    return "trektrace." + re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")


def verify_score_name(experiment: str) -> str:
    """The score of one ``trek trace verify`` experiment: ``trektrace.verify_distractor_search``."""
    return f"trektrace.verify_{experiment}"


#: The verification scores, one per experiment.
VERIFY_SCORE_NAMES = tuple(verify_score_name(e) for e in EXPERIMENTS)


@dataclass(frozen=True)
class Score:
    """One score of one traced case: a label's 0/1 (``value``) or a category (``status``: the
    case's trace status, or a verification's verdict), and for a verification its ``details``
    (label tested, minimal set, repaired queries)."""

    trace_id: str
    root_span_id: str | None
    question_id: str
    name: str
    value: int | None
    status: str | None
    comment: str
    time: str
    details: dict[str, Any] | None = field(default=None, compare=False, hash=False)


def verify_details(v: VerifyRecord) -> dict[str, Any]:
    """What an exported verification score carries beside its verdict: ``label`` (the label
    tested), then for a distractor search ``noise_pages`` and ``minimal_set`` (``[{"url",
    "ctrl_kind"}]``, empty when none was found), for a query repair ``backend``, ``live``,
    ``repaired_queries``, ``found_urls`` (the results counted as the gold page or its
    equivalent) and ``gold_found`` (``None`` when nothing was searched or it could not be told);
    ``calls``, the questions the experiment asked."""
    out: dict[str, Any] = {"label": v.label}
    if v.experiment == "distractor_search":
        out["noise_pages"] = v.noise_pages
        out["minimal_set"] = [{"url": p.url, "ctrl_kind": p.ctrl_kind} for p in v.minimal_set or []]
    else:
        out.update(backend=v.backend, live=v.live, repaired_queries=list(v.repaired_queries or []),
                   found_urls=list(v.found_urls or []),
                   gold_found=None if v.results is None or v.found_urls is None else bool(v.found_urls))
    out["calls"] = v.calls
    return out


def _verify_comment(v: VerifyRecord) -> str:
    found = minimal_set_text(v) if v.experiment == "distractor_search" else repair_text(v)
    what = "minimal distracting set" if v.experiment == "distractor_search" else "repaired queries"
    return f"{v.label}: {verdict_text(v)}" + (f"; {what}: {found}" if found else "")


def _why(r: TraceRecord, label: str) -> str:
    if label in UPSTREAM:
        parts = [r.evidence_reason, r.query_reason] if label == "Pre-retrieval" else [r.evidence_reason]
        basis = f"retrieval test: {r.retrieval_basis}" if r.retrieval_basis else None
        text = "; ".join(p for p in [basis, *parts] if p)
    elif label == "Interpretation":
        text = r.gold_only_grade_reason or ""
    elif label == "Distraction":
        text = r.noise_grade_reason or ("the gold-plus-noise probe was not run" if not r.noise_was_run else "")
    else:
        text = "no other rule fired" if label in r.labels else "another label applies"
    return f"{r.flags}" + (f"; {text}" if text else "")


def _sides(r: TraceRecord) -> tuple[bool, bool]:
    t = r.tests
    if r.status == "done":
        return True, True
    if r.status != "incomplete":
        return False, False

    def state(name: str) -> str:
        return t[name].state if name in t else "skipped"

    upstream = state("retrieval") == "ran" and (r.evidence_retrieved is True or state("queries") == "ran")
    post = state("gold_only") == "ran" and (r.gold_only_correct is not True or state("noise") == "ran")
    return upstream, post


def _status_reason(r: TraceRecord) -> str:
    if r.status == "done":
        return "every test the case needs ran; labels: " + (", ".join(r.labels) or "none")
    skipped = "; ".join(f"{k}: {v}" for k, v in r.skipped.items())
    return (r.error or skipped or r.status) + (f" (labels so far: {', '.join(r.labels)})" if r.labels else "")


def _ids(t: Trajectory, qid: str, run_dir: Path) -> tuple[str, str | None]:
    trace = t.details.get("trace") if isinstance(t.details.get("trace"), dict) else {}
    tid = (t.source.record_id if t.source is not None else None) or trace.get("trace_id")
    if t.source is None or t.source.format not in TRACE_FORMATS or not tid:
        raise ValueError(f"{run_dir}: question {qid!r} was not imported from a trace (trek import "
                         f"{'|'.join(TRACE_FORMATS)}): "
                         "it has no trace id to write its labels to")
    return str(tid), trace.get("root_span_id")


def scores(run_dir: str | os.PathLike[str]) -> list[Score]:
    """Every score of a traced imported run (see the module docstring), in trace order."""
    rd = Path(run_dir)
    records = load_trace(rd)
    if not records:
        raise FileNotFoundError(f"{rd}: no trace.jsonl records (run `trek trace {rd}` first)")
    answers = runs.load_answers(rd)
    verified = verify_by_case(rd, records) if has_verify(rd) else {}
    out = []
    for r in records:
        t = answers.get(r.question_id)
        if t is None:
            raise ValueError(f"{rd / runs.TRACE}: question {r.question_id!r} has no trajectory in {runs.ANSWERS}")
        tid, root = _ids(t, r.question_id, rd)
        upstream, post = _sides(r)
        for label in LABELS:
            side = upstream if label in UPSTREAM else post if label in POST_RETRIEVAL else r.status == "done"
            if side:
                out.append(Score(tid, root, r.question_id, score_name(label), int(label in r.labels), None,
                                 _why(r, label), r.created_at))
        out.append(Score(tid, root, r.question_id, "trektrace.status", None, r.status, _status_reason(r),
                         r.created_at))
        case = verified.get(r.question_id)
        for experiment in EXPERIMENTS:
            v = case.get(experiment) if case is not None else None
            if v is not None:
                out.append(Score(tid, root, r.question_id, verify_score_name(experiment), None, state(v),
                                 _verify_comment(v), v.created_at, verify_details(v)))
    return out


def _score_id(s: Score) -> str:
    return "trektrace-" + hashlib.sha256(f"{s.trace_id}/{s.name}".encode()).hexdigest()[:24]


def langfuse_rows(items: list[Score]) -> list[dict[str, Any]]:
    """The Langfuse score objects of ``items``."""
    rows = []
    for s in items:
        row: dict[str, Any] = {"id": _score_id(s), "traceId": s.trace_id, "name": s.name}
        if s.value is not None:
            row.update(value=s.value, dataType="BOOLEAN")
        else:
            row.update(value=s.status, dataType="CATEGORICAL")
        row["comment"] = s.comment
        row["metadata"] = {"question_id": s.question_id, "trek_version": __version__, **(s.details or {})}
        rows.append(row)
    return rows


def _ns(time: str) -> str:
    try:
        t = _dt.datetime.fromisoformat(time.replace("Z", "+00:00"))
    except ValueError:
        return "0"
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.UTC)
    return str(int(t.timestamp()) * 1_000_000_000)


def _any(value: Any) -> dict[str, Any]:
    """An OTLP/JSON ``AnyValue``."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, (list, tuple)):
        return {"arrayValue": {"values": [_any(x) for x in value]}}
    return {"stringValue": str(value)}


def _kv(key: str, value: Any) -> dict[str, Any]:
    return {"key": key, "value": _any(value)}


def _detail_attributes(details: dict[str, Any]) -> list[dict[str, Any]]:
    """A verification's details as ``trek.verify.*`` attributes (a minimal set as two parallel
    arrays, its URLs and their Ctrl kinds, ``""`` for none; a missing value left out)."""
    attrs = []
    for key, value in details.items():
        if key == "minimal_set":
            attrs.append(_kv("trek.verify.minimal_set", [p["url"] for p in value]))
            attrs.append(_kv("trek.verify.minimal_set_ctrl_kinds", [p["ctrl_kind"] or "" for p in value]))
        elif value is not None:
            attrs.append(_kv(f"trek.verify.{key}", value))
    return attrs


def otlp_request(items: list[Score], run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """One ExportTraceServiceRequest with a ``trektrace`` span per traced case (see the module
    docstring). Trace and root span ids must be OTel's hex ids."""
    by_trace: dict[str, list[Score]] = {}
    for s in items:
        by_trace.setdefault(s.trace_id, []).append(s)
    spans = []
    for tid, group in by_trace.items():
        first = group[0]
        if not _HEX32.match(tid.lower()):
            raise ValueError(f"{run_dir}: question {first.question_id!r}: trace id {tid!r} is not an OpenTelemetry "
                             "trace id (32 hex digits): export it with --format langfuse")
        root = (first.root_span_id or "").lower()
        if not _HEX16.match(root):
            raise ValueError(f"{run_dir}: question {first.question_id!r}: the trace's root span id {root or None!r} "
                             "is not an OpenTelemetry span id (16 hex digits)")
        when = _ns(first.time)
        events = []
        for s in group:
            attrs = [_kv("gen_ai.evaluation.name", s.name)]
            if s.value is not None:
                attrs += [_kv("gen_ai.evaluation.score.value", float(s.value)),
                          _kv("gen_ai.evaluation.score.label", "yes" if s.value else "no")]
            else:
                attrs.append(_kv("gen_ai.evaluation.score.label", s.status))
            attrs.append(_kv("gen_ai.evaluation.explanation", s.comment))
            attrs += _detail_attributes(s.details or {})
            events.append({"timeUnixNano": when, "name": "gen_ai.evaluation.result", "attributes": attrs})
        spans.append({"traceId": tid.lower(), "spanId": hashlib.sha256(f"trektrace/{tid}".encode()).hexdigest()[:16],
                      "parentSpanId": root, "name": "trektrace", "kind": 1, "startTimeUnixNano": when,
                      "endTimeUnixNano": when,
                      "attributes": [_kv("trek.question_id", first.question_id)], "events": events})
    return {"resourceSpans": [{"resource": {"attributes": [_kv("service.name", "trektrace")]},
                               "scopeSpans": [{"scope": {"name": "trek.trace", "version": __version__},
                                               "spans": spans}]}]}


def export_labels(run_dir: str | os.PathLike[str], fmt: str, out: str | os.PathLike[str]) -> tuple[Path, int, int]:
    """Write the labels of a traced imported run as ``fmt`` (``langfuse`` or ``otlp``) to
    ``out``; returns the path, the number of scores and of traced cases."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r} (formats: {', '.join(FORMATS)})")
    path = check_out(out, runs=[run_dir], example=runs.LANGFUSE_SCORES if fmt == "langfuse" else runs.OTLP_EVALUATIONS)
    items = scores(run_dir)
    cases = len({s.trace_id for s in items})
    if fmt == "langfuse":
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in langfuse_rows(items))
    else:
        text = json.dumps(otlp_request(items, run_dir), ensure_ascii=False, indent=1) + "\n"
    atomic_write(path, text)
    return path, len(items), cases
