"""Grade a whole run directory, resumably: the grading stage of :mod:`trek.stage`.

:func:`run_grading` grades every answered question of a run (``questions.jsonl``,
``answers.jsonl``) with its dataset's grader (:mod:`trek.graders`) into ``grades.jsonl``, in
question order. A grade is kept without a judge call only while everything that decided it is
unchanged (:func:`grade_input_key`: response, references, false-premise flag, effective year,
grader version, judge model and settings, the full prompt), so correcting one reference answer
re-grades that question alone. Pending and failed grades are retried; unparsed ones are kept
(asking again would replay the same reply); pending answers get no grade. Judge calls go
through the run's LLM cache (``llm-cache.sqlite`` or ``$TREK_CACHE``).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
from array import array
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trek import runs, templates
from trek.aio import run_sync
from trek.graders import _forced, agrade, agrade_many, grader_for, grader_version
from trek.graders.common import FRESH_SAMPLE, JudgeConfig, is_empty_response, make_grade
from trek.llm.client import LLMClient
from trek.llm.ledger import ledger_path, spending
from trek.roles import make_judge
from trek.runs import default_cache_path
from trek.stage import Reread, Slot, Stage, borrowed_cache, digest, execute, synchronous
from trek.stage import plan as stage_plan
from trek.types import Grade, Question, RecordError, Trajectory, iter_jsonl

__all__ = [
    "GradingReport",
    "GradeStage",
    "grade_input_key",
    "arun_grading",
    "run_grading",
    "grade_run",
    "estimate_grading",
    "iter_judge_requests",
    "run_grading_batch",
]

log = logging.getLogger(__name__)

@dataclass
class GradingReport:
    """What :func:`run_grading` did.

    ``kept`` grades came from the previous file, ``graded`` were made in this run; ``outcomes``
    counts the grades now in ``grades.jsonl`` by outcome. ``pending_answers`` are question ids
    whose trajectory is pending (not graded); ``unanswered`` are question ids without a
    trajectory at all. :attr:`grades` reads the grades back from ``path`` (questions order);
    the report itself holds no grade, so grading a large run stays in bounded memory.
    """

    kept: int
    graded: int
    pending_answers: list[str] = field(default_factory=list)
    unanswered: list[str] = field(default_factory=list)
    path: Path | None = None
    http_calls: int = 0
    cache_hits: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    #: per outcome, the first (sorted) error text of its grades ("" when one has none)
    first_errors: dict[str, str] = field(default_factory=dict)

    pending_grades = property(lambda self: self.outcomes["pending"])
    unparsed_grades = property(lambda self: self.outcomes["unparsed"])
    undecided_grades = property(lambda self: self.outcomes["undecided"])
    failed_grades = property(lambda self: self.outcomes["failed"])

    @property
    def grades(self) -> list[Grade]:
        """The grades now in ``grades.jsonl``, read from the file (every grade in memory)."""
        if self.path is None or not self.path.exists():
            return []
        return list(iter_jsonl(self.path, Grade))

    def describe(self) -> str:
        parts = [
            f"{sum(self.outcomes.values())} grades ({self.kept} kept, {self.graded} graded now; "
            f"{self.http_calls} judge requests, {self.cache_hits} cache hits) -> {self.path}"
        ]
        if self.unparsed_grades:
            again = (f"; they are kept on a re-run: grade them again with trek grade {self.path.parent} "
                     "--regrade unparsed (after changing the judge, its parameters or the prompt folder)"
                     if self.path is not None else "")
            parts.append(f"{self.unparsed_grades} unparsed (judge reply unreadable; shown as their own column{again})")
        if self.undecided_grades:
            parts.append(f"{self.undecided_grades} undecided (the judge could not support a verdict and says so; "
                         "neither correct nor incorrect, shown as their own column; a cascade --judge exact,MODEL "
                         "hands them to a model judge)")
        if self.pending_grades:
            error = self.first_errors.get("pending", "")
            why = f", e.g. {error!r}" if error else ""
            parts.append(f"{self.pending_grades} pending (judge call failed or not sent{why}): run again to retry them")
        if self.failed_grades:
            parts.append(f"{self.failed_grades} failed (internal error, e.g. {self.first_errors.get('failed', '')!r}): "
                         "run again to retry them")
        if self.pending_answers:
            parts.append(f"{len(self.pending_answers)} pending answer(s) in {runs.ANSWERS}: not graded")
        if self.unanswered:
            parts.append(f"{len(self.unanswered)} question(s) without an answer in {runs.ANSWERS}: not graded")
        return "\n".join(parts)


def grade_input_key(question: Question, response: str | None, config: JudgeConfig, judge: Any = None) -> str:
    """A digest of everything that decides a grade: the response, the references, the
    false-premise flag, the effective year, the dataset and grader version, the judge model and
    settings, and the full judge prompt (with any template override). For the exact judge
    (``judge`` an :class:`~trek.exact.ExactJudge`): the exact grader's version and rule and the
    question's annotations instead of a prompt (:meth:`~trek.llm.client.LLMClient.grade_basis`)."""
    basis = judge.grade_basis(question) if judge is not None else None
    if basis is not None:
        return digest({
            "response": response, "answers": question.answers, "false_premise": question.false_premise,
            "dataset": question.dataset, "grader": question.grader, "forced": graders_forced(), **basis,
        })
    module = grader_for(question)
    prompt = None if is_empty_response(response) else module.judge_prompt(question, response)
    return digest({
        "response": response,
        "answers": question.answers,
        "false_premise": question.false_premise,
        "effective_year": question.effective_year,
        "effective_year_raw": question.effective_year_raw,
        "dataset": question.dataset,
        "grader_version": grader_version(question),
        "judge_model": config.model,
        "judge_settings": config.recorded(),
        "prompt": prompt,
    })


