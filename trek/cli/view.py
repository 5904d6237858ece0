"""``trek view RUN``: one HTML page to read a run, before or after grading and tracing
(:mod:`trek.runview`)."""

from __future__ import annotations

from pathlib import Path

import typer

from trek.cli import options


def view_command(
    run_dir: Path = typer.Argument(..., help="A run directory (from trek wild run, trek import or trek ctrl run)."),
    out: Path = typer.Option(None, "--out", help="HTML path (default: RUN_DIR/view.html)."),
) -> None:
    """Write one HTML page to read a run: answers, grades and trajectories, traced or not.

    Per question: the question and its reference answers, the answer and how the run ended for
    it, the grade (when graded), the TrekTrace labels (when traced), every search call with the
    URLs it returned and every page opened; filters by dataset, grade and answer status. Nothing
    is fetched and no model is called. `trek trace view` shows the traced cases with their tests.
    """
    from trek.errors import RecordError
    from trek.runview import write_run_view

    with options.exit_on(RecordError, FileNotFoundError, ValueError):
        path = write_run_view(run_dir, out)
    typer.echo(f"wrote {path}")
