"""The TrekTrace pipeline: trace every failed case of a run and write ``trace.jsonl``.

For each failed case (:func:`~trek.trace.inputs.select_cases`), :func:`trace_case` plays the
declared tests of :data:`~trek.trace.schedule.SCHEDULE` in turn, then the label rule:

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
from trek.llm.client import LLMClient
from trek.llm.ledger import ledger_path
from trek.local import LOCAL_MODEL
from trek.pages import GOLD_CHARS, NON_GOLD_CHARS, Page, PageStore
from trek.roles import EVALUATED, Role
from trek.runs import default_cache_path
from trek.stage import Slot, Stage, borrowed_cache, digest, execute, synchronous
from trek.trace.common import Budget, RoleModel, render_pages
from trek.trace.ctrl import trace_store
from trek.trace.inputs import FAILED_OUTCOMES, Selection, TraceInput, select_cases
from trek.trace.labels import LabelRule
from trek.trace.parts import GOLD_UNAVAILABLE, CaseRun, Pending, get_test, reason_heading
from trek.trace.records import TraceRecord
from trek.trace.schedule import LABEL_RULE, SCHEDULE, Entry, play
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
    #: Audit judges by role (``diagnostic``, ``analysis``): asked each step a judge answers without a model,
    #: with the same template and inputs, into ``TraceRecord.audit_steps`` (they decide nothing).
    audit: dict[str, RoleModel] = field(default_factory=dict)
    #: Audit only the first this many cases of the selection (question order); ``None``: all.
    audit_cases: int | None = None
    #: The tests in the order they run (:data:`trek.trace.schedule.SCHEDULE`) and the label rule.
    schedule: tuple[Entry, ...] = SCHEDULE
    label_rule: LabelRule = LABEL_RULE

    def pages(self, pages: Sequence[Page], gold_keys: Iterable[str]) -> str:
        """``pages`` rendered for a prompt with this run's page limits."""
        return render_pages(pages, gold_keys, gold_chars=self.gold_chars, other_chars=self.other_chars)

    def models(self) -> dict[str, str]:
        return {r.role: r.describe() for r in (self.diagnostic, self.analysis, self.evaluated)}

    def role(self, name: str) -> RoleModel:
        """The role model that answers role ``name``'s questions."""
        return {"diagnostic": self.diagnostic, "analysis": self.analysis, "evaluated": self.evaluated}[name]

    def judges(self) -> list[RoleModel]:
        """The judge roles (diagnostic, analysis), each once even when one judge plays both."""
        return [self.diagnostic] + ([self.analysis] if self.analysis.client is not self.diagnostic.client else [])

    def trace_basis(self, q: Any) -> Any:
        """What the judges' answers on ``q`` depend on besides the prompts (their annotations)."""
        bases = [b for w in self.judges() if (b := w.client.trace_basis(q)) is not None]
        return bases[0] if len(bases) == 1 else (bases or None)

    def tests(self) -> list[Any]:
        """The registered tests this run plays, in schedule order."""
        return [t for t in (get_test(e.test) for e in self.schedule) if t.enabled(self)]

    def versions(self) -> dict[str, str]:
        """Every version a record of this run depends on: the pipeline's, the label rule's, each
        test's (``test.<name>``) and each question's template (overrides show in it)."""
        tests = self.tests()
        out = {"trace": TRACE_VERSION, "labels": f"{self.label_rule.name} {self.label_rule.version}",
               **{f"test.{t.name}": t.version for t in tests}}
        for t in tests:
            out.update({jq.template: jq.versioned() for jq in t.questions})
        for w in self.judges():  # a judge's own rules' versions (the exact judge's)
            out.update(w.client.trace_versions())
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
            **{k: v for w in self.judges() for k, v in w.client.trace_settings().items()},
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
        **({"annotations": basis} if (basis := config.trace_basis(q)) else {}),
    }, 16)


def _case_fields(case: TraceInput, config: TraceConfig, key: str | None = None) -> dict[str, Any]:
    """The part of a record that describes the case and the configuration it was traced with."""
    q = case.question
    return {"question_id": q.id, "dataset": q.dataset, "question": q.question, "answers": list(q.answers),
            "effective_year": year_text(q) or None, "gold_urls": list(q.gold_urls), "prediction": case.prediction,
            "original_outcome": case.grade.outcome, "queries": case.queries, "retrieved_urls": case.collection,
            "models": config.models(), "versions": config.versions(),
            "input_key": key if key is not None else _input_key(case, config),
            "trace_version": TRACE_VERSION}


#: How an unreadable judgment counts: ``incomplete`` (the test did not run; default) or ``paper``
#: (C.4 as printed: an ``unknown`` value that the rules place, Randomness as the residual).
UNKNOWN_POLICIES = ("incomplete", "paper")