#: What ``trek grade --regrade`` grades again besides pending and failed grades (``None``: nothing).
REGRADE = (None, "unparsed", "all")


class GradeStage(Stage[tuple[Question, Trajectory], Grade]):
    """Grading on :mod:`trek.stage`: one grade per answered question in ``grades.jsonl``.

    Pending grades (a judge call failed) and failed ones (an internal error) are tried again;
    unparsed grades are kept like decided ones (asking again would replay the same reply), unless
    ``regrade`` names them: ``unparsed`` grades them again, ``all`` every grade (``trek grade
    --regrade``, e.g. after fixing a judge's prompt folder or parameters)."""

    record = Grade
    name = "grade"
    unit = "q"
    head_fields = ("question_id", "outcome", "input_key", "error")

    def __init__(self, root: Path, judge: LLMClient, settings: dict[str, Any], regrade: str | None = None):
        if regrade not in REGRADE:
            raise ValueError(f"--regrade must be one of {', '.join(x for x in REGRADE if x)}, not {regrade!r}")
        self.root, self.judge, self.settings, self.regrade = root, judge, settings, regrade
        self.config = JudgeConfig.from_settings(judge, settings)

    def finished(self, record: Grade) -> bool:
        if self.regrade == "all" or (self.regrade == "unparsed" and record.outcome == "unparsed"):
            return False
        return super().finished(record)

    def slot(self, item: tuple[Question, Trajectory]) -> Slot:
        return Slot(self.root / runs.GRADES, item[0].id)

    def input_key(self, item: tuple[Question, Trajectory]) -> str:
        return grade_input_key(item[0], item[1].final_answer, self.config, self.judge)

    def status(self, g: Grade) -> str:
        return g.outcome

    async def produce(self, item: tuple[Question, Trajectory], key: str) -> Grade:
        q, t = item
        token = FRESH_SAMPLE.set(1 if self.regrade else 0)  # a regrade asks afresh, not from the cache
        try:
            g = await agrade(q, t.final_answer, self.judge, **self.settings)
        finally:
            FRESH_SAMPLE.reset(token)
        return g.model_copy(update={"input_key": key})

    def llm_clients(self) -> list[LLMClient]:
        return [self.judge]

    def failure(self, item: tuple[Question, Trajectory], key: str, error: str) -> Grade:
        q, t = item
        name, version = self.judge.decided_by() or (grader_for(q).GRADER, grader_version(q))
        return make_grade(q, t.final_answer, outcome="failed", method="none", grader=name,
                          grader_version=version, config=self.config).model_copy(
                              update={"error": error, "input_key": key})


@dataclass
class _Plan:
    """What grading a run covers: the answers to grade (a re-readable source of
    ``(question, slim answer)``, each read by offset when it is needed) and those left out."""

    items: Any
    pending_answers: list[str]
    unanswered: list[str]


def graders_forced() -> str | None:
    """The grader ``trek grade --grader`` forces for every question (``None``: each question's own)."""
    return _forced.get()


#: :func:`_plan`'s tags of an answer in its index: answered, pending (255: no answer)
_ANSWERED, _PENDING = 0, 1


