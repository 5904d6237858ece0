"""Grade a whole run directory, resumably, and the ``trek grade`` command.

A run directory holds ``questions.jsonl`` (the run's :class:`~trek.types.Question` records) and
``answers.jsonl`` (one :class:`~trek.types.Trajectory` per question). :func:`grade_run` grades
every answered question with its dataset's grader (:mod:`trek.graders`) and writes
``grades.jsonl`` atomically, in the order of ``questions.jsonl``.

Resuming: a grade already in ``grades.jsonl`` is kept, without a judge call, only when
everything that decided it is unchanged (:func:`grade_inputs_key`): the response, the reference
answers, the false-premise flag, the effective year, the grader version, the judge model and
settings, and the full judge prompt text. Correcting a reference answer therefore re-grades
that question and no other. Pending grades (a failed judge call) are retried on the next run. Unparsed grades are
kept like decided ones (asking again would only replay the cached, unreadable reply). Trajectories that
are themselves ``pending`` (no answer yet) are skipped and reported, and get no grade.

Judge calls go through the LLM cache (``<run_dir>/llm-cache.sqlite``, or ``$TREK_CACHE``),
so grading a run a second time, even from scratch, asks the endpoint nothing new.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trek import runs, templates
from trek.aio import run_sync
from trek.graders import agrade_many, grader_for, grader_version
from trek.graders.common import (
    JudgeConfig,
    is_empty_response,
)
from trek.llm.cache import LLMCache, default_cache_path
from trek.llm.client import LLMClient
from trek.types import Grade, Question, RecordError

__all__ = [
    "GradingReport",
    "grade_inputs_key",
    "run_grading",
    "grade_run",
    "estimate_grading",
    "judge_requests",
    "run_grading_batch",
]

log = logging.getLogger(__name__)

@dataclass
class GradingReport:
    """What :func:`run_grading` did.

    ``grades`` are the grades now in ``grades.jsonl`` (questions order); ``kept`` of them
    came from the previous file, ``graded`` were made in this run. ``pending_answers`` are
    question ids whose trajectory is pending (not graded); ``unanswered`` are question ids
    without a trajectory at all.
    """

    grades: list[Grade]
    kept: int
    graded: int
    pending_answers: list[str] = field(default_factory=list)
    unanswered: list[str] = field(default_factory=list)
    path: Path | None = None
    http_calls: int = 0
    cache_hits: int = 0

    @property
    def pending_grades(self) -> int:
        return sum(g.outcome == "pending" for g in self.grades)

    @property
    def unparsed_grades(self) -> int:
        return sum(g.outcome == "unparsed" for g in self.grades)

    def describe(self) -> str:
        parts = [
            f"{len(self.grades)} grades ({self.kept} kept, {self.graded} graded now; "
            f"{self.http_calls} judge requests, {self.cache_hits} cache hits) -> {self.path}"
        ]
        if self.unparsed_grades:
            parts.append(f"{self.unparsed_grades} unparsed (judge reply unreadable; shown as their own column)")
        if self.pending_grades:
            parts.append(f"{self.pending_grades} pending (judge call failed): run again to retry them")
        if self.pending_answers:
            parts.append(f"{len(self.pending_answers)} pending answer(s) in {runs.ANSWERS}: not graded")
        if self.unanswered:
            parts.append(f"{len(self.unanswered)} question(s) without an answer in {runs.ANSWERS}: not graded")
        return "\n".join(parts)


def grade_inputs_key(question: Question, response: str | None, config: JudgeConfig) -> str:
    """A digest of everything that decides a grade: the response, the references, the
    false-premise flag, the effective year, the dataset and grader version, the judge model and
    settings, and the full judge prompt (with any template override)."""
    module = grader_for(question)
    prompt = None if is_empty_response(response) else module.judge_prompt(question, response)
    payload = {
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
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


async def _grade_missing(
    todo: list[tuple[Question, str | None]], judge: LLMClient, progress: bool, settings: dict[str, Any]
) -> list[Grade]:
    try:
        return await agrade_many(todo, judge, progress=progress, **settings)
    finally:
        await judge.aclose()


def run_grading(
    run_dir: str | os.PathLike[str],
    judge: LLMClient,
    *,
    prompts_dir: str | os.PathLike[str] | None = None,
    progress: bool = True,
    **settings: Any,
) -> GradingReport:
    """Grade a run directory and write ``grades.jsonl``; returns a :class:`GradingReport`.

    ``prompts_dir`` points the graders at a folder of template overrides for this call only.
    ``settings`` go to every judge call (see :mod:`trek.graders`). When ``judge`` has no
    cache, the run's cache (``<run_dir>/llm-cache.sqlite`` or ``$TREK_CACHE``) is used for the
    duration of the call. Raises :class:`~trek.types.RecordError` for missing or malformed
    files (naming file, line and field) and ``ValueError`` for a question without a grader or a
    bad template override.
    """
    rd = Path(run_dir)
    calls0, hits0 = judge.http_calls, judge.cache_hits
    with _grading_context(rd, judge, prompts_dir):
        plan = _plan(rd, JudgeConfig.from_settings(judge, settings))
        final = plan.final
        kept = len(final)
        if plan.todo:
            new = run_sync(_grade_missing(plan.todo, judge, progress, settings))
            for g in new:
                final[g.question_id] = g.model_copy(update={"inputs_key": plan.keys[g.question_id]})
        ordered = [final[qid] for qid in plan.questions if qid in final]
        runs.write_records(rd, runs.GRADES, ordered)
    return GradingReport(
        grades=ordered,
        kept=kept,
        graded=len(plan.todo),
        pending_answers=plan.pending_answers,
        unanswered=plan.unanswered,
        path=rd / runs.GRADES,
        http_calls=judge.http_calls - calls0,
        cache_hits=judge.cache_hits - hits0,
    )


@dataclass
class _Plan:
    """What a grading run must do: the grades kept, the (question, response) pairs to grade."""

    questions: dict[str, Question]
    final: dict[str, Grade]
    keys: dict[str, str]
    todo: list[tuple[Question, str | None]]
    pending_answers: list[str]
    unanswered: list[str]


def _plan(rd: Path, config: JudgeConfig) -> _Plan:
    questions = runs.load_questions(rd)
    answers = runs.load_answers(rd, questions)
    previous = runs.load_grades(rd)
    plan = _Plan(questions, {}, {}, [], [], [])
    for qid, q in questions.items():
        t = answers.get(qid)
        if t is None:
            plan.unanswered.append(qid)
            continue
        if t.status == "pending":
            plan.pending_answers.append(qid)
            continue
        key = grade_inputs_key(q, t.final_answer, config)
        old = previous.get(qid)
        if old is not None and old.outcome != "pending" and old.inputs_key == key:
            plan.final[qid] = old
        else:
            plan.todo.append((q, t.final_answer))
            plan.keys[qid] = key
    return plan


@contextlib.contextmanager
def _grading_context(rd: Path, judge: LLMClient, prompts_dir: str | os.PathLike[str] | None) -> Iterator[None]:
    """Template overrides and the run's cache (when the judge has none) for one grading call."""
    if not rd.is_dir():
        raise RecordError(rd, None, "run directory does not exist")
    scope = contextlib.ExitStack()
    if prompts_dir is not None:
        scope.enter_context(templates.prompts_folder(prompts_dir))
    own_cache = None
    if judge.cache is None:
        own_cache = LLMCache(default_cache_path(rd))
        judge.cache = own_cache
    try:
        yield
    finally:
        scope.close()
        if own_cache is not None:
            judge.cache = None
            own_cache.close()


