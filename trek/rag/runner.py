"""Run the Ctrl baselines over frozen contexts: one standard run directory per (model, method, condition).

    RUNS/<model>__<method>__<condition>/run.json         RunMeta (kind "ctrl"): model, endpoint,
                                                          method settings, condition, prompt versions
    RUNS/<model>__<method>__<condition>/questions.jsonl  the questions that have this condition
    RUNS/<model>__<method>__<condition>/answers.jsonl    one Trajectory per question; its ``details``
                                                          hold the method's intermediate outputs
    RUNS/llm-cache.sqlite                                 one response cache for the grid ($TREK_CACHE)

So ``trek grade``, :func:`trek.runs.frame` and the notebooks read these runs like any other. The
whole grid is one :mod:`trek.stage` run (:class:`CtrlStage`): an answer is kept while its context
text (``sha256``), question, model, method settings and parameters are unchanged; pending and
failed ones are retried. A run directory made with other settings is refused rather than mixed.
Gold-only is Direct on ``GOLD``; the other methods are not run on ``GOLD`` unless asked.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trek import runs as R
from trek.contexts import Context as CtxRecord
from trek.contexts import ContextFile, ContextsOf
from trek.llm.client import LLMClient
from trek.llm.estimate import Estimate
from trek.llm.usage import PriceTable
from trek.rag import METHODS, Method
from trek.rag.answer import MethodOutput
from trek.stage import Reread, Slot, Stage, StagePlan, digest, execute, run_lock, synchronous
from trek.stage import plan as stage_plan
from trek.types import Question, RunMeta, Trajectory

__all__ = ["Cell", "CtrlStage", "CtrlRunSummary", "run_label", "plan_grid", "grid_rows", "grid_ledger", "estimate_grid",
           "estimate_grid_grading", "arun_ctrl", "run_ctrl", "KIND"]

KIND = "ctrl"
GOLD = "GOLD"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-") or "x"


def run_label(model: str, method: str, condition: str) -> str:
    """The run directory name: ``<model>__<method>__<condition>`` with unsafe characters as ``-``
    (``OO:gold=1/3`` -> ``OO-gold-1-3``); ``run.json`` keeps the exact names."""
    return f"{_slug(model)}__{method}__{_slug(condition)}"


@dataclass(frozen=True)
class Cell:
    """One run directory of the grid."""

    method: str
    condition: str
    run_dir: Path
    order: int


def plan_grid(model: str, methods: Sequence[str], conditions: Sequence[str], runs_root: str | os.PathLike[str],
              *, all_methods_on_gold: bool = False) -> list[Cell]:
    """The (method, condition) cells in condition-major order; on ``GOLD`` only Direct (gold-only)
    unless ``all_methods_on_gold``."""
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown method(s) {unknown}; choose from {', '.join(METHODS)}")
    cells = []
    for cond in conditions:
        for m in methods:
            if cond == GOLD and m != "direct" and not all_methods_on_gold:
                continue
            cells.append(Cell(m, cond, Path(runs_root) / run_label(model, m, cond), len(cells)))
    if not cells:
        raise ValueError("the grid is empty: give at least one method and one condition")
    return cells


def _contexts_by_condition(contexts: Iterable[CtxRecord]) -> dict[str, Any]:
    """The contexts of each condition (file order): a list each, or for a :class:`ContextFile`
    a re-readable view of its contexts read by offset (:meth:`ContextFile.of`)."""
    if isinstance(contexts, ContextFile):
        return {cond: contexts.of(cond) for cond in contexts.conditions}
    out: dict[str, list[CtxRecord]] = {}
    for c in contexts:
        out.setdefault(c.condition, []).append(c)
    return out


def _question_ids(ctxs: Any) -> list[str]:
    """The question ids of one condition's contexts (from the index when it is a view)."""
    return ctxs.question_ids() if isinstance(ctxs, ContextsOf) else [c.question_id for c in ctxs]


