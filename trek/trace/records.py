"""The persisted TrekTrace records: one :class:`TraceRecord` per traced failure in ``trace.jsonl``.

A record holds everything a reviewer needs to check the attribution (paper appendix C.4,
"review artifacts"): the case (question, references, gold URLs, prediction, queries, the whole
retrieved URL collection), the URL identity matches, the evidence the diagnostic judge extracted
and matched, the query assessment, both counterfactual contexts with the evaluated model's
answers and the analysis judge's grades, the four flags E/Q/G/N, the labels, and every model
call as a :class:`Step` (with ``--judge oracle --audit-judge M``, the audit judge's answers to the exact
judge's steps too, in ``audit_steps``) (role, model, endpoint, prompt template and version, status, raw
replies, usage).

``tests`` says for each test of the case (:data:`TESTS`) whether it ran, was skipped (and why:
no gold page, a judge reply that stayed unreadable, queries not recorded, ...) or was not needed by
the C.4 schedule. Labels come only from tests that ran. ``status`` is ``done`` (every test the
case needs ran; labelled by C.4), ``incomplete`` (some needed test was skipped: labels only from
the side whose tests ran, never Randomness by elimination; tried again on the next run),
``pending`` (a call failed after its retries, or the budget ran out; no labels, retried) or
``failed`` (tracing the case raised an internal error, named in ``error``; retried). An unreadable reply is not a failure: that step's
status is ``unknown``, its flag is ``None`` and :func:`~trek.trace.labels.assign_labels` decides
what follows. A step a judge could not decide (the exact judge abstains rather than guess) has
status ``undecided`` and its reason in ``error``; the test that asked it is skipped with that
reason, whatever the unknown-judgment policy, so C.4 never labels from it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from trek.trace.labels import in_c4_order
from trek.types import Coverage, Record, Usage, utcnow

__all__ = ["Step", "UrlMatch", "TraceRecord", "TestRun", "TESTS", "StepStatus", "Role"]

StepStatus = Literal["ok", "unknown", "undecided", "pending"]
Role = Literal["diagnostic", "analysis", "evaluated"]
TestState = Literal["ran", "skipped", "not_needed"]
#: The tests of a traced case, in the order of appendix C (``stale`` only with ``--check-stale``).
TESTS: tuple[str, ...] = ("retrieval", "queries", "gold_only", "noise", "stale")


class TestRun(Record):
    """Whether one test of a case ran: ``ran``, ``skipped`` (``reason`` says why: no gold page,
    judge reply unreadable, queries not recorded, ...) or ``not_needed`` by the C.4 schedule."""

    state: TestState
    reason: str | None = None


class Step(Record):
    """One model call of the trace (with its re-asks), as recorded."""

    name: str
    role: Role
    model: str
    endpoint: str
    template: str
    version: str
    status: StepStatus
    value: dict[str, Any] = Field(default_factory=dict)
    raw: list[str] = Field(default_factory=list)
    error: str | None = None
    usage: Usage = Field(default_factory=Usage)
    #: With a cascade of judges (``--judge exact,MODEL``): each judge asked, in order, and its status.
    cascade: list[dict[str, Any]] | None = None


class UrlMatch(Record):
    """A gold URL and the retrieved URL with the same identity (``None``: not retrieved)."""

    gold_url: str
    matched_url: str | None = None


class TraceRecord(Record):
    """One traced failure (see the module docstring)."""

    question_id: str
    dataset: str
    question: str
    answers: list[str]
    effective_year: str | None = None
    gold_urls: list[str] = Field(default_factory=list)
    prediction: str | None = None
    original_outcome: str
    queries: list[str] = Field(default_factory=list)
    retrieved_urls: list[str] = Field(default_factory=list)
    url_matches: list[UrlMatch] = Field(default_factory=list)

    status: Literal["done", "incomplete", "pending", "failed"]
    error: str | None = None
    tests: dict[str, TestRun] = Field(default_factory=dict)

    # the four stage flags of C.4 (None: unknown or not asked)
    evidence_retrieved: bool | None = None
    query_adequate: bool | None = None
    gold_only_correct: bool | None = None
    noise_was_run: bool = False
    noise_correct: bool | None = None
    labels: list[str] = Field(default_factory=list)

    # retrieval test
    # url-identity | evidence-match | no-retrieved-pages | gold-unavailable | retrieved-unavailable |
    # results-not-recorded | unknown
    retrieval_basis: str | None = None
    #: The evidence test said "not retrieved" from part of what happened (results seen only
    #: through citations, or snippets instead of pages): a lower bound on retrieval, marked as such.
    evidence_lower_bound: bool = False
    key_evidence: str | None = None
    retrieved_key_evidence: str | None = None
    equivalent_urls: list[str] = Field(default_factory=list)
    evidence_reason: str | None = None
    query_reason: str | None = None

    # post-retrieval counterfactuals
    gold_pages_available: bool | None = None
    gold_only_context: list[str] = Field(default_factory=list)
    gold_only_answer: str | None = None
    gold_only_reasoning: str | None = None
    gold_only_grade_reason: str | None = None
    noise_context: list[str] = Field(default_factory=list)
    noise_answer: str | None = None
    noise_reasoning: str | None = None
    noise_grade_reason: str | None = None

    # optional stale-reference check (None: not run or unknown)
    stale_reference: bool | None = None
    stale_reason: str | None = None

    #: What the run's log let TrekTrace observe (``None``: everything, as in Trek's own runs), and
    #: what that changed in this case's tests, in words.
    coverage: Coverage | None = None
    coverage_notes: list[str] = Field(default_factory=list)

    steps: list[Step] = Field(default_factory=list)
    #: An audit judge's answers to the steps the exact judge decided (same template and inputs; they
    #: decide nothing). Written only when there are some (``trek trace --judge oracle --audit-judge M``).
    audit_steps: list[Step] = Field(default_factory=list, exclude_if=lambda v: not v)
    models: dict[str, str] = Field(default_factory=dict)
    versions: dict[str, str] = Field(default_factory=dict)
    usage: Usage = Field(default_factory=Usage)
    input_key: str = ""
    trace_version: str = ""
    created_at: str = Field(default_factory=utcnow)

    @field_validator("labels")
    @classmethod
    def _labels_in_c4_order(cls, labels: list[str]) -> list[str]:
        # however a record was written (an import, an edited file), its labels read in C.4's order
        return in_c4_order(labels)

    @property
    def skipped(self) -> dict[str, str]:
        """``{test: reason}`` of the tests that could not run."""
        return {k: t.reason or "no reason recorded" for k, t in self.tests.items() if t.state == "skipped"}

    @property
    def flags(self) -> str:
        """``E=… Q=… G=… N=…`` with ``T``/``F``/``?`` (unknown) and ``-`` (not run)."""

        def f(v: bool | None) -> str:
            return "?" if v is None else ("T" if v else "F")

        n = f(self.noise_correct) if self.noise_was_run else "-"
        return f"E={f(self.evidence_retrieved)} Q={f(self.query_adequate)} G={f(self.gold_only_correct)} N={n}"