def judge_requests(
    run_dir: str | os.PathLike[str],
    judge: LLMClient,
    *,
    prompts_dir: str | os.PathLike[str] | None = None,
    use_cache: bool = False,
    **settings: Any,
) -> list[tuple[str, dict[str, Any], int]]:
    """The first judge request of every grade a run would make, as ``(api, body, sample)``,
    without sending any (a :class:`~trek.llm.estimate.RecordingClient` stands in for the judge).
    ``use_cache``: answer cached calls from the cache and list only the others (follow-up
    re-asks of a cached first call included)."""
    from trek.llm.estimate import RecordingClient

    rd = Path(run_dir)
    with _grading_context(rd, judge, prompts_dir):
        rec = RecordingClient(judge, use_cache=use_cache)
        plan = _plan(rd, JudgeConfig.from_settings(judge, settings))
        if plan.todo:
            run_sync(_grade_missing(plan.todo, rec, False, settings))
    return rec.recorded


def estimate_grading(
    run_dir: str | os.PathLike[str],
    judge: LLMClient,
    *,
    prompts_dir: str | os.PathLike[str] | None = None,
    batch: bool = False,
    assume_output: int = 4096,
    **settings: Any,
) -> Any:
    """The :class:`~trek.llm.estimate.Estimate` of grading ``run_dir`` (cache hits excluded)."""
    from trek.llm.estimate import Assumption, estimate_requests
    from trek.llm.usage import BATCH_PRICE_FACTOR

    rd = Path(run_dir)
    reasks = JudgeConfig.from_settings(judge, settings).max_reasks
    with _grading_context(rd, judge, prompts_dir):
        return estimate_requests(
            judge_requests(rd, judge, **settings), judge, label="trek grade",
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
    with _grading_context(rd, judge, prompts_dir):
        reqs = judge_requests(rd, judge, use_cache=True, **settings)
        br = run_sync(submit_and_collect(reqs, judge, rd / "openai-batch", wait=wait, poll_seconds=poll_seconds,
                                         progress=progress))
        replay = RecordingClient(
            judge, use_cache=True,
            error="not answered by the Batch API yet (running, failed or expired; or a re-ask): run again",
        )
        report = run_grading(rd, replay, progress=progress, **settings)
    return report, br


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