async def trace_case(case: TraceInput, config: TraceConfig, key: str | None = None) -> TraceRecord:
    """Trace one failed case: each entry of ``config.schedule`` in turn, then the label rule (see
    the module docstring); never raises for a failed call. ``key``: the case's input key when the
    caller has it (computed otherwise)."""
    cov = case.trajectory.observed
    run = CaseRun(case, config, {**_case_fields(case, config, key), "coverage": None if cov == FULL_COVERAGE else cov,
                                 "coverage_notes": []})
    try:
        await run.begin()
        for entry in config.schedule:
            await play(entry, run)
        config.label_rule.apply(run.rec, run.tests)
    except Pending as p:
        run.rec.update(status="pending", labels=[], error=f"{p.step.name}: {p.step.error}")
    return TraceRecord(**run.rec, tests=run.tests, steps=run.steps, audit_steps=run.audit_steps,
                       usage=sum((s.usage for s in [*run.steps, *run.audit_steps]), Usage()))


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
    #: steps a judge could not decide (the exact judge abstains rather than guess)
    undecided_steps: int = 0
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
            self.incomplete_reasons.update(f"{k}: {reason_heading(v)}" for k, v in r.skipped.items())
        if r.coverage is not None:
            self.coverage[_coverage_text(r.coverage)] += 1
        self.lower_bound += int(r.evidence_lower_bound)
        if r.status == "done":
            self.labels.update(r.labels)
        self.unknown_steps += sum(s.status == "unknown" for s in r.steps)
        self.undecided_steps += sum(s.status == "undecided" for s in r.steps)
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
    #: Records found made under other versions (a label rule, a test, a prompt), traced again:
    #: their count and ``{key: "old -> new"}`` of what changed.
    outdated: int = 0
    version_changes: dict[str, str] = field(default_factory=dict)
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
        if t.undecided_steps:
            lines.append(f"{t.undecided_steps} judge verdict(s) undecided (the judge could not support one; the test "
                         "that asked it did not run and gives no label; a cascade --judge exact,MODEL answers them)")
        if t.coverage:
            lines.append("what the log shows (other cases: everything): "
                         + "; ".join(f"{k}: {v} case(s)" for k, v in sorted(t.coverage.items())))
        if t.lower_bound:
            lines.append(f"{t.lower_bound} case(s) whose retrieval test is a lower bound (results seen only through "
                         "citations or snippets)")
        counts = self.label_counts()
        if counts:
            lines.append("labels of the fully traced cases (multi-label, shares need not sum to 100%): "
                         + ", ".join(f"{k} {counts[k]}" for k in _in_label_order(counts)))
        if t.unknown_steps:
            lines.append(f"{t.unknown_steps} unknown judgment(s) (reply unreadable after re-asks; recorded as such)")
        cost = self.cost_usd
        per = self.cost_per_case
        lines.append(
            "cost: " + ("$-" if cost is None else f"${cost:.4f}")
            + ("" if per is None else f", ${per:.4f} per attributed case")
            + (f" (no price for {', '.join(self.unpriced_models)}: counted as $0)" if self.unpriced_models else "")
        )
        if self.outdated:
            lines.append(f"{self.outdated} record(s) made under other versions traced again ("
                         + "; ".join(f"{k} {v}" for k, v in sorted(self.version_changes.items())) + ")")
        if self.pending:
            lines.append(f"{self.pending} case(s) pending (a call failed or the budget ran out): run again")
        if self.failed:
            lines.append(f"{self.failed} case(s) failed (e.g. {t.failed_error or ''}): run again")
        return "\n".join(lines)


def _in_label_order(counts: Counter[str]) -> list[str]:
    """The labels of ``counts`` in C.4's order (Pre-retrieval ... Randomness), any other after them."""
    from trek.trace.labels import in_c4_order

    return in_c4_order(counts)


def _coverage_text(cov: Any) -> str:
    return (f"queries {cov.queries}, results {cov.results}, page text {cov.page_text}, "
            f"URLs {cov.url_identity.replace('_', ' ')}")


def version_changes(path: Path, versions: dict[str, str]) -> tuple[int, dict[str, str]]:
    """How many records of ``path`` were made under versions other than ``versions`` (their input
    keys differ, so the stage traces them again), and what changed, ``{key: "old -> new"}``."""
    count, changes = 0, {}
    if not path.exists():
        return 0, {}
    for r in iter_jsonl(path, TraceRecord, torn_tail=True):
        diff = {k: f"{r.versions.get(k, '(none)')} -> {versions.get(k, '(none)')}"
                for k in {*r.versions, *versions} if r.versions.get(k) != versions.get(k)}
        if diff and r.versions:
            count += 1
            changes.update(diff)
    return count, changes


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
    if not name and meta is None:
        raise ValueError(f"{run_dir}: no {runs.META} there, so the evaluated model is not known: is it a run folder? "
                         "(trek wild run and trek import write one; or name the model with --model)")
    if not name:
        raise ValueError(f"{Path(run_dir) / runs.META} names no model; name the evaluated model with --model")
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


