"""The TrekTrace pipeline: trace every failed case of a run and write ``trace.jsonl``.

For each failed case (:func:`~trek.trace.inputs.select_cases`):

1. **Retrieval test** (C.2). Every gold URL is looked up in the retrieved collection by URL
   identity. All found: evidence retrieved (``E=True``). Otherwise, with an empty collection,
   ``E=False``; with a non-empty one, the diagnostic judge extracts the key evidence from the gold
   pages not found and checks whether the retrieved pages jointly contain it
   (:mod:`trek.trace.evidence`). When ``E`` is not ``True`` the analysis judge assesses the
   queries (``Q``, :mod:`trek.trace.queries`).
2. **Post-retrieval test** (C.3). The evaluated model answers from the gold pages only; the
   analysis judge grades the answer (``G``). Only when ``G`` is ``True`` the model answers from
   the retrieved collection followed by the missing gold pages, and that answer is graded
   (``N``) (:mod:`trek.trace.probes`, :mod:`trek.trace.verdict`).
3. **Labels** (C.4) from ``E, Q, G, N`` by :func:`~trek.trace.labels.assign_labels`.
4. Optionally (``check_stale``) the diagnostic judge says whether the gold pages still support
   the reference (:mod:`trek.trace.stale`); it never changes a label.

A call that fails after its retries (or is not issued because the budget is used up) stops the
case: it is written ``pending`` without labels and traced again on the next run. A reply that
stays unreadable after the re-asks is an ``unknown`` judgment (flag ``None``). The loop (resume
by input key, fan-out, checkpoints, failures, the run lock) is :mod:`trek.stage`'s.

Programmatic use::

    from trek.trace import trace_run, RoleModel
    report = trace_run(run_dir, diagnostic=RoleModel("diagnostic", judge_client, "gpt-5.4"),
                       analysis=RoleModel("analysis", judge_client, "gpt-5.4"))
    report.records  # TraceRecord list, also in RUN_DIR/trace.jsonl
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trek import runs
from trek.answer_prompts import year_text
from trek.exact import is_exact
from trek.graders.common import join_answers
from trek.llm.client import LLMClient
from trek.llm.ledger import ledger_path
from trek.local import LOCAL_MODEL
from trek.pages import GOLD_CHARS, NON_GOLD_CHARS, Page, PageStore, normalize_url
from trek.roles import EVALUATED, Role
from trek.runs import default_cache_path, default_pages_path
from trek.stage import Slot, Stage, borrowed_cache, digest, execute, synchronous
from trek.trace import evidence, exact, probes, queries, stale, verdict
from trek.trace.common import NOT_GIVEN, Budget, RoleModel, ask, fetch_pages, render_pages
from trek.trace.inputs import FAILED_OUTCOMES, Selection, TraceInput, noise_context, select_cases, url_matches
from trek.trace.labels import assign_covered
from trek.trace.records import Step, TestRun, TraceRecord, UrlMatch
from trek.types import FULL_COVERAGE, RecordError, Usage, iter_jsonl

__all__ = [
    "TRACE_VERSION",
    "TraceConfig",
    "TraceReport",
    "TraceTotals",
    "TraceStage",
    "trace_case",
    "atrace_run",
    "trace_run",
    "load_trace",
    "evaluated_role_from_run",
    "GOLD_UNAVAILABLE",
]

#: Version of the pipeline's logic (bump when the schedule or the record changes meaning).
TRACE_VERSION = "trektrace-2"


@dataclass
class TraceConfig:
    """The three roles, the page store and the options of one tracing run."""

    diagnostic: RoleModel
    analysis: RoleModel
    evaluated: RoleModel
    store: PageStore
    check_stale: bool = False
    budget: Budget | None = None
    #: Characters of each gold page and of any other page shown to a model (paper C.5: 50,000 and 3,500).
    gold_chars: int = GOLD_CHARS
    other_chars: int = NON_GOLD_CHARS
    #: How an unreadable judgment counts (:data:`UNKNOWN_POLICIES`).
    unknown: str = "incomplete"
    #: The exact judge's side (:class:`trek.trace.exact.ExactTrace`) when a judge role is ``oracle``.
    exact: Any = None
    #: Audit judges by role (``diagnostic``, ``analysis``): asked each step the exact judge answers,
    #: with the same template and inputs, into ``TraceRecord.audit_steps`` (they decide nothing).
    audit: dict[str, RoleModel] = field(default_factory=dict)
    #: Audit only the first this many cases of the selection (question order); ``None``: all.
    audit_cases: int | None = None

    def pages(self, pages: Sequence[Page], gold_keys: Iterable[str]) -> str:
        """``pages`` rendered for a prompt with this run's page limits."""
        return render_pages(pages, gold_keys, gold_chars=self.gold_chars, other_chars=self.other_chars)

    def models(self) -> dict[str, str]:
        return {r.role: r.describe() for r in (self.diagnostic, self.analysis, self.evaluated)}

    def versions(self) -> dict[str, str]:
        from trek.templates import template_version as tv

        out = {
            "trace": TRACE_VERSION,
            evidence.KEY_EVIDENCE_TEMPLATE: tv(evidence.KEY_EVIDENCE_TEMPLATE, evidence.KEY_EVIDENCE_PROMPT,
                                               evidence.VERSION),
            evidence.MATCH_TEMPLATE: tv(evidence.MATCH_TEMPLATE, evidence.MATCH_PROMPT, evidence.VERSION),
            queries.TEMPLATE: tv(queries.TEMPLATE, queries.PROMPT, queries.VERSION),
            probes.GOLD_ONLY_TEMPLATE: tv(probes.GOLD_ONLY_TEMPLATE, probes.GOLD_ONLY_PROMPT, probes.VERSION),
            probes.NOISE_TEMPLATE: tv(probes.NOISE_TEMPLATE, probes.NOISE_PROMPT, probes.VERSION),
            verdict.TEMPLATE: tv(verdict.TEMPLATE, verdict.PROMPT, verdict.VERSION),
        }
        if self.check_stale:
            out[stale.TEMPLATE] = tv(stale.TEMPLATE, stale.PROMPT, stale.VERSION)
        if self.exact is not None:
            out["exact"] = exact.VERSION
        return out

    def settings(self) -> dict[str, Any]:
        """Everything of the configuration that can change a record (for the resume key)."""
        return {
            "roles": {r.role: [r.model, r.endpoint, r.params, r.max_reasks]
                      for r in (self.diagnostic, self.analysis, self.evaluated)},
            "versions": self.versions(),
            "check_stale": self.check_stale,
            **({"page_chars": [self.gold_chars, self.other_chars]}
               if (self.gold_chars, self.other_chars) != (GOLD_CHARS, NON_GOLD_CHARS) else {}),
            "unknown": self.unknown,
            **({"exact": [self.exact.rule, self.exact.query_depth]} if self.exact is not None else {}),
            **({"audit": {k: [r.model, r.endpoint, r.params, r.max_reasks] for k, r in self.audit.items()},
                "audit_cases": self.audit_cases} if self.audit else {}),
        }