class CtrlStage(Stage[tuple[Cell, Question, CtxRecord], Trajectory]):
    """Ctrl baselines on :mod:`trek.stage`: one trajectory per (cell, question), written to the
    cell's ``answers.jsonl``; the grid's run directories are written together."""

    record = Trajectory
    name = "ctrl"
    unit = "q"
    head_fields = ("question_id", "status", "input_key", "error")

    def __init__(self, model: str, methods: Mapping[str, Method], params: dict[str, Any],
                 client: LLMClient | None = None, tally: R.Tally | None = None):
        self.model, self.methods, self.params, self.client, self.tally = model, methods, params, client, tally

    def slot(self, job: tuple[Cell, Question, CtxRecord]) -> Slot:
        # the plan keeps every slot's id: one interned string per question, not one per (cell, question)
        return Slot(job[0].run_dir / R.ANSWERS, sys.intern(job[1].id))

    def input_key(self, job: tuple[Cell, Question, CtxRecord]) -> str:
        cell, q, ctx = job
        m = self.methods[cell.method]
        return digest({"context": ctx.sha256, "question": [q.id, q.question, q.effective_year, q.effective_year_raw],
                       "model": self.model, "method": cell.method, "settings": m.config(),
                       "versions": m.versions(), "params": self.params})

    def _trajectory(self, job: tuple[Cell, Question, CtxRecord], key: str, out: MethodOutput, status: str,
                    error: str | None) -> Trajectory:
        cell, q, ctx = job
        method = self.methods[cell.method]
        return Trajectory(
            question_id=q.id, model=self.model, system={"method": cell.method, "condition": cell.condition},
            final_answer=out.final_answer if status == "ok" else None, status=status,  # type: ignore[arg-type]
            error=error, usage=out.usage, messages=out.replies,
            prompt_version=" ".join(f"{k}={v}" for k, v in sorted(method.versions().items())),
            details={**out.details, "context_sha256": ctx.sha256}, input_key=key,
        )

    async def produce(self, job: tuple[Cell, Question, CtxRecord], key: str) -> Trajectory:
        cell, q, ctx = job
        out = await self.methods[cell.method].arun(q, ctx, self.client, self.params)
        return self._trajectory(job, key, out, out.status, out.error)

    def failure(self, job: tuple[Cell, Question, CtxRecord], key: str, error: str) -> Trajectory:
        return self._trajectory(job, key, MethodOutput(), "failed", error)

    def postfix(self) -> str:
        return self.tally.dollars() if self.tally is not None else ""

    def llm_clients(self) -> list[LLMClient | None]:
        return [self.client]


def _jobs(cells: Sequence[Cell], by_cond: Mapping[str, Any],
          questions: Mapping[str, Question]) -> Reread[tuple[Cell, Question, CtxRecord]]:
    """Every (cell, question, context) of the grid, in cell then context order: a re-readable
    source (each pass reads the contexts again when they come from a :class:`ContextFile`)."""
    def jobs() -> Iterator[tuple[Cell, Question, CtxRecord]]:
        for cell in cells:
            for c in by_cond.get(cell.condition, []):
                yield cell, questions[c.question_id], c

    return Reread(jobs, sum(len(by_cond.get(cell.condition, [])) for cell in cells))


def _grid_plan(cells: Sequence[Cell], by_cond: Mapping[str, list[CtxRecord]], methods: Mapping[str, Method],
               questions: Mapping[str, Question], model: str, params: dict[str, Any]) -> StagePlan:
    return stage_plan(CtrlStage(model, methods, params), _jobs(cells, by_cond, questions))


def _todo(p: StagePlan) -> Iterator[tuple[Cell, Question, CtxRecord]]:
    """The jobs of plan ``p`` still to run, read again one at a time (``p.todo`` would hold them
    all, every context with its text)."""
    return (job for job, _, _ in p.iter_jobs())


