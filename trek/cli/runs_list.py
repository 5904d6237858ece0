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
    typer.echo(table(rows))


HEADERS = ("run", "system", "model", "n", "accuracy", "traced", "cost", "status")
#: The narrowest a model name is cut to (with an ellipsis) before the table wraps instead.
MODEL_MIN = 12


def table(rows: list[list[str]], limit: int | None = None) -> str:
    """The listing's table, no wider than ``limit`` (default: the terminal's width): one line per
    run when that fits; else each run folder on a line of its own (whole, to copy) above the other
    cells, and model names cut with an ellipsis to what room is left, but no shorter than
    :data:`MODEL_MIN` (then the system names wrap instead)."""
    from trek import textable

    limit = limit or textable.width()
    if textable.fits(HEADERS, rows, limit):
        return textable.render(HEADERS, rows, limit=limit, right=(3, 4, 6))
    rest = [row[1:] for row in rows]
    heads = HEADERS[1:]
    model = heads.index("model")
    others = sum(max(len(str(x)) for x in (h, *(r[i] for r in rest))) for i, h in enumerate(heads) if i != model)
    room = limit - len(textable.INDENT) - others - len(textable.GAP) * (len(heads) - 1)
    most = max(room, MODEL_MIN, len("model"))
    rest = [[*r[:model], textable.shorten(r[model], most), *r[model + 1:]] for r in rest]
    return textable.render(heads, rest, limit=limit, right=(2, 3, 5), above=[HEADERS[0], *(r[0] for r in rows)],
                           whole=(model,))