def _page_state(store: PageStore, url: str) -> str | None:
    """What the page store holds for ``url``: ``None`` (nothing), ``unavailable``, or a digest of
    the stored text (so adding or changing a page re-traces the cases that show it)."""
    page = store.lookup(url)
    if page is None:
        return None
    return digest(page.text, 16) if page.available else "unavailable"


def _input_key(case: TraceInput, config: TraceConfig) -> str:
    q = case.question
    cov = case.trajectory.observed
    return digest({
        **({"coverage": cov.model_dump()} if cov != FULL_COVERAGE else {}),
        "question": [q.id, q.question, q.answers, year_text(q), q.gold_urls],
        "prediction": case.prediction,
        "queries": case.queries,
        "collection": case.collection,
        "pages": [_page_state(config.store, u) for u in [*q.gold_urls, *case.collection]],
        "settings": config.settings(),
        **({"annotations": config.exact.fingerprint(q)} if config.exact is not None else {}),
    }, 16)


class _Pending(Exception):
    def __init__(self, step: Step):
        super().__init__(step.error or f"step {step.name} failed")
        self.step = step


def _case_fields(case: TraceInput, config: TraceConfig, key: str | None = None) -> dict[str, Any]:
    """The part of a record that describes the case and the configuration it was traced with."""
    q = case.question
    return {"question_id": q.id, "dataset": q.dataset, "question": q.question, "answers": list(q.answers),
            "effective_year": year_text(q) or None, "gold_urls": list(q.gold_urls), "prediction": case.prediction,
            "original_outcome": case.grade.outcome, "queries": case.queries, "retrieved_urls": case.collection,
            "models": config.models(), "versions": config.versions(),
            "input_key": key if key is not None else _input_key(case, config),
            "trace_version": TRACE_VERSION}


#: Why a test could not run (the reasons recorded in ``TraceRecord.tests``).
NO_GOLD_PAGE = "no gold page"
NO_RETRIEVED_TEXT = "no retrieved page text"
UNREADABLE = "judge reply unreadable"
PROBE_UNREADABLE = "probe reply unreadable"
NEEDS_GOLD_ONLY = "needs the gold-only result"
NO_QUERIES_SEEN = "queries not recorded"
SOME_QUERIES_SEEN = "queries only partly recorded"
NO_RESULTS_SEEN = "results not recorded"
#: How an unreadable judgment counts: ``incomplete`` (the test did not run; default) or ``paper``
#: (C.4 as printed: an ``unknown`` value that the rules place, Randomness as the residual).
UNKNOWN_POLICIES = ("incomplete", "paper")


