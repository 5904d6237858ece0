"""``trek grade review``: draw a run's questions for a person to review, for judge-corrected
accuracy (``trek grade RUN --human FILE``) and comparisons (``trek compare ... --human``); the work
is done by :mod:`trek.grade_review`.

``trek grade`` stays one command; :func:`with_review` lets its first argument ``review`` start
this command instead (a run folder named ``review`` is given as ``./review``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from trek.cli import options
from trek.types import RecordError

__all__ = ["review_command", "with_review", "corrected_accuracy_text"]


def review_command(
    run_dir: Path = typer.Argument(..., help="A graded run directory."),
    sample: int = typer.Option(..., "--sample", min=1, help="Draw N of the run's questions uniformly at random."),
    seed: int = typer.Option(0, "--seed", help="The seed of the draw (the same seed over the same questions gives "
                             "the same questions: review two runs of one question set with one seed to compare them)."),
    by: str = typer.Option(None, "--by", metavar="dataset", help="Stratify the draw by dataset (proportional)."),
    out: Path = typer.Option(None, "--out", help="The review file: .xlsx (default RUN_DIR/grade-review.xlsx) or .csv."),
    force: bool = typer.Option(False, "--force", help="Replace an existing review file (it may hold a person's "
                               "verdicts)."),
) -> None:
    """Draw a random sample of a run's grades for a person to review.

    Writes a workbook (a grades sheet: question, reference answers, the system's answer, the
    judge's outcome and a blank reviewer_correct column to fill with yes or no; a sample sheet
    recording the draw) or, for an --out ending in .csv, a CSV with question_id, dataset,
    judge_outcome, reviewer_correct, sample_seed and sample_by. Fill in every row, then
    `trek grade RUN --judge M --human FILE` gives judge-corrected accuracy and
    `trek compare RUN_A RUN_B --human FILE_A --human FILE_B` corrected paired differences.
    Exit code 0, 2 for bad input.
    """
    from trek.grade_review import describe_sample, draw_grade_sample, write_grade_review

    with options.exit_on(RecordError, FileNotFoundError, ValueError):
        drawn = draw_grade_sample(run_dir, sample, seed, by)
        path = write_grade_review(run_dir, out, drawn, force=force)
    typer.echo(f"wrote {path}: {describe_sample(drawn)}")


def corrected_accuracy_text(run_dir: Path, human: Path, alpha: float = 0.05) -> str:
    """The corrected-accuracy table ``trek grade RUN --human FILE`` prints (errors exit with code 2)."""
    from trek.grade_review import corrected_accuracy, describe_accuracy, read_grade_review

    with options.exit_on(RecordError, FileNotFoundError, ValueError):
        verdicts = read_grade_review(human, run_dir)
        return describe_accuracy(corrected_accuracy(run_dir, verdicts, alpha), verdicts, alpha)


def with_review(grade: Any) -> Any:
    """``grade`` (the click command of ``trek grade``) with ``trek grade review ...`` routed to
    :func:`review_command`."""
    one = typer.Typer(rich_markup_mode=None, add_completion=False)
    one.command("review")(review_command)
    review = typer.main.get_command(one)
    base = type(grade)

    class _GradeWithReview(base):  # type: ignore[misc, valid-type]
        def make_context(self, info_name: Any, args: list[str], parent: Any = None, **extra: Any) -> Any:
            if args and args[0] == "review":
                return review.make_context(f"{info_name} review", list(args[1:]), parent=parent, **extra)
            return super().make_context(info_name, args, parent=parent, **extra)

    grade.__class__ = _GradeWithReview
    return grade
