"""``trek compare``: paired differences of accuracy between runs of the same questions, judge-only
and corrected by a random human review of each run; the work is done by :mod:`trek.grade_review`."""

from __future__ import annotations

from pathlib import Path

import typer

from trek.cli import options
from trek.types import RecordError

__all__ = ["compare_command"]


def compare_command(
    run_dirs: list[Path] = typer.Argument(..., help="Two or more graded runs of the same questions."),
    human: list[Path] = typer.Option(..., "--human", help="The filled review of each run (trek grade review RUN "
                                     "--sample N --seed S), one --human per run in the order of the runs."),
    alpha: float = typer.Option(0.05, "--alpha", min=0.0, max=1.0, help="Level of the tests, 1 - confidence of the "
                                "intervals."),
    out: Path = typer.Option(None, "--out", help="Also write the table as CSV to this file."),
) -> None:
    """Compare runs of the same questions pair by pair, correcting the judge's errors by a review.

    For each pair A, B: the judge-only difference of accuracy with the exact McNemar test, and the
    difference corrected by the reviews (prediction-powered, PPI++: the population accuracy of A
    minus B) with its interval and p-value; p-values Holm-adjusted across the pairs. The two runs
    of a pair must be reviewed on the same questions: draw both reviews with the same --seed (and
    --by). Exit code 0, 2 for bad input (a bad review file names the row).
    """
    from trek.grade_review import compare_runs, describe_comparisons, read_grade_review
    from trek.outputs import atomic_write, check_out

    with options.exit_on(RecordError, FileNotFoundError, ValueError):
        if not 0 < alpha < 1:
            raise ValueError(f"--alpha must lie strictly between 0 and 1, got {alpha}")
        if len(run_dirs) < 2:
            raise ValueError("give two or more runs to compare")
        if len(human) != len(run_dirs):
            raise ValueError(f"{len(run_dirs)} runs but {len(human)} --human file(s); give one per run, in order")
        names = [str(d) for d in run_dirs]
        if len(set(names)) != len(names):
            raise ValueError("a run is given twice")
        target = check_out(out, runs=run_dirs, reads=human, example="compare.csv") if out is not None else None
        reviews = {name: read_grade_review(h, d) for name, d, h in zip(names, run_dirs, human, strict=True)}
        table = compare_runs(dict(zip(names, run_dirs, strict=True)), reviews, alpha)
        if target is not None:
            atomic_write(target, table.to_csv(index=False, float_format="%.6g", lineterminator="\n"))
    typer.echo(describe_comparisons(table, alpha))
    if target is not None:
        typer.echo(f"wrote {target}")