async def trace_case(case: TraceInput, config: TraceConfig, key: str | None = None) -> TraceRecord:
    """Trace one failed case (see the module docstring); never raises for a failed call. ``key``:
    the case's input key when the caller has it (computed otherwise)."""
    q = case.question
    year = year_text(q) or NOT_GIVEN
    answers = join_answers(q.answers)
    gold_keys = [normalize_url(u) for u in q.gold_urls]
    cov = case.trajectory.observed
    notes: list[str] = []
    if cov.url_identity == "urls":
        matches = url_matches(q.gold_urls, case.collection)
    else:  # redirect links or document ids are not the pages' URLs: the evidence judge decides
        matches = [UrlMatch(gold_url=g) for g in q.gold_urls]
        notes.append(f"URL identity not checked: the log's result URLs are {cov.url_identity.replace('_', ' ')}, "
                     "not the pages' own URLs; the evidence test decides")
    partial = cov.results == "cited_only" or cov.page_text == "snippet"
    rec: dict[str, Any] = {**_case_fields(case, config, key), "url_matches": matches,
                           "coverage": None if cov == FULL_COVERAGE else cov, "coverage_notes": notes}
    steps: list[Step] = []
    audit_steps: list[Step] = []
    audited = case.audit and config.exact is not None
    audit_values: dict[str, dict[str, Any]] = {}
    tests: dict[str, TestRun] = {}

    def ran(name: str, value: bool | None, why: str = UNREADABLE) -> bool | None:
        """Record test ``name`` as run when it gave a value; an unreadable judgment (``None``) is
        a skipped test, or under the ``paper`` policy an ``unknown`` value that ran."""
        if value is None and config.unknown == "incomplete":
            tests[name] = TestRun(state="skipped", reason=why)
        else:
            tests[name] = TestRun(state="ran", reason=None if value is not None else f"{why} (unknown, C.4)")
        return value

    async def run(who: RoleModel, name: str, template: str, default: str, version: str,
                  fields: dict[str, Any], validate: Any, schema: dict[str, Any], decide: Any = None,
                  audit_fields: dict[str, Any] | None = None) -> Step:
        """Ask ``who``; the exact judge answers with ``decide()`` (value, detail) instead, and an
        audit judge of its role is asked the same (``audit_fields`` when its inputs differ)."""
        if decide is not None and is_exact(who.client):
            step = exact.exact_step(name, who.role, who.endpoint, who.model, *decide())
            auditor = config.audit.get(who.role) if audited else None
            if auditor is not None and (audit_fields is None or audit_fields):
                a = await ask(auditor, name, template, default, version, audit_fields or fields, validate,
                              config.budget, schema)
                audit_steps.append(a)
                if a.status == "ok":
                    audit_values[name] = a.value
        else:
            step = await ask(who, name, template, default, version, fields, validate, config.budget, schema)
        steps.append(step)
        if step.status == "pending":
            raise _Pending(step)
        return step

    try:
        gold_pages = await fetch_pages(config.store, q.gold_urls)
        rec["gold_pages_available"] = any(p.available for p in gold_pages)

        # 1. retrieval test
        e: bool | None
        if all(m.matched_url is not None for m in matches):
            e, rec["retrieval_basis"] = ran("retrieval", True), "url-identity"
        elif not case.collection and cov.results == "all":
            e, rec["retrieval_basis"] = ran("retrieval", False), "no-retrieved-pages"
            rec["evidence_reason"] = "No page was retrieved or opened."
        elif not case.collection:  # the log shows no result: that is not "nothing was retrieved"
            e, rec["retrieval_basis"] = None, "results-not-recorded"
            tests["retrieval"] = TestRun(state="skipped", reason=NO_RESULTS_SEEN)
        else:
            missing = [p for p, m in zip(gold_pages, matches, strict=True) if m.matched_url is None]
            e = await _evidence_test(run, config, case, missing, gold_keys, year, answers, rec, tests, ran,
                                     audit_values)
            if e is False and partial:
                rec["evidence_lower_bound"] = True
                notes.append("evidence not found among " + ("the cited pages only" if cov.results == "cited_only"
                             else "page snippets only") + ": the retrieval test is a lower bound")
        rec["evidence_retrieved"] = e

        qa: bool | None = None
        if e is True:
            tests["queries"] = TestRun(state="not_needed")
        elif cov.queries == "none" or (cov.queries == "some" and not case.queries):
            tests["queries"] = TestRun(state="skipped", reason=NO_QUERIES_SEEN)
        elif not case.queries:
            qa, rec["query_reason"] = ran("queries", False), queries.NO_QUERIES_REASON
        else:
            st = await run(config.analysis, "query_adequacy", queries.TEMPLATE, queries.PROMPT, queries.VERSION,
                           {"question": q.question, "effective_year": year, "answers": answers,
                            "gold_urls": "\n".join(q.gold_urls),
                            "prediction": case.prediction or "(no answer)",
                            "queries": "\n".join(f"{i}. {s}" for i, s in enumerate(case.queries, 1))},
                           queries.validate, queries.SCHEMA,
                           lambda: config.exact.query_adequacy(q, case.queries))
            if st.status == "ok":
                qa, rec["query_reason"] = st.value["query_adequate"], st.value["reason"] or None
            if qa is False and cov.queries == "some":  # the unseen queries may have aimed right
                tests["queries"] = TestRun(state="skipped", reason=SOME_QUERIES_SEEN)
            else:
                ran("queries", qa)
        rec["query_adequate"] = qa

        # 2. post-retrieval test: gold only, then gold plus noise (no gold page to read: not run)
        rec["gold_only_context"] = list(q.gold_urls)
        g: bool | None = None
        if rec["gold_pages_available"]:
            g, why = await _probe(run, config, case, "gold_only", probes.GOLD_ONLY_TEMPLATE, probes.GOLD_ONLY_PROMPT,
                                  gold_pages, gold_keys, year, answers, rec)
            ran("gold_only", g, why)
        else:
            rec["gold_only_grade_reason"] = GOLD_UNAVAILABLE
            tests["gold_only"] = TestRun(state="skipped", reason=NO_GOLD_PAGE)
        rec["gold_only_correct"] = g
        if g is True:
            ctx = noise_context(case.collection, q.gold_urls,
                                equivalent=e is True and rec.get("retrieval_basis") == "evidence-match")
            rec["noise_context"] = ctx
            rec["noise_was_run"] = True
            pages = await fetch_pages(config.store, ctx)
            n, why = await _probe(run, config, case, "noise", probes.NOISE_TEMPLATE, probes.NOISE_PROMPT, pages,
                                  gold_keys, year, answers, rec)
            rec["noise_correct"] = ran("noise", n, why)
        elif g is False or tests["gold_only"].state == "ran":
            tests["noise"] = TestRun(state="not_needed")
        else:
            tests["noise"] = TestRun(state="skipped", reason=NEEDS_GOLD_ONLY)

        # 4. optional stale-reference check (never changes a label)
        if config.check_stale:
            st = await run(config.diagnostic, "stale_reference", stale.TEMPLATE, stale.PROMPT, stale.VERSION,
                           {"question": q.question, "effective_year": year, "answers": answers,
                            "gold_pages": config.pages(gold_pages, gold_keys)},
                           stale.validate, stale.SCHEMA, lambda: config.exact.stale(q))
            if st.status == "ok":
                rec["stale_reference"] = not st.value["supports_reference"]
                rec["stale_reason"] = st.value["reason"] or None
            ran("stale", rec.get("stale_reference"))

        upstream = tests["retrieval"].state == "ran" and (e is True or tests["queries"].state == "ran")
        post = tests["gold_only"].state == "ran" and (g is not True or tests["noise"].state == "ran")
        rec["labels"] = list(assign_covered(e, qa, g, rec.get("noise_was_run", False), rec.get("noise_correct"),
                                            retrieval_side=upstream, post_side=post))
        rec["status"] = "done" if upstream and post else "incomplete"
    except _Pending as p:
        rec.update(status="pending", labels=[], error=f"{p.step.name}: {p.step.error}")
    rec["tests"] = tests
    rec["steps"] = steps
    rec["audit_steps"] = audit_steps
    rec["usage"] = sum((s.usage for s in [*steps, *audit_steps]), Usage())
    return TraceRecord(**rec)