def _plan(rd: Path, judge: Any = None) -> _Plan:
    # the questions and answers are indexed, not loaded: per question the offsets of its line and
    # of its answer's last line; a question and its answer (a slim copy, runs.slim_answer: grading
    # reads only its status and final answer) are read again when the stage reaches them
    ids, questions = runs.index_questions(rd)
    answers = runs.index_records(rd, runs.ANSWERS, Trajectory, ids,
                                 tag=lambda t: _PENDING if t.status == "pending" else _ANSWERED)
    plan = _Plan(None, [], [])
    for qid, n in ids.items():
        tag = answers.tags[n]
        if tag == 255:
            plan.unanswered.append(qid)
        elif tag == _PENDING:
            plan.pending_answers.append(qid)
    del ids
    graded_numbers = array("q", (n for n in range(len(questions)) if answers.tags[n] == _ANSWERED))

    def read_questions() -> Iterator[Question]:
        with questions.reader() as read:
            for n in graded_numbers:
                yield read(n)

    def read_items() -> Iterator[tuple[Question, Trajectory]]:
        with questions.reader() as read_q, answers.reader(runs.answer_fields()) as read_a:
            for n in graded_numbers:
                yield read_q(n), runs.slim_answer(read_a(n))

    for q in read_questions():
        grader_for(q)  # a question without a grader fails before any call
    if judge is not None:  # the exact judge refuses a question it has no annotations for, before any grade
        judge.prepare(rd, Reread(read_questions, len(graded_numbers)))
    plan.items = Reread(read_items, len(graded_numbers))
    return plan


async def arun_grading(
    run_dir: str | os.PathLike[str],
    judge: LLMClient,
    *,
    regrade: str | None = None,
    prompts_dir: str | os.PathLike[str] | None = None,
    progress: bool = True,
    checkpoint_seconds: float = 1.0,
    **settings: Any,
) -> GradingReport:
    """Grade a run directory into ``grades.jsonl`` (see the module docstring).

    ``prompts_dir``: template overrides for this call only; ``settings`` go to every judge call
    (:mod:`trek.graders`). A judge without a cache uses the run's. Raises
    :class:`~trek.types.RecordError` for missing or malformed files and ``ValueError`` for a
    question without a grader. The caller owns ``judge`` (:func:`run_grading` closes it).
    """
    rd = Path(run_dir)
    calls0, hits0 = judge.http_calls, judge.cache_hits
    with _grading_context(rd, judge, prompts_dir):
        plan = _plan(rd, judge)
        stage = GradeStage(rd, judge, settings, regrade)
        tally = await execute(stage, plan.items, outputs=[rd / runs.GRADES], limit=judge.max_connections,
                              progress=progress, checkpoint_seconds=checkpoint_seconds,
                              ledger=ledger_path(rd / runs.GRADES))
    return GradingReport(
        kept=tally.kept,
        graded=tally.made,
        pending_answers=plan.pending_answers,
        unanswered=plan.unanswered,
        path=rd / runs.GRADES,
        http_calls=judge.http_calls - calls0,
        cache_hits=judge.cache_hits - hits0,
        outcomes=Counter(tally.counts),
        first_errors=dict(tally.first_errors),
    )


#: The synchronous :func:`arun_grading`; closes the judge client at the end.
run_grading = synchronous(arun_grading, close=("judge",))


@contextlib.contextmanager
def _grading_context(rd: Path, judge: LLMClient, prompts_dir: str | os.PathLike[str] | None) -> Iterator[None]:
    """Template overrides and the run's cache (when the judge has none) for one grading call."""
    if not rd.is_dir():
        raise RecordError(rd, None, "run directory does not exist")
    with contextlib.ExitStack() as scope:
        if prompts_dir is not None:
            scope.enter_context(templates.prompts_folder(prompts_dir))
        scope.enter_context(borrowed_cache([judge], default_cache_path(rd)))
        yield


#: How many answers :func:`iter_judge_requests` records at a time.
JUDGE_REQUEST_CHUNK = 1000


