"""Grade a whole run directory, resumably, and the ``trek grade`` command.

A run directory holds ``questions.jsonl`` (the run's :class:`~trek.types.Question` records) and
``answers.jsonl`` (one :class:`~trek.types.Trajectory` per question). :func:`grade_run` grades
every answered question with its dataset's grader (:mod:`trek.graders`) and writes
``grades.jsonl`` atomically, in the order of ``questions.jsonl``.

Resuming: a grade already in ``grades.jsonl`` is kept, without a judge call, when it was made
for the same response, by the same grader version (template overrides included), the same
judge model and the same judge settings, and is not ``pending``. Everything else is graded
again: pending grades (a failed judge call) are retried on the next run. Unparsed grades are
kept like decided ones (asking again would only replay the cached, unreadable reply). Trajectories that
are themselves ``pending`` (no answer yet) are skipped and reported, and get no grade.

Judge calls go through the LLM cache (``<run_dir>/llm-cache.sqlite``, or ``$TREK_CACHE``),
so grading a run a second time, even from scratch, asks the endpoint nothing new.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typer

from trek import templates
from trek.graders import agrade_many, grader_for, grader_version
from trek.graders.common import JudgeConfig
from trek.llm.cache import LLMCache, default_cache_path
from trek.llm.client import LLMClient, run_sync
from trek.types import Grade, Question, RecordError, Trajectory, read_jsonl, write_jsonl

__all__ = [
    "QUESTIONS_FILE",
    "ANSWERS_FILE",
    "GRADES_FILE",
    "GradingReport",
    "run_grading",
    "grade_run",
    "grade_command",
]

log = logging.getLogger(__name__)

QUESTIONS_FILE = "questions.jsonl"
ANSWERS_FILE = "answers.jsonl"
GRADES_FILE = "grades.jsonl"


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
            parts.append(f"{len(self.pending_answers)} pending answer(s) in {ANSWERS_FILE}: not graded")
        if self.unanswered:
            parts.append(f"{len(self.unanswered)} question(s) without an answer in {ANSWERS_FILE}: not graded")
        return "\n".join(parts)


def _record_lines(path: Path) -> list[int]:
    """Line numbers of the non-blank lines of ``path`` (the lines read_jsonl turns into records)."""
    with path.open(encoding="utf-8") as fh:
        return [i for i, line in enumerate(fh, start=1) if line.strip()]


def _load_questions(run_dir: Path) -> dict[str, Question]:
    path = run_dir / QUESTIONS_FILE
    qs = read_jsonl(path, Question)
    lines = _record_lines(path)
    out: dict[str, Question] = {}
    for q, line in zip(qs, lines, strict=True):
        if q.id in out:
            raise RecordError(path, line, f"field 'id': duplicate question id {q.id!r}")
        out[q.id] = q
    return out


def _load_answers(run_dir: Path, questions: dict[str, Question]) -> dict[str, Trajectory]:
    """Trajectories by question id; for an id listed twice the later line wins."""
    path = run_dir / ANSWERS_FILE
    trajs = read_jsonl(path, Trajectory)
    lines = _record_lines(path)
    out: dict[str, Trajectory] = {}
    for t, line in zip(trajs, lines, strict=True):
        if t.question_id not in questions:
            raise RecordError(
                path, line, f"field 'question_id': {t.question_id!r} is not in {QUESTIONS_FILE}"
            )
        out[t.question_id] = t
    return out


def _reusable(old: Grade | None, question: Question, response: str | None, version: str,
              config: JudgeConfig) -> bool:
    if old is None or old.outcome == "pending":
        return False
    return (
        old.dataset == question.dataset
        and old.response == response
        and old.grader_version == version
        and old.judge_model == config.model
        and _canonical(old.judge_settings) == _canonical(config.recorded())
    )


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, default=str)


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
    if not rd.is_dir():
        raise RecordError(rd, None, "run directory does not exist")
    # templates keeps one module-level override folder; restore whatever was set before.
    previous_dir = templates._override_dir
    if prompts_dir is not None:
        templates.set_prompts_dir(prompts_dir)
    own_cache = None
    if judge.cache is None:
        own_cache = LLMCache(default_cache_path(rd))
        judge.cache = own_cache
    calls0, hits0 = judge.http_calls, judge.cache_hits
    try:
        questions = _load_questions(rd)
        answers = _load_answers(rd, questions)
        grades_path = rd / GRADES_FILE
        previous: dict[str, Grade] = {}
        if grades_path.exists():
            previous = {g.question_id: g for g in read_jsonl(grades_path, Grade)}

        config = JudgeConfig.from_settings(judge, settings)
        final: dict[str, Grade] = {}
        todo: list[tuple[Question, str | None]] = []
        pending_answers: list[str] = []
        unanswered: list[str] = []
        for qid, q in questions.items():
            t = answers.get(qid)
            if t is None:
                unanswered.append(qid)
                continue
            if t.status == "pending":
                pending_answers.append(qid)
                continue
            grader_for(q)
            if _reusable(previous.get(qid), q, t.final_answer, grader_version(q), config):
                final[qid] = previous[qid]
            else:
                todo.append((q, t.final_answer))
        kept = len(final)
        if todo:
            new = run_sync(_grade_missing(todo, judge, progress, settings))
            for g in new:
                final[g.question_id] = g
        ordered = [final[qid] for qid in questions if qid in final]
        write_jsonl(grades_path, ordered)
    finally:
        if prompts_dir is not None:
            templates._override_dir = previous_dir
        if own_cache is not None:
            judge.cache = None
            own_cache.close()
    return GradingReport(
        grades=ordered,
        kept=kept,
        graded=len(todo),
        pending_answers=pending_answers,
        unanswered=unanswered,
        path=grades_path,
        http_calls=judge.http_calls - calls0,
        cache_hits=judge.cache_hits - hits0,
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


# -- the command ----------------------------------------------------------------------------


def format_accuracy(table: Any) -> str:
    """A plain-text rendering of :func:`trek.analysis.accuracy_by_dataset`'s table."""
    shown = table.copy()
    shown["accuracy"] = [("-" if v != v else f"{v:.1f}") for v in table["accuracy"]]
    shown["95% CI"] = [
        ("-" if lo != lo else f"[{lo:.1f}, {hi:.1f}]") for lo, hi in zip(table["ci_low"], table["ci_high"], strict=True)
    ]
    shown = shown.drop(columns=["ci_low", "ci_high"])
    return shown.to_string()


