"""``trek runs list [DIR]``: a table of the run folders under DIR (like ``inspect log list``)."""

from __future__ import annotations

from pathlib import Path

import typer

from trek.cli import options

app = typer.Typer(rich_markup_mode=None, help="List run folders and what each holds.", no_args_is_help=True)

__all__ = ["app"]


@app.callback()
def _group() -> None:
    """List run folders and what each holds."""


def _cells(row: dict) -> list[str]:
    acc = row["accuracy"]
    cost = row["cost"]
    return [row["system"], row["model"], str(row["n"]), "-" if acc != acc else f"{acc:.1f}%",
            f"{row['traced']}/{row['failures']}" if row["failures"] else "-",
            "$-" if cost != cost else f"${cost:.4f}", row["status"]]


@app.command("list")
def list_command(
    root: Path = typer.Argument(Path("."), metavar="DIR", help="Folder to look in (default: the current one)."),
) -> None:
    """Print one line per run folder under DIR: system, model, questions, accuracy, traced, cost, status.

    Accuracy is over every question of the run (blank before grading); traced counts the wrong
    answers with a finished trace, of all wrong answers; cost is the answers' and grades' dollars
    ($- when a model has no price). Folders are looked for up to four levels deep (epoch folders
    of a --epochs run included); hidden folders are skipped.
    """
    from trek.listing import describe_run, find_runs
    from trek.textable import render
    from trek.types import RecordError

    with options.exit_on(FileNotFoundError, RecordError, ValueError):
        found = find_runs(root)
        rows = []
        for d in found:
            rel = d.relative_to(root).as_posix() if d != root else "."
            rows.append([rel, *_cells(describe_run(d))])
    if not rows:
        typer.echo(f"no run folders (with a run.json) under {root}", err=True)
        raise typer.Exit(1)
    typer.echo(render(["run", "system", "model", "n", "accuracy", "traced", "cost", "status"], rows,
                      right=(3, 4, 6)))
