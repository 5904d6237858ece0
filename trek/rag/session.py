"""``trek ctrl run`` as one library call: the Ctrl baselines over frozen contexts, graded, with
the accuracy grid (method x condition) at the end.

:func:`run_ctrl_grid` takes the contexts file, the folder of the runs, the roles (evaluated
model, judge, audit judge, reranker) and one :class:`CtrlSettings`; it reads the contexts and
their questions, builds the methods and the clients (through :meth:`trek.runs.RunDir.client`),
estimates the cost, asks ``proceed``, runs the grid (:func:`trek.rag.runner.run_ctrl`), grades
every run and returns a :class:`CtrlGridReport`. The command in :mod:`trek.cli.ctrl_run` only
parses its options into these.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from trek import runs as R
from trek.rag.runner import CtrlRunSummary
from trek.roles import Role, make_judge

__all__ = ["DEFAULT_METHODS", "DEFAULT_CONDITIONS", "CtrlSettings", "CtrlGridReport", "accuracy_grid",
           "run_ctrl_grid"]

DEFAULT_METHODS = ("direct", "rerank", "filter", "structured")
DEFAULT_CONDITIONS = ("OO", "MND", "SAA", "SBA", "GOLD")


@dataclasses.dataclass(frozen=True)
class CtrlSettings:
    """What the grid answers with: ``methods`` x ``conditions`` (``all_on_gold``: every method
    on GOLD, not only Direct), the ``questions`` file (default: the one beside the contexts),
    the sampling parameters sent with every call, the ``method_settings`` (method name ->
    keywords of :func:`trek.rag.make_method`, e.g. ``{"rerank": {"k": 5}}``), the ``grader`` forced on every question (``None``: each question's own), the
    clients' ``timeout``/``max_retries`` and the estimate's ``assume_output``."""

    methods: Sequence[str] = DEFAULT_METHODS
    conditions: Sequence[str] = DEFAULT_CONDITIONS
    questions: Path | None = None
    all_on_gold: bool = False
    effort: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    method_settings: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    grader: str | None = None
    timeout: float = 120.0
    max_retries: int = 6
    assume_output: int = 4096

    def params(self) -> dict[str, Any]:
        """The request parameters of every answer call (none is sent unless set)."""
        given = {"reasoning_effort": self.effort or None, "temperature": self.temperature,
                 "max_completion_tokens": self.max_tokens}
        return {k: v for k, v in given.items() if v is not None}

    def settings_of(self, method: str, scorer: Any) -> dict[str, Any]:
        """The keywords of :func:`trek.rag.make_method` for ``method`` (Rerank gets ``scorer``)."""
        return {**self.method_settings.get(method, {}), **({"scorer": scorer} if method == "rerank" else {})}


@dataclasses.dataclass
class CtrlGridReport:
    """What :func:`run_ctrl_grid` did: the answering ``summary``, the grades left pending or
    failed (``ungraded``) and the accuracy ``grid`` ((method, condition) -> (correct,
    questions); empty without a judge)."""

    summary: CtrlRunSummary
    model: str
    ungraded: int = 0
    grid: dict[tuple[str, str], tuple[int, int]] = dataclasses.field(default_factory=dict)

    def describe_grid(self) -> str:
        """The accuracy grid as text: one row per method, one column per condition, percent of
        every question of the run correct (unanswered, pending and unparsed count as not correct);
        ``-`` where the grid has no run."""
        if not self.grid:
            return ""
        methods = list(dict.fromkeys(m for m, _ in self.grid))
        conds = list(dict.fromkeys(c for _, c in self.grid))
        from trek import textable

        rows = [[m, *("-" if cell is None or not cell[1] else f"{100.0 * cell[0] / cell[1]:.1f}"
                      for cell in (self.grid.get((m, c)) for c in conds))] for m in methods]
        return (f"accuracy of {self.model} (% of questions correct), method x condition:\n"
                + textable.render(["method", *conds], rows, right=range(1, len(conds) + 1)))


def accuracy_grid(cells: Sequence[Any]) -> dict[tuple[str, str], tuple[int, int]]:
    """(method, condition) -> (correct answers, questions) of the graded runs of ``cells``
    (:class:`trek.rag.runner.Cell`)."""
    from trek.types import Grade

    out = {}
    for cell in cells:
        # counted from indexes, not loaded: the last grade of each question tagged 1 when correct
        # (same checks and errors as runs.load_questions and runs.load_grades)
        ids, _ = R.index_questions(cell.run_dir)
        grades = R.index_records(cell.run_dir, R.GRADES, Grade, ids, tag=lambda g: int(g.outcome == "correct"))
        out[(cell.method, cell.condition)] = (grades.tags.count(1), len(ids))
        del ids, grades
    return out


def _say(text: str) -> None:
    import sys

    print(text, file=sys.stderr)


def _dry_run_rows(rows: list[dict[str, Any]], echo: Callable[[str], None]) -> None:
    for r in rows:
        echo(f"{r['run']:<60} {r['questions']:>5} questions {r['to_answer']:>5} to answer {r['calls']:>6} calls")
    total = sum(r["calls"] for r in rows)
    echo(f"{len(rows)} runs, {sum(r['to_answer'] for r in rows)} answers to make, {total} model calls "
         f"(re-asks of unreadable replies not counted; cached calls send nothing)")


def _grade(runs_dirs: Sequence[Path], judge_client: Any, judge: Role, audit_client: Any, audit: Role | None,
           audit_with: Callable[..., Any] | None, say: Callable[[str], None]) -> int:
    """Grade (and audit) every run; the number of grades left pending or failed."""
    from trek.grading import run_grading

    ungraded = 0
    for rd in runs_dirs:
        rep = run_grading(rd, judge_client, progress=False, **dict(judge.params))
        say(f"{rd.name}: {rep.describe().splitlines()[0]}")
        ungraded += rep.pending_grades + rep.failed_grades
        if audit_client is not None:
            arep = audit_with(rd, audit_client, progress=False, **dict(audit.params if audit else {}))  # type: ignore[misc]
            say(f"{rd.name}: {arep.describe().splitlines()[0]}")
    return ungraded


def run_ctrl_grid(contexts: str | os.PathLike[str], runs: str | os.PathLike[str], model: Role,
                  settings: CtrlSettings, *, judge: Role | None = None, audit: Role | None = None,
                  reranker: Role | None = None, budget_usd: float | None = None,
                  prompts_dir: str | os.PathLike[str] | None = None, dry_run: bool = False, progress: bool = True,
                  proceed: Callable[[Any, Path], bool] = lambda estimate, ledger: True,
                  announce: Callable[[Mapping[str, Any]], None] = lambda roles: None,
                  say: Callable[[str], None] = _say, echo: Callable[[str], None] = print,
                  audit_with: Callable[..., Any] | None = None) -> CtrlGridReport | None:
    """Run the grid of ``settings`` on ``contexts`` with ``model`` into the folder ``runs``,
    grade every run with ``judge`` (``oracle``: the exact judge; ``None``: no grading; ``audit``:
    a model's verdicts recorded beside the exact judge's by ``audit_with``, i.e.
    :func:`trek.audit.audit_grading`) and return the report, or ``None``
    when ``proceed(estimate, ledger)`` says no. ``dry_run``: write nothing and ``echo`` the grid's
    runs and calls before ``proceed``. One ledger and one ``budget_usd`` for the model and the
    judge, over every invocation on ``runs``; ``say``: progress lines (standard error)."""
    from trek import graders, templates
    from trek.contexts import open_contexts
    from trek.llm.cache import LLMCache
    from trek.llm.ledger import spending as ledger_for
    from trek.llm.usage import PriceTable
    from trek.outputs import make_folder
    from trek.rag import make_method
    from trek.rag.context import open_ctrl_questions, questions_beside
    from trek.rag.rerank import make_scorer
    from trek.rag.runner import (
        estimate_grid,
        estimate_grid_grading,
        grid_ledger,
        grid_rows,
        plan_grid,
        run_ctrl,
    )

    rd = R.RunDir(runs)
    with templates.prompts_folder(prompts_dir), graders.using(settings.grader):
        rd.check_target("ctrl", option="--runs", grid=True)
        records = open_contexts(contexts, check_rendering=True)  # indexed: each context read by offset
        qpath = settings.questions or questions_beside(contexts)
        if qpath is None:
            raise ValueError(f"no questions.jsonl or pools.jsonl beside {contexts}: pass --questions FILE")
        qs = open_ctrl_questions(qpath)  # indexed: each question read by offset
        if not dry_run:
            make_folder(rd.path, "--runs")
        cache = LLMCache(rd.llm_cache) if not dry_run or rd.llm_cache.exists() else None  # a dry run writes nothing
        methods = list(settings.methods)
        scorer = make_scorer(reranker.model, base_url=reranker.base_url, cache=cache) \
            if reranker is not None and "rerank" in methods else None
        built = {m: make_method(m, **settings.settings_of(m, scorer)) for m in methods}
        cells = plan_grid(model.model or "", methods, list(settings.conditions), rd.path,
                          all_methods_on_gold=settings.all_on_gold)
        params = settings.params()

        def endpoint(role: Role, **kw: Any) -> Any:  # the judges share the model's connections, retries, cache, prices
            role = dataclasses.replace(role, max_connections=model.max_connections, prices=model.prices)
            return rd.client(role, cache=cache, max_retries=settings.max_retries, timeout=settings.timeout,
                             assume_output=settings.assume_output, **kw)

        client = endpoint(model, budget_usd=budget_usd)
        audit_model = audit.model if audit is not None else None
        judge_client = make_judge(judge, endpoint, contexts=contexts) if judge is not None else None
        if audit_model and (judge_client is None or not judge_client.answers_without_model):
            raise ValueError("--audit-judge records a model's verdicts beside those a judge decides without a model: "
                             "use it with --judge exact (or a cascade exact,MODEL)")
        if audit_model and audit_with is None:
            raise TypeError("run_ctrl_grid: an audit judge needs audit_with (trek.audit.audit_grading)")
        est = estimate_grid(cells, records, built, model.model or "", PriceTable.load(model.prices), questions=qs,
                            params=params, max_tokens=settings.max_tokens, assume_output=settings.assume_output)
        if judge_client is not None and judge_client.makes_calls:  # the exact judge makes no call
            est = est + estimate_grid_grading(cells, records, built, model.model or "", judge_client, questions=qs,
                                              params=params, answer_tokens=settings.max_tokens or settings.assume_output)
        if dry_run:
            _dry_run_rows(grid_rows(cells, records, built, qs, model.model or "", params), echo)
        if not proceed(est, grid_ledger(rd.path)):
            return None
        announce({"evaluated": client, "judge": judge_client,
                  "audit judge": (audit_model, judge.base_url if judge else None) if audit_model else None,
                  "rerank scorer": (reranker.model, reranker.base_url) if scorer is not None else None})
        # one ledger and one budget for the model and the judge, over every invocation on RUNS
        with ledger_for([client, judge_client], grid_ledger(rd.path)):
            summary = run_ctrl(records, qs, rd.path, client, built, list(settings.conditions), params=params,
                               all_methods_on_gold=settings.all_on_gold, progress=progress,
                               run_config={"contexts": str(contexts)})
            say(summary.describe())
            report = CtrlGridReport(summary, model.model or "")
            if judge_client is not None:
                audit_client = endpoint(audit) if audit is not None and audit_model else None
                report.ungraded = _grade(summary.runs, judge_client, judge, audit_client, audit, audit_with, say)  # type: ignore[arg-type]
                report.grid = accuracy_grid(cells)
    return report