GOLD_UNAVAILABLE = "No gold page is available in the page store (or by fetching); nothing to test with."


async def _evidence_test(run: Any, config: TraceConfig, case: TraceInput, missing: list[Any], gold_keys: list[str],
                         year: str, answers: str, rec: dict[str, Any], tests: dict[str, TestRun],
                         ran: Any, audit_values: dict[str, dict[str, Any]]) -> bool | None:
    """Key evidence from the gold pages not retrieved, then matched against the retrieved pages.

    ``None`` when a reply stays unreadable, none of those gold pages is available or no
    retrieved page has text (the test is then recorded as skipped). Equivalent URLs the judge
    names are kept only when they are in the retrieved collection (as written there)."""
    q = case.question
    if not any(p.available for p in missing):
        rec["retrieval_basis"], rec["evidence_reason"] = "gold-unavailable", GOLD_UNAVAILABLE
        tests["retrieval"] = TestRun(state="skipped", reason=NO_GOLD_PAGE)
        return None
    retrieved = await fetch_pages(config.store, case.collection)
    if not any(p.available for p in retrieved):
        rec["retrieval_basis"] = "retrieved-unavailable"
        rec["evidence_reason"] = "No retrieved page has text in the page store (or by fetching)."
        tests["retrieval"] = TestRun(state="skipped", reason=NO_RETRIEVED_TEXT)
        return None
    ke = await run(config.diagnostic, "key_evidence", evidence.KEY_EVIDENCE_TEMPLATE, evidence.KEY_EVIDENCE_PROMPT,
                   evidence.VERSION,
                   {"question": q.question, "effective_year": year, "answers": answers,
                    "gold_pages": config.pages(missing, gold_keys)},
                   evidence.validate_key_evidence, evidence.KEY_EVIDENCE_SCHEMA,
                   lambda: config.exact.key_evidence(q, [p.url for p in missing]))
    if ke.status == "unknown":
        rec["retrieval_basis"] = "unknown"
        return ran("retrieval", None)
    rec["key_evidence"] = ke.value["key_evidence"]
    match_fields = {"question": q.question, "effective_year": year, "answers": answers,
                    "key_evidence": ke.value["key_evidence"], "retrieved_pages": config.pages(retrieved, gold_keys)}
    audit_ke = audit_values.get("key_evidence")  # the audit judge matches the evidence it extracted itself
    em = await run(config.diagnostic, "evidence_match", evidence.MATCH_TEMPLATE, evidence.MATCH_PROMPT,
                   evidence.VERSION, match_fields, evidence.validate_match, evidence.MATCH_SCHEMA,
                   lambda: config.exact.evidence_match(q, case.collection),
                   {**match_fields, "key_evidence": audit_ke["key_evidence"]} if audit_ke else {})
    if em.status == "unknown":
        rec["retrieval_basis"] = "unknown"
        return ran("retrieval", None)
    by_key = {normalize_url(u): u for u in reversed(case.collection)}
    rec["retrieval_basis"] = "evidence-match"
    rec["retrieved_key_evidence"] = em.value["retrieved_key_evidence"] or None
    rec["equivalent_urls"] = list(dict.fromkeys(by_key[k] for k in map(normalize_url, em.value["equivalent_urls"])
                                                if k in by_key))
    rec["evidence_reason"] = em.value["reason"] or None
    return ran("retrieval", bool(em.value["evidence_match"]))