def grade_command(
    run_dir: Path = typer.Argument(..., help="Run directory with questions.jsonl and answers.jsonl."),
    judge: str = typer.Option(..., "--judge", help="Judge model name, e.g. gpt-4.1-mini."),
    base_url: str = typer.Option(None, "--base-url", envvar="OPENAI_BASE_URL", help="OpenAI-compatible endpoint of the judge."),
    max_connections: int = typer.Option(16, "--max-connections", min=1, help="Judge requests in flight at once."),
    prompts: Path = typer.Option(None, "--prompts", envvar="TREK_PROMPTS", help="Folder of template overrides (grader.freshqa.txt, ...)."),
    max_retries: int = typer.Option(6, "--max-retries", min=0, help="Retries of a failed judge call before it is left pending."),
    seed: int = typer.Option(None, "--seed", help="Sampling seed sent to the judge, where the endpoint supports one."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
) -> None:
    """Grade a run's answers with each dataset's judge and print the accuracy table.

    Re-running resumes: finished grades are kept, pending ones are retried, and judge replies
    come from the cache. The API key comes from OPENAI_API_KEY. Exit code 0 when done, 2 for
    bad input, 3 when some grades are pending (run the same command again to retry them).
    """
    from trek.analysis import accuracy_by_dataset
    from trek.llm.client import FatalLLMError

    try:
        if not run_dir.is_dir():
            raise RecordError(run_dir, None, "run directory does not exist")
        client = LLMClient(
            judge,
            base_url=base_url,
            max_connections=max_connections,
            max_retries=max_retries,
            cache=LLMCache(default_cache_path(run_dir)),
            progress=progress,
        )
        report = run_grading(run_dir, client, prompts_dir=prompts, progress=progress, seed=seed)
    except (RecordError, ValueError, FatalLLMError, FileNotFoundError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    typer.echo(report.describe(), err=True)
    if report.grades:
        typer.echo(format_accuracy(accuracy_by_dataset(report.grades)))
    else:
        typer.echo("no grades yet")
    if report.pending_grades:
        raise typer.Exit(3)