def _check_roles(diagnostic: RoleModel, analysis: RoleModel, evaluated: RoleModel,
                 audit: dict[str, RoleModel]) -> list[LLMClient]:
    """The distinct clients of the roles (audit judges included); a role given the wrong model, a
    judge that makes no call as the evaluated model, or an audit judge with nothing to audit, is
    refused."""
    for who, want in ((diagnostic, "diagnostic"), (analysis, "analysis"), (evaluated, "evaluated")):
        if who.role != want:
            raise ValueError(f"the {want} role was given a RoleModel for {who.role!r}")
    if not evaluated.client.makes_calls:
        raise ValueError("the evaluated model answers the probes: a judge that makes no model call (the exact "
                         "judge) can play the judges only")
    if audit and not any(w.client.answers_without_model for w in (diagnostic, analysis)):
        raise ValueError("an audit judge answers beside a judge that decides without a model: make a judge role "
                         "exact (or a cascade exact,MODEL)")
    clients = [diagnostic.client, analysis.client, evaluated.client, *(r.client for r in audit.values())]
    return list({id(c): c for c in clients}.values())


def begin_judges(rd: Path, config: TraceConfig, cases: Sequence[Any]) -> None:
    """Let each judge prepare for ``cases`` (:meth:`trek.judges.Judge.begin_trace`): a judge that
    decides from annotations binds the run's and refuses, before any call, what they cannot answer."""
    for w in config.judges():
        roles = [r.role for r in (config.diagnostic, config.analysis) if r.client is w.client]
        w.client.begin_trace(rd, config.store, cases, roles, check_stale=config.check_stale)


def _select(rd: Path, config: TraceConfig, outcomes: tuple[str, ...]) -> Selection:
    """The cases to trace (marked for the audit judges), the judges prepared for them."""
    selection = select_cases(rd, outcomes)
    selection.audit = lambda i: bool(config.audit) and (config.audit_cases is None or i < config.audit_cases)
    begin_judges(rd, config, selection.cases)
    return selection


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
    audit: dict[str, RoleModel] | None = None,
    audit_cases: int | None = None,
    schedule: tuple[Entry, ...] = SCHEDULE,
    label_rule: LabelRule = LABEL_RULE,
) -> TraceReport:
    """Trace every failed case of ``run_dir`` and write ``trace.jsonl`` (see the module docstring).

    ``evaluated`` defaults to the run's own model and endpoint; ``store`` to the run's page store
    (``pages.sqlite``, live fetching when ``fetch``). A role client without a cache uses the run's
    LLM cache for the call. ``budget_usd``: a ceiling on the dollars of fresh calls of all roles,
    over every invocation on ``run_dir`` (the spend ledger, :mod:`trek.llm.ledger`). ``gold_chars``
    / ``other_chars`` cut the pages shown (the paper's 50,000 and 3,500). ``unknown``: an unreadable
    judgment is a test that did not run (``incomplete``) or C.4's ``unknown`` value (``paper``).
    The caller owns the role clients; a client made here for the run's model, and a store opened
    here, are closed here. Each judge answers through the judge protocol (:mod:`trek.judges`; the
    exact judge from the annotations, refused before any call when they cannot answer); ``audit``
    (judges by role) are asked each step a judge answered without a model (first ``audit_cases``
    cases), deciding nothing. ``schedule`` /
    ``label_rule``: the tests and the rule (default C.4, :mod:`trek.trace.schedule`; add a
    registered probe with :func:`~trek.trace.schedule.with_entry`).
    """
    if unknown not in UNKNOWN_POLICIES:
        raise ValueError(f"unknown must be one of {', '.join(UNKNOWN_POLICIES)}, not {unknown!r}")
    rd = Path(run_dir)
    if not rd.is_dir():
        raise RecordError(rd, None, "run directory does not exist")
    own_evaluated = evaluated is None
    evaluated = evaluated or evaluated_role_from_run(rd)
    audit = dict(audit or {})
    unique = _check_roles(diagnostic, analysis, evaluated, audit)
    own_store = store is None
    if store is None:
        store = trace_store(rd, fetch=fetch)
    calls0 = sum(c.http_calls for c in unique)
    hits0 = sum(c.cache_hits for c in unique)
    try:
        with borrowed_cache(unique, default_cache_path(rd)):
            # the budget is the stage's spend ledger (.trace.jsonl.spend): a ceiling over all invocations
            config = TraceConfig(diagnostic, analysis, evaluated, store, check_stale, None, gold_chars,
                                 other_chars, unknown, audit=audit, audit_cases=audit_cases, schedule=schedule,
                                 label_rule=label_rule)
            selection = _select(rd, config, outcomes)
            outdated, changes = version_changes(rd / runs.TRACE, config.versions())
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
        selection=selection, outdated=outdated, version_changes=changes, kept=tally.kept, traced=tally.made,
        http_calls=sum(c.http_calls for c in unique) - calls0, cache_hits=sum(c.cache_hits for c in unique) - hits0,
        path=rd / runs.TRACE, totals=TraceTotals.read(rd / runs.TRACE),
        unpriced_models=sorted({w.model for w in (diagnostic, analysis, evaluated)
                                if w.client.makes_calls and w.client.prices.get(w.model) is None}),
    )


#: The synchronous :func:`atrace_run`; closes the three roles' clients at the end.
trace_run = synchronous(atrace_run, close=("diagnostic", "analysis", "evaluated"))