async def _probe(run: Any, config: TraceConfig, case: TraceInput, prefix: str, template: str, default: str,
                 pages: list[Any], gold_keys: list[str], year: str, answers: str,
                 rec: dict[str, Any]) -> tuple[bool | None, str]:
    """Ask the evaluated model from ``pages`` (no reference answers), then grade its answer.
    Returns the grade (``None`` when a reply stayed unreadable) and what was unreadable."""
    q = case.question
    step = await run(config.evaluated, prefix, template, default, probes.VERSION,
                     {"question": q.question, "effective_year": year, "pages": config.pages(pages, gold_keys)},
                     probes.validate, probes.SCHEMA)
    if step.status != "ok":
        return None, PROBE_UNREADABLE
    rec[f"{prefix}_answer"] = step.value["answer"]
    rec[f"{prefix}_reasoning"] = step.value["reasoning"] or None
    check = await run(config.analysis, f"{prefix}_grade", verdict.TEMPLATE, verdict.PROMPT, verdict.VERSION,
                      {"question": q.question, "effective_year": year, "answers": answers,
                       "candidate": step.value["answer"]},
                      verdict.validate, verdict.SCHEMA, lambda: config.exact.verdict(q, step.value["answer"]))
    if check.status != "ok":
        return None, UNREADABLE
    rec[f"{prefix}_grade_reason"] = check.value["reason"] or None
    return bool(check.value["correct"]), UNREADABLE


# -- a whole run ---------------------------------------------------------------------------------
@dataclass
class TraceTotals:
    """What a trace report says about the records of ``trace.jsonl``, gathered in one pass over
    the file (:meth:`read`) so that no record stays in memory."""

    cases: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    incomplete_reasons: Counter[str] = field(default_factory=Counter)
    coverage: Counter[str] = field(default_factory=Counter)
    lower_bound: int = 0
    labels: Counter[str] = field(default_factory=Counter)
    unknown_steps: int = 0
    #: the first (sorted) error of the failed cases, and of the pending and failed ones
    failed_error: str | None = None
    unfinished_error: str | None = None
    usage: Usage = field(default_factory=Usage)

    @classmethod
    def read(cls, path: Path) -> TraceTotals:
        out = cls()
        if not path.exists():
            return out
        for r in iter_jsonl(path, TraceRecord):
            out.add(r)
        return out

    def add(self, r: TraceRecord) -> None:
        self.cases += 1
        self.statuses[r.status] += 1
        if r.status == "incomplete":
            self.incomplete_reasons.update(f"{k}: {v}" for k, v in r.skipped.items())
        if r.coverage is not None:
            self.coverage[_coverage_text(r.coverage)] += 1
        self.lower_bound += int(r.evidence_lower_bound)
        if r.status == "done":
            self.labels.update(r.labels)
        self.unknown_steps += sum(s.status == "unknown" for s in r.steps)
        if r.status == "failed":
            e = r.error or ""
            self.failed_error = e if self.failed_error is None else min(self.failed_error, e)
        if r.status in ("pending", "failed") and r.error:
            self.unfinished_error = r.error if self.unfinished_error is None else min(self.unfinished_error, r.error)
        self.usage = self.usage + r.usage