def iter_judge_requests(
    run_dir: str | os.PathLike[str],
    judge: LLMClient,
    *,
    prompts_dir: str | os.PathLike[str] | None = None,
    use_cache: bool = False,
    **settings: Any,
) -> Iterator[tuple[str, dict[str, Any], int]]:
    """The first judge request of every grade a run would make, as ``(api, body, sample)``,
    without sending any (a :class:`~trek.llm.estimate.RecordingClient` stands in for the judge),
    made one chunk of :data:`JUDGE_REQUEST_CHUNK` answers at a time, so an estimate of a large run
    never holds every judge prompt. ``use_cache``: answer cached calls from the cache and list
    only the others (follow-up re-asks of a cached first call included)."""
    from trek.llm.estimate import RecordingClient

    rd = Path(run_dir)
    if not judge.makes_calls:  # a judge that sends nothing (the exact judge)
        return
    recorders: list[RecordingClient] = []

    def recorder(client: Any) -> RecordingClient:
        recorders.append(RecordingClient(client, use_cache=use_cache))
        return recorders[-1]

    with _grading_context(rd, judge, prompts_dir):
        # the judge with each member that calls a model recording instead: a cascade's first judge
        # still decides what it can, and only what it leaves undecided is a request
        rec = judge.with_recorder(recorder)
        stage = GradeStage(rd, judge, settings)  # the plan's keys are the real judge's
        jobs = stage_plan(stage, _plan(rd).items, keep=False).iter_jobs()  # the items read again, not kept
        while part := [(q, t.final_answer) for (q, t), _, _ in itertools.islice(jobs, JUDGE_REQUEST_CHUNK)]:
            run_sync(agrade_many(part, rec, progress=False, **settings))
            del part
            for r in recorders:
                recorded, r.recorded = r.recorded, []
                yield from recorded
                del recorded


def estimate_grading(
    run_dir: str | os.PathLike[str],
    judge: LLMClient,
    *,
    batch: bool = False,
    assume_output: int = 4096,
    prompts_dir: str | os.PathLike[str] | None = None,
    **settings: Any,
) -> Any:
    """The :class:`~trek.llm.estimate.Estimate` of grading ``run_dir`` (cache hits excluded)."""
    from trek.llm.estimate import Assumption, estimate_requests
    from trek.llm.usage import BATCH_PRICE_FACTOR

    rd = Path(run_dir)
    reasks = JudgeConfig.from_settings(judge, settings).max_reasks
    with _grading_context(rd, judge, prompts_dir):
        return estimate_requests(
            iter_judge_requests(rd, judge, **settings), judge, label="trek grade",
            price_factor=BATCH_PRICE_FACTOR if batch else 1.0, assume_output=assume_output,
            assumption=Assumption(description=f"one judge call per answer to grade; the re-asks of an unreadable "
                                              f"verdict (up to {reasks}, rare) are not counted"),
        )


def run_grading_batch(
    run_dir: str | os.PathLike[str],
    judge: LLMClient,
    *,
    prompts_dir: str | os.PathLike[str] | None = None,
    progress: bool = True,
    wait: bool = True,
    poll_seconds: float = 30.0,
    **settings: Any,
) -> tuple[GradingReport, Any]:
    """Grade through OpenAI's Batch API: the judge calls not in the cache go into a batch
    (recorded in ``<run_dir>/openai-batch/``), their replies are loaded into the run's cache, then
    the run is graded from the cache alone. Items the batch did not answer (failed, expired,
    still running) and re-asks of unreadable verdicts are left ``pending``: the next run batches
    them. Returns the grading report and the :class:`~trek.llm.openai_batch.BatchRun`."""
    from trek.llm.estimate import RecordingClient
    from trek.llm.openai_batch import submit_and_collect

    rd = Path(run_dir)
    ledger = ledger_path(rd / runs.GRADES)
    with _grading_context(rd, judge, prompts_dir):
        reqs = list(iter_judge_requests(rd, judge, use_cache=True, **settings))
        _check_batch_budget(reqs, judge, ledger)
        br = run_sync(submit_and_collect(reqs, judge, rd / "openai-batch", wait=wait, poll_seconds=poll_seconds,
                                         progress=progress, state_file=runs.BATCH_STATE))
        if br.cost_usd:
            with spending([judge], ledger) as led:
                led.record(br.cost_usd, judge.model)
        replay = RecordingClient(
            judge, use_cache=True, reasons=br.failures,
            error="not answered by the Batch API yet (running, failed or expired; or a re-ask): run again",
        )
        report = run_grading(rd, replay, progress=progress, **settings)
    return report, br


def _check_batch_budget(reqs: list[tuple[str, dict[str, Any], int]], judge: LLMClient, ledger: Path) -> None:
    """Refuse (``ValueError``) a batch whose worst case would pass what is left of the judge's budget."""
    from trek.llm.estimate import estimate_requests
    from trek.llm.ledger import read_ledger
    from trek.llm.usage import BATCH_PRICE_FACTOR

    budget = judge.ledger.budget_usd if judge.ledger is not None else judge.budget_usd
    if budget is None or not reqs:
        return
    before = judge.ledger.total_usd if judge.ledger is not None and judge.ledger.path else read_ledger(ledger)
    high = estimate_requests(reqs, judge, price_factor=BATCH_PRICE_FACTOR, assume_output=judge.assume_output).usd_high
    if before + high > budget:
        raise ValueError(
            f"--budget ${budget:.2f}: the batch may cost up to ${high:.4f} at the batch price (${before:.4f} spent "
            f"before, {ledger}); raise the budget, grade without --batch (calls stop at the budget), or grade fewer"
        )


