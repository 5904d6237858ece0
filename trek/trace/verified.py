"""What ``trek trace verify`` found, read beside the trace: for the viewer, the export, Figure 2
and :meth:`trek.api.Run.frame`.

``verify.jsonl`` (:mod:`trek.trace.verify`) holds one record per (case, experiment). Here those
records are matched to the run's trace records and put into the words and values every place
that shows them uses, so the viewer, the exported scores, the figure's table and the frame say the
same thing. A run without ``verify.jsonl`` has no verification: every reader here then returns
nothing, and the places that show verification show what they showed before.

A verification record belongs to a trace record while it was made for the labels the case carries
now (the record keeps the labels it saw): after a ``trek trace`` that changed a case's labels, its
earlier experiments are **stale** and count nowhere until ``trek trace verify`` runs again. The
labels themselves are never changed here: verification is read beside them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from trek import runs
from trek.pages import normalize_url
from trek.trace.records import TraceRecord
from trek.trace.verify import EXPERIMENTS, TESTS_LABELS, VerifyRecord, load_verify

__all__ = [
    "EXPERIMENTS",
    "TESTS_LABELS",
    "CaseVerification",
    "current",
    "has_verify",
    "verify_by_case",
    "state",
    "verdict_text",
    "minimal_set_text",
    "query_came_back",
    "repair_text",
]


def has_verify(run_dir: str | os.PathLike[str]) -> bool:
    """Whether the run has a ``verify.jsonl`` (``trek trace verify`` ran on it)."""
    return (Path(run_dir) / runs.VERIFY).is_file()


@dataclass
class CaseVerification:
    """The experiments of one case: ``records`` by experiment (the current ones, made for the
    labels the case carries now) and ``stale`` (made for labels it no longer carries)."""

    records: dict[str, VerifyRecord]
    stale: list[VerifyRecord]

    def get(self, experiment: str) -> VerifyRecord | None:
        return self.records.get(experiment)


def current(v: VerifyRecord, r: TraceRecord | None) -> bool:
    """Whether ``v`` was made for the labels the trace record ``r`` carries now."""
    return r is not None and v.label in r.labels and (not v.labels or list(v.labels) == list(r.labels))


def verify_by_case(run_dir: str | os.PathLike[str],
                   traces: Mapping[str, TraceRecord] | Iterable[TraceRecord] | None = None
                   ) -> dict[str, CaseVerification]:
    """``{question id: CaseVerification}`` of the run's ``verify.jsonl`` (empty without one),
    matched to ``traces`` (default: the run's ``trace.jsonl``). A record whose question has no
    trace record is stale."""
    records = load_verify(run_dir)
    if not records:
        return {}
    if traces is None:
        from trek.trace.pipeline import load_trace

        traces = load_trace(run_dir)
    by_id = dict(traces) if isinstance(traces, Mapping) else {r.question_id: r for r in traces}
    out: dict[str, CaseVerification] = {}
    for v in records:
        case = out.setdefault(v.question_id, CaseVerification({}, []))
        if current(v, by_id.get(v.question_id)):
            case.records[v.experiment] = v
        else:
            case.stale.append(v)
    return out


def state(v: VerifyRecord) -> str:
    """The record's verdict (``confirmed``, ``refuted``, ``inconclusive``, ``skipped``), or its
    status while it has none (``pending``: a call failed or the budget ran out; ``failed``)."""
    if v.status == "done" and v.verdict is not None:
        return v.verdict
    return v.status


def verdict_text(v: VerifyRecord) -> str:
    """``confirmed``, or the state with its reason (``refuted: ...``), or ``pending: error``."""
    s = state(v)
    why = v.reason if v.status == "done" else v.error
    return f"{s}: {why}" if why else s


def minimal_set_text(v: VerifyRecord) -> str | None:
    """The minimal distracting set as ``URL (Ctrl kind); URL``; ``None`` when the search found none."""
    if not v.minimal_set:
        return None
    return "; ".join(p.url + (f" ({p.ctrl_kind})" if p.ctrl_kind else "") for p in v.minimal_set)


def query_came_back(v: VerifyRecord, query: str) -> bool | None:
    """Whether the results of the repaired ``query`` hold a page the experiment counted as the gold
    page or its equivalent (``found_urls``); ``None`` when the query was not searched."""
    if v.results is None or query not in v.results:
        return None
    found = {normalize_url(u) for u in v.found_urls or []}
    return any(normalize_url(u) in found for u in v.results[query])


def repair_text(v: VerifyRecord) -> str | None:
    """The repaired queries, each with whether the gold page came back: ``"q1" -> gold back;
    "q2" -> no gold``; ``None`` when the judge wrote none."""
    if not v.repaired_queries:
        return None
    words = {True: "gold back", False: "no gold", None: "not searched"}
    return "; ".join(f"\"{q}\" -> {words[query_came_back(v, q)]}" for q in v.repaired_queries)