@dataclass
class TraceReport:
    """What :func:`trace_run` did. ``totals`` sums up the records now in ``trace.jsonl``;
    :attr:`records` reads them back from ``path`` (the report holds none)."""

    selection: Selection
    kept: int = 0
    traced: int = 0
    http_calls: int = 0
    cache_hits: int = 0
    path: Path | None = None
    unpriced_models: list[str] = field(default_factory=list)
    totals: TraceTotals = field(default_factory=TraceTotals)

    @property
    def records(self) -> list[TraceRecord]:
        """The records of ``trace.jsonl``, read from the file (every record in memory)."""
        return load_trace(self.path.parent) if self.path is not None else []

    @property
    def usage(self) -> Usage:
        """The usage of all recorded calls of the records."""
        return self.totals.usage

    @property
    def pending(self) -> int:
        return self.totals.statuses["pending"]

    @property
    def failed(self) -> int:
        return self.totals.statuses["failed"]

    @property
    def incomplete(self) -> int:
        return self.totals.statuses["incomplete"]

    def incomplete_reasons(self) -> Counter[str]:
        """``"<test>: <reason>"`` counts over the incomplete cases (a case can count more than once)."""
        return Counter(self.totals.incomplete_reasons)

    @property
    def done(self) -> list[TraceRecord]:
        return [r for r in self.records if r.status == "done"]

    @property
    def cost_usd(self) -> float | None:
        """Dollars of all recorded calls of the records (cached ones included: what tracing costs)."""
        return self.usage.cost_usd

    @property
    def cost_per_case(self) -> float | None:
        done = self.totals.statuses["done"]
        return None if not done or self.cost_usd is None else self.cost_usd / done

    def label_counts(self) -> Counter[str]:
        return Counter(self.totals.labels)

    def describe(self) -> str:
        t = self.totals
        lines = [
            f"{t.cases} case(s) ({self.kept} kept, {self.traced} traced now; "
            f"{self.http_calls} model requests, {self.cache_hits} cache hits) -> {self.path}",
            self.selection.describe(),
            f"fully traced {t.statuses['done']}, incomplete {self.incomplete}, pending {self.pending}, "
            f"failed {self.failed}",
        ]
        if self.incomplete:
            lines.append("incomplete (a test the case needs could not run; no label from it, not counted in "
                         "the figures): " + ", ".join(f"{k} {v}" for k, v in sorted(self.incomplete_reasons().items())))
        if t.coverage:
            lines.append("what the log shows (other cases: everything): "
                         + "; ".join(f"{k}: {v} case(s)" for k, v in sorted(t.coverage.items())))
        if t.lower_bound:
            lines.append(f"{t.lower_bound} case(s) whose retrieval test is a lower bound (results seen only through "
                         "citations or snippets)")
        counts = self.label_counts()
        if counts:
            lines.append("labels of the fully traced cases (multi-label, shares need not sum to 100%): "
                         + ", ".join(f"{k} {v}" for k, v in counts.items()))
        if t.unknown_steps:
            lines.append(f"{t.unknown_steps} unknown judgment(s) (reply unreadable after re-asks; recorded as such)")
        cost = self.cost_usd
        per = self.cost_per_case
        lines.append(
            "cost: " + ("$-" if cost is None else f"${cost:.4f}")
            + ("" if per is None else f", ${per:.4f} per attributed case")
            + (f" (no price for {', '.join(self.unpriced_models)}: counted as $0)" if self.unpriced_models else "")
        )
        if self.pending:
            lines.append(f"{self.pending} case(s) pending (a call failed or the budget ran out): run again")
        if self.failed:
            lines.append(f"{self.failed} case(s) failed (e.g. {t.failed_error or ''}): run again")
        return "\n".join(lines)


def _coverage_text(cov: Any) -> str:
    return (f"queries {cov.queries}, results {cov.results}, page text {cov.page_text}, "
            f"URLs {cov.url_identity.replace('_', ' ')}")


def load_trace(run_dir: str | os.PathLike[str]) -> list[TraceRecord]:
    """The records of ``RUN_DIR/trace.jsonl`` (empty when the run is not traced yet); a later line
    for the same question wins (the file is a journal while ``trek trace`` runs)."""
    path = Path(run_dir) / runs.TRACE
    if not path.exists():
        return []
    return list({r.question_id: r for r in iter_jsonl(path, TraceRecord, torn_tail=True)}.values())


