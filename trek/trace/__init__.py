"""TrekTrace: automatic failure attribution for search-augmented runs (paper §3.1, appendix C).

For every failed answer of a run, TrekTrace tests whether the answer-bearing evidence was
retrieved (URL identity, then evidence matching by a diagnostic judge, then query adequacy by an
analysis judge) and whether the evaluated model answers right from the gold pages alone and
from the gold pages mixed with what it retrieved. Labels follow deterministically
(:func:`assign_labels`): Pre-retrieval, Retrieval, Interpretation, Distraction, Randomness.

* :mod:`trek.trace.inputs` — the cases of a run and their retrieved-URL collections (C.1);
* :mod:`trek.trace.parts` — what a test is (:class:`~trek.trace.parts.TraceTest`, registered with
  ``@trace_test``), the questions it asks, one case being traced;
* :mod:`trek.trace.evidence`, :mod:`~trek.trace.queries`, :mod:`~trek.trace.probes`,
  :mod:`~trek.trace.stale` — the tests, each with its prompts, schemas, readers and ``version``
  (:mod:`~trek.trace.verdict`: the probes' grade);
* :mod:`trek.trace.schedule` — the C.4 schedule as data; :mod:`trek.trace.labels` — the
  versioned label rule (C.4);
* :mod:`trek.trace.exact` — the judge steps decided from annotations when a judge is ``oracle``;
* :mod:`trek.trace.pipeline` — :func:`trace_run`, writing ``RUN_DIR/trace.jsonl``;
* :mod:`trek.trace.review`, :mod:`~trek.trace.agreement`, :mod:`~trek.trace.view` — the review
  workbook, reviewer agreement (Cohen's kappa) and the HTML case viewer.

Its tables and figures (Figures 2 and 3, Table A.4.2) are in :mod:`trek.report.trace`.
"""

from trek.trace.common import RoleModel
from trek.trace.labels import LABELS, assign_labels
from trek.trace.pipeline import TraceReport, atrace_run, load_trace, trace_run
from trek.trace.records import Step, TraceRecord

__all__ = [
    "LABELS",
    "RoleModel",
    "Step",
    "TraceRecord",
    "TraceReport",
    "assign_labels",
    "atrace_run",
    "load_trace",
    "trace_run",
]