def grid_rows(cells: Sequence[Cell], contexts: Sequence[CtxRecord], methods: Mapping[str, Method],
              questions: Mapping[str, Question], model: str, params: dict[str, Any] | None = None,
              ) -> list[dict[str, Any]]:
    """What a run of the grid would do (the same finished-answer rule as the run): per cell the
    questions, those still to answer and the model calls that makes (re-asks of unreadable
    replies not counted; cached calls send nothing)."""
    by_cond = _contexts_by_condition(contexts)
    left: dict[Path, int] = {}
    for cell, _, _ in _todo(_grid_plan(cells, by_cond, methods, questions, model, dict(params or {}))):
        left[cell.run_dir] = left.get(cell.run_dir, 0) + 1
    rows = []
    for cell in cells:
        n = len(by_cond.get(cell.condition, []))
        m = methods[cell.method]
        t = left.get(cell.run_dir, 0)
        rows.append({"run": cell.run_dir.name, "method": cell.method, "condition": cell.condition, "questions": n,
                     "to_answer": t, "calls": t * m.calls})
    return rows


def grid_ledger(runs_root: str | os.PathLike[str]) -> Path:
    """The spend ledger of a grid (every run directory under ``runs_root``, and the judge that
    ``trek ctrl run --judge`` grades them with): ``RUNS/.ctrl.spend``."""
    return Path(runs_root) / ".ctrl.spend"


#: Tokens of a baseline prompt around the documents (instructions, question), for estimates.
PROMPT_TOKENS = 200


def estimate_grid(
    cells: Sequence[Cell], contexts: Sequence[CtxRecord], methods: Mapping[str, Method], model: str,
    prices: PriceTable, *, questions: Mapping[str, Question], params: dict[str, Any] | None = None,
    max_tokens: int | None = None, assume_output: int = 4096,
) -> Estimate:
    """The ``--dry-run`` estimate of a grid: calls, input tokens (o200k_base of each rendered
    context plus the prompt around it; low = one read of the context per answer, Rerank reading
    its top 10 only; high = one read per call), output tokens (low 1 per call, high ``max_tokens``
    or ``assume_output``) and dollars from the price table. Finished answers cost nothing."""
    from trek.tokens import count_tokens

    by_cond = _contexts_by_condition(contexts)
    p = _grid_plan(cells, by_cond, methods, questions, model, dict(params or {}))
    items, cached = len(p.slots), len(p.kept)
    calls = in_lo = in_hi = 0
    for cell, _, c in _todo(p):  # read again one at a time; a context recurring across the cells of
        m = methods[cell.method]  # its condition is counted once (count_tokens remembers the count)
        t = count_tokens(c.rendered) + PROMPT_TOKENS
        calls += m.calls
        k = getattr(m, "k", None)  # Rerank reads only its top k documents
        in_lo += round(t * min(1.0, k / max(1, len(c.documents)))) if k else t
        in_hi += t * m.calls
    out = (calls, (max_tokens or assume_output) * calls)  # a reply has at least one token
    price = prices.get(model)
    usd = ((in_lo * price.input + out[0] * price.output) / 1e6, (in_hi * price.input + out[1] * price.output) / 1e6) \
        if price else (float("nan"), float("nan"))
    notes = ["re-asks of unreadable replies are not counted", "o200k_base token counts"]
    if price is None:
        notes.append(f"model {model!r} has no price in the price table (--prices)")
    return Estimate(label="trek ctrl run", model=model, items=items, cached_items=cached, calls=(calls, calls),
                    input_tokens=(in_lo, in_hi), output_tokens=out, token_usd=usd, notes=notes)


#: The stand-in answer a dry run grades for an answer the grid has yet to make.
PLACEHOLDER_ANSWER = "(the answer the run will make)"