def evaluated_role_from_run(
    run_dir: str | os.PathLike[str], client: LLMClient | None = None, model: str | None = None,
    base_url: str | None = None, settings: dict[str, Any] | None = None, role: Role | None = None, **params: Any
) -> RoleModel:
    """The evaluated-model role: ``model`` / ``client`` when given, else the run's own model and
    endpoint from ``run.json`` (cached in the run's LLM cache). For the run's own model without
    explicit ``params``, the run's reasoning effort (``config.system.effort``) is sent too.

    The endpoint is ``base_url``, else the one ``run.json`` records; a run that records none (an
    imported log) without ``base_url`` is a :class:`~trek.roles.RoleError` naming ``--base-url``,
    before any call (never a silent default host). ``settings``: keywords of the client
    (:meth:`trek.runs.RunDir.client`); ``role``: the evaluated model's :class:`~trek.roles.Role` (its model,
    endpoint, parameters, prices and connections stand for ``model``, ``base_url`` and ``params``)."""
    if role is not None:
        model, base_url, params = role.model or model, role.base_url or base_url, {**role.params, **params}
    meta = runs.read_meta(run_dir)
    if meta is not None and model is None and client is None and not params:
        system = meta.config.get("system")
        effort = system.get("effort") if isinstance(system, dict) else None
        if effort:
            params = {"reasoning_effort": effort}
    name = model or (client.model if client is not None else None) or (meta.model if meta else None)
    if not name:
        raise ValueError(f"{run_dir}: run.json names no model; pass the evaluated model explicitly")
    if client is None:
        role = Role(EVALUATED, name, base_url, prices=role.prices if role else None,
                    max_connections=role.max_connections if role else None)
        if name != LOCAL_MODEL:
            role = role.require_endpoint(meta.endpoint if meta else None, where=f"{Path(run_dir) / runs.META}")
        client = runs.RunDir(run_dir).client(role, **(settings or {}))
    return RoleModel("evaluated", client, name, dict(params))


class TraceStage(Stage[TraceInput, TraceRecord]):
    """TrekTrace on :mod:`trek.stage`: one record per failed case in ``trace.jsonl``."""

    record = TraceRecord
    name = "trace"
    unit = "case"
    head_fields = ("question_id", "status", "input_key", "error", "audit_steps")

    def __init__(self, root: Path, config: TraceConfig, clients: Sequence[LLMClient]):
        self.root, self.config, self.clients = root, config, clients
        self.hits0 = sum(c.cache_hits for c in clients)

    def slot(self, case: TraceInput) -> Slot:
        return Slot(self.root / runs.TRACE, case.question_id)

    def input_key(self, case: TraceInput) -> str:
        return _input_key(case, self.config)

    def finished(self, rec: TraceRecord) -> bool:
        # an incomplete case is final while its input key (pages included) is unchanged: tracing
        # it again would skip the same tests; adding its pages (trek pages add, --fetch) re-traces it
        # a pending audit step (the audit judge's call failed) is asked again; it never changes the record
        return rec.status in ("done", "incomplete") and not any(s.status == "pending" for s in rec.audit_steps)

    async def produce(self, case: TraceInput, key: str) -> TraceRecord:
        return await trace_case(case, self.config, key)

    def failure(self, case: TraceInput, key: str, error: str) -> TraceRecord:
        return TraceRecord(**_case_fields(case, self.config, key), status="failed", error=error)

    def llm_clients(self) -> Sequence[LLMClient]:
        return self.clients

    def postfix(self) -> str:
        spent = sum(c.spent_usd for c in self.clients)
        hits = sum(c.cache_hits for c in self.clients) - self.hits0
        return f"hits={hits} ${spent:.4f}"