def grade_run(
    run_dir: str | os.PathLike[str],
    judge: LLMClient,
    *,
    prompts_dir: str | os.PathLike[str] | None = None,
    progress: bool = True,
    **settings: Any,
) -> list[Grade]:
    """Grade a run directory, write ``grades.jsonl`` and return its grades (see :func:`run_grading`).

    Pending answers (not graded) and pending grades are reported as a logging warning.
    """
    report = run_grading(run_dir, judge, prompts_dir=prompts_dir, progress=progress, **settings)
    if report.pending_answers or report.pending_grades or report.unanswered:
        log.warning("%s", report.describe())
    return report.grades


def grade_with_roles(
    run_dir: str | os.PathLike[str], judge: Any, *, audit: Any = None, exact_rule: str = "first",
    audit_limit: int | None = None, batch: Any = None, regrade: str | None = None, prompts_dir: Any = None,
    progress: bool = True, budget_usd: float | None = None, client_settings: dict[str, Any] | None = None,
    proceed: Any = lambda estimate, ledger: True, announce: Any = lambda roles: None, say: Any = lambda text: None,
    audit_with: Any = None,
) -> GradingReport | None:
    """``trek grade`` as one call: grade ``run_dir`` with the judge :class:`~trek.roles.Role`
    (model ``oracle``: the exact judge, with ``audit``, a role whose model records its verdicts
    beside the exact ones, through ``audit_with``, :func:`trek.audit.audit_grading`). ``batch``: the Batch API settings (``{"wait", "poll_seconds"}``) or
    ``None``. ``proceed(estimate, ledger)`` may stop before any call (``None`` is returned);
    ``announce(roles)`` and ``say(text)`` report. Clients come from :meth:`trek.runs.RunDir.client`."""
    rd = runs.RunDir(run_dir)
    if not rd.path.is_dir():
        raise RecordError(rd.path, None, "run directory does not exist")
    settings, params = dict(client_settings or {}), dict(judge.params)
    client = make_judge(judge, lambda r: rd.client(r, progress=progress, budget_usd=budget_usd, **settings),
                        rule=exact_rule)
    if audit is not None and audit.model and not client.answers_without_model:
        raise ValueError("--audit-judge records a model's verdicts beside those a judge decides without a model: "
                         "use it with --judge exact (or a cascade exact,MODEL)")
    if batch is not None and client.makes_calls and client.answers_without_model:
        raise ValueError("--batch sends every grade to the Batch API at once: a cascade, whose model grades only what "
                         "the judge before it leaves undecided, runs without --batch")
    auditor = rd.client(audit, progress=progress, **settings) if audit is not None and audit.model else None
    if not client.makes_calls:  # a judge that sends nothing (the exact judge); a model may judge beside it
        if batch is not None:
            raise ValueError(f"--batch sends model calls: the judge {judge.model} makes none")
        announce({"judge": client, "audit judge": auditor})
        from trek.llm.estimate import Estimate

        free = Estimate(label="trek grade, a judge that makes no model call", model=judge.model)
        free.notes.append("0 model calls, $0.00: every grade is decided without a model")
        if auditor is not None:
            free.notes.append(f"the audit judge {audit.model} grades the same answers once more (estimate it with "
                              f"trek grade RUN --judge {audit.model} --dry-run)")
        if not proceed(free, rd.ledger(runs.GRADES)):
            return None
        report = run_grading(rd.path, client, progress=progress, regrade=regrade)
        if auditor is not None:
            say(audit_with(rd.path, auditor, limit=audit_limit, progress=progress, **dict(audit.params)).describe())
        return report
    announce({"judge": client, "audit judge": auditor})
    est = estimate_grading(rd.path, client, prompts_dir=prompts_dir, batch=batch is not None,
                           assume_output=client.assume_output, **params)
    if not proceed(est, rd.ledger(runs.GRADES)):
        return None
    if batch is None:
        report = run_grading(rd.path, client, prompts_dir=prompts_dir, progress=progress, regrade=regrade, **params)
    else:
        if regrade:
            raise ValueError("--regrade grades from the judge directly: run it without --batch")
        report, br = run_grading_batch(rd.path, client, prompts_dir=prompts_dir, progress=progress, **batch, **params)
        say(br.describe())
    if auditor is not None:  # beside the grades a cascade's first judge decided without a model
        say(audit_with(rd.path, auditor, limit=audit_limit, progress=progress, **dict(audit.params)).describe())
    return report