def estimate_grid_grading(
    cells: Sequence[Cell], contexts: Sequence[CtxRecord], methods: Mapping[str, Method], model: str,
    judge: LLMClient, *, questions: Mapping[str, Question], params: dict[str, Any] | None = None,
    answer_tokens: int = 4096, **settings: Any,
) -> Estimate:
    """The ``--dry-run`` estimate of grading the grid afterwards (``trek ctrl run --judge``), by
    grading's own rule: the first judge request of every answer already in a cell whose grade
    would not be kept (:func:`trek.grading.iter_judge_requests`), plus one judge call per answer the
    grid has yet to make, its prompt built with a stand-in answer and allowed ``answer_tokens``
    more input tokens (the answer's output cap). Cached judge calls cost nothing."""
    from trek.aio import run_sync
    from trek.graders import agrade_many
    from trek.grading import JUDGE_REQUEST_CHUNK, iter_judge_requests
    from trek.llm.estimate import Assumption, RecordingClient, estimate_requests

    def made() -> Iterator[tuple[str, dict[str, Any], int]]:  # made a chunk of answers at a time, not kept
        for cell in cells:
            if (cell.run_dir / R.ANSWERS).exists() and (cell.run_dir / R.QUESTIONS).exists():
                yield from iter_judge_requests(cell.run_dir, judge, **settings)

    def to_make() -> Iterator[tuple[str, dict[str, Any], int]]:  # the same for the answers to make
        plan = _grid_plan(cells, _contexts_by_condition(contexts), methods, questions, model, dict(params or {}))
        recorders: list[RecordingClient] = []
        # the judge with its model parts recording (a cascade's first judge still decides alone)
        rec = judge.with_recorder(lambda c: recorders.append(RecordingClient(c)) or recorders[-1])
        todo = _todo(plan)
        while part := [(q, PLACEHOLDER_ANSWER) for _, q, _ in itertools.islice(todo, JUDGE_REQUEST_CHUNK)]:
            run_sync(agrade_many(part, rec, progress=False, **settings))
            del part
            for r in recorders:
                recorded, r.recorded = r.recorded, []
                yield from recorded
                del recorded

    once = "one judge call per answer (the re-asks of an unreadable verdict, rare, are not counted)"
    return (estimate_requests(made(), judge, label="judge: answers in the runs", assumption=Assumption(once))
            + estimate_requests(to_make(), judge, label="judge: answers to make", assumption=Assumption(
                f"{once}; each prompt holds an answer of up to {answer_tokens:,} tokens",
                extra_input=(0, answer_tokens))))


@dataclass
class CtrlRunSummary(R.Tally):
    """What a grid run did."""

    runs: list[Path] = field(default_factory=list)
    scorer_calls: int = 0

    def describe(self) -> str:
        return (
            f"{len(self.runs)} runs: {self.ok}/{self.total} answers ok, {self.pending} pending, {self.failed} failed "
            f"({self.skipped} already done before this run)\n"
            f"{self.model_line()}; relevance scorer: {self.scorer_calls} requests"
        )


def _meta(cell: Cell, client: LLMClient, method: Method, params: dict[str, Any], n: int, previous: RunMeta | None,
          extra: dict[str, Any]) -> RunMeta:
    config = {"method": cell.method, "condition": cell.condition, "settings": method.config(),
              "params": params, "questions": n, "order": cell.order, **extra}
    return R.new_meta(cell.run_dir, KIND, client, previous, prompt_versions=method.versions(), config=config)


def _check_previous(cell: Cell, previous: RunMeta | None, client: LLMClient, method: Method,
                    params: dict[str, Any]) -> None:
    if previous is None:
        return
    old = previous.config
    same = (previous.kind == KIND and previous.model == client.model and old.get("method") == cell.method
            and old.get("condition") == cell.condition and old.get("settings") == method.config()
            and old.get("params") == params)
    if not same:
        raise ValueError(
            f"{cell.run_dir} holds a run with other settings (model {previous.model!r}, "
            f"{old.get('method')} {old.get('settings')}, params {old.get('params')}); this run is model "
            f"{client.model!r}, {method.config()}, params {params}. Use a new --runs folder."
        )