async def atrace_run(
    run_dir: str | os.PathLike[str],
    *,
    diagnostic: RoleModel,
    analysis: RoleModel,
    evaluated: RoleModel | None = None,
    store: PageStore | None = None,
    fetch: bool = False,
    check_stale: bool = False,
    budget_usd: float | None = None,
    outcomes: tuple[str, ...] = FAILED_OUTCOMES,
    max_concurrent_cases: int = 8,
    gold_chars: int = GOLD_CHARS,
    other_chars: int = NON_GOLD_CHARS,
    progress: bool = True,
    checkpoint_seconds: float = 1.0,
    unknown: str = "incomplete",
    query_depth: int | None = None,
    audit: dict[str, RoleModel] | None = None,
    audit_cases: int | None = None,
) -> TraceReport:
    """Trace every failed case of ``run_dir`` and write ``trace.jsonl`` (see the module docstring).

    ``evaluated`` defaults to the run's own model and endpoint; ``store`` to the run's page
    store (``pages.sqlite``, live fetching when ``fetch``). A role client without a cache uses
    the run's LLM cache (``llm-cache.sqlite`` or ``$TREK_CACHE``) for the duration of the call.
    ``budget_usd`` is a ceiling on the dollars of fresh calls of all roles together, over every
    invocation on ``run_dir`` (the spend ledger ``.trace.jsonl.spend``; see :mod:`trek.llm.ledger`).
    ``gold_chars`` / ``other_chars`` cut the pages shown to every role (defaults: the paper's
    50,000 and 3,500 characters). ``unknown``: how a judgment that stays unreadable counts,
    ``incomplete`` (the test did not run, the case is incomplete; default) or ``paper`` (an
    ``unknown`` value placed by the C.4 rules as printed). The caller owns the role clients
    (:func:`trace_run` closes them); a client this function makes for the run's own model, and a
    store it opens, are closed here.

    A judge role whose client is the exact judge (:class:`trek.exact.ExactJudge`) is answered from
    the annotations (:mod:`trek.trace.exact`); a run they cannot answer for is refused before any
    call (:class:`~trek.annotations.MissingAnnotation`). ``query_depth`` replaces the system's own
    result depth in its query test. ``audit`` (``{"diagnostic": RoleModel, "analysis": RoleModel}``,
    either or both) asks those models every step the exact judge answers for their role, with the
    same template and inputs, into each record's ``audit_steps`` (the first ``audit_cases`` cases
    only, when given); they decide nothing.
    """
    if unknown not in UNKNOWN_POLICIES:
        raise ValueError(f"unknown must be one of {', '.join(UNKNOWN_POLICIES)}, not {unknown!r}")
    rd = Path(run_dir)
    if not rd.is_dir():
        raise RecordError(rd, None, "run directory does not exist")
    own_evaluated = evaluated is None
    evaluated = evaluated or evaluated_role_from_run(rd)
    for who, want in ((diagnostic, "diagnostic"), (analysis, "analysis"), (evaluated, "evaluated")):
        if who.role != want:
            raise ValueError(f"the {want} role was given a RoleModel for {who.role!r}")
    if is_exact(evaluated.client):
        raise ValueError("the evaluated model answers the probes: the exact judge (oracle) can play the judges only")
    clients = [diagnostic.client, analysis.client, evaluated.client]
    unique = list({id(c): c for c in clients}.values())
    exact_judge = next((c for c in (diagnostic.client, analysis.client) if is_exact(c)), None)
    audit = dict(audit or {})
    if audit and exact_judge is None:
        raise ValueError("an audit judge answers beside the exact judge: make a judge role oracle")
    unique = list({id(c): c for c in [*unique, *(r.client for r in audit.values())]}.values())
    own_store = store is None
    if store is None:
        store = PageStore(default_pages_path(rd), fetch=fetch)
    calls0 = sum(c.http_calls for c in unique)
    hits0 = sum(c.cache_hits for c in unique)
    try:
        with borrowed_cache([c for c in unique if not is_exact(c)], default_cache_path(rd)):
            # the budget is the stage's spend ledger (.trace.jsonl.spend): a ceiling over all invocations
            config = TraceConfig(diagnostic, analysis, evaluated, store, check_stale, None, gold_chars,
                                 other_chars, unknown, audit=audit, audit_cases=audit_cases)
            selection = select_cases(rd, outcomes)
            for i, case in enumerate(selection.cases):
                case.audit = bool(audit) and (audit_cases is None or i < audit_cases)
            if exact_judge is not None:
                config.exact = exact.for_trace(exact_judge, store, rd, query_depth)
                config.exact.check(selection.cases, diagnostic=is_exact(diagnostic.client),
                                   analysis=is_exact(analysis.client), stale=check_stale)
            stage = TraceStage(rd, config, unique)
            tally = await execute(stage, selection.cases, outputs=[rd / runs.TRACE], limit=max_concurrent_cases,
                                  progress=progress, checkpoint_seconds=checkpoint_seconds,
                                  ledger=ledger_path(rd / runs.TRACE), budget_usd=budget_usd)
    finally:
        if own_evaluated:
            await evaluated.client.aclose()
        if own_store:
            store.close()
    return TraceReport(
        selection=selection,
        kept=tally.kept,
        traced=tally.made,
        http_calls=sum(c.http_calls for c in unique) - calls0,
        cache_hits=sum(c.cache_hits for c in unique) - hits0,
        path=rd / runs.TRACE,
        totals=TraceTotals.read(rd / runs.TRACE),
        unpriced_models=sorted({w.model for w in (diagnostic, analysis, evaluated)
                                if not is_exact(w.client) and w.client.prices.get(w.model) is None}),
    )


#: The synchronous :func:`atrace_run`; closes the three roles' clients at the end.
trace_run = synchronous(atrace_run, close=("diagnostic", "analysis", "evaluated"))