async def arun_ctrl(
    contexts: Iterable[CtxRecord],
    questions: Mapping[str, Question],
    runs_root: str | os.PathLike[str],
    client: LLMClient,
    methods: Mapping[str, Method],
    conditions: Sequence[str],
    *,
    params: dict[str, Any] | None = None,
    all_methods_on_gold: bool = False,
    progress: bool = True,
    run_config: dict[str, Any] | None = None,
    checkpoint_seconds: float = 1.0,
) -> CtrlRunSummary:
    """Run ``methods`` (name -> configured method) on each of ``conditions`` of ``contexts`` with
    ``client``'s model, writing one run directory per (method, condition) under ``runs_root``.

    ``params`` are sampling parameters sent with every call (e.g. ``{"reasoning_effort":
    "high"}``; recorded); ``all_methods_on_gold`` runs every method on ``GOLD`` (default: Direct
    only, the gold-only reference); ``run_config`` adds entries to each ``run.json``'s
    ``config``. Resumable (see the module docstring). The caller owns the client
    (:func:`run_ctrl` closes it).
    """
    params = dict(params or {})
    model = client.model or ""
    by_cond = _contexts_by_condition(contexts)
    missing_c = [c for c in conditions if c not in by_cond]
    if missing_c:
        raise ValueError(f"no context for condition(s) {missing_c}; the file has {sorted(by_cond)}")
    missing_q = sorted({q for cond in conditions for q in _question_ids(by_cond[cond]) if q not in questions})
    if missing_q:
        raise ValueError(f"no question record for {len(missing_q)} context(s), e.g. {missing_q[:3]}")
    cells = plan_grid(model, list(methods), conditions, runs_root, all_methods_on_gold=all_methods_on_gold)
    extra = dict(run_config or {})
    summary = CtrlRunSummary(runs=[c.run_dir for c in cells])
    stage = CtrlStage(model, methods, params, client, summary)
    jobs = _jobs(cells, by_cond, questions)
    with contextlib.ExitStack() as locks:
        for d in [Path(runs_root), *(c.run_dir for c in cells)]:
            locks.enter_context(run_lock(d))
        for cell in cells:
            ctxs = by_cond[cell.condition]
            method = methods[cell.method]
            previous = R.read_meta(cell.run_dir)
            _check_previous(cell, previous, client, method, params)
            R.write_records(cell.run_dir, R.QUESTIONS, (questions[q] for q in _question_ids(ctxs)))
            R.write_meta(cell.run_dir, _meta(cell, client, method, params, len(ctxs), previous, extra))
        summary.watch(client)
        scorers = {id(m.scorer): m.scorer for m in methods.values() if getattr(m, "scorer", None) is not None}
        scorer0 = sum(getattr(s, "calls", 0) for s in scorers.values())
        try:
            tally = await execute(stage, jobs, outputs=[c.run_dir / R.ANSWERS for c in cells],
                                  limit=client.max_connections, progress=progress,
                                  checkpoint_seconds=checkpoint_seconds, ledger=grid_ledger(runs_root))
        finally:
            summary.settle()
            summary.scorer_calls = sum(getattr(s, "calls", 0) for s in scorers.values()) - scorer0
    summary.total = len(jobs)
    summary.skipped = tally.kept
    summary.ok = tally.counts["ok"]
    summary.failed = tally.counts["failed"]
    summary.pending = summary.total - summary.ok - summary.failed
    by_dir = {c.run_dir / R.ANSWERS: c.run_dir.name for c in cells}
    for path in tally.paths:
        for t in tally.iter(path):  # read back one at a time (the tally keeps no records)
            if t.status != "ok" and t.error:
                summary.errors.append(f"{t.status} {by_dir[path]} {t.question_id}: {t.error}")
    return summary


#: The synchronous :func:`arun_ctrl`; closes the client at the end.
run_ctrl = synchronous(arun_ctrl, close=("client",))
