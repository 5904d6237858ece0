"""``trek data``: download the source datasets and describe what Trek loads from them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from trek.cli import options
from trek.datasets.common import DATA_DIR_ENV, DatasetError, LoadReport, MissingDataError, default_data_dir

_DATA_DIR_HELP = (
    "Folder holding the source files (freshqa/*.csv, infodeepseek/*.json, "
    f"sealqa/sealqa_seal_hard.parquet). Default: ${DATA_DIR_ENV} when set, else ./datasets "
    "under the current directory."
)

app = typer.Typer(rich_markup_mode=None,
    help=(
        "Source datasets of TrekBench-Wild (FreshQA, InfoDeepSeek, SealQA): fetch them at their "
        "pinned versions and report what is loaded.\n\n"
        f"The data directory is --data-dir, else ${DATA_DIR_ENV}, else ./datasets under the "
        "current directory."
    ),
    no_args_is_help=True,
    add_completion=False,
)


def _console() -> Console:
    return Console(highlight=False)


def _err_console() -> Console:
    return Console(stderr=True, highlight=False)


def _resolve(data_dir: Path | None) -> Path:
    return data_dir if data_dir is not None else default_data_dir()


@app.command("info")
def info_command(
    data_dir: Path | None = typer.Option(None, "--data-dir", help=_DATA_DIR_HELP),
    mini: bool = typer.Option(
        False, "--mini", help="Describe the bundled offline demo benchmark instead of the source files."
    ),
    strict: bool = typer.Option(
        False, "--strict", help="Stop at the first unreadable row instead of skipping and listing it."
    ),
) -> None:
    """Describe the loaded source data, one table per dataset.

    Rows read, rows kept by the TrekBench-Wild filter, skipped rows and why, the false-premise
    count and the distribution of reference years; then the year table of the whole benchmark.
    """
    if mini:
        _info_mini()
        return
    from trek.datasets import load_benchmark, wild

    root = _resolve(data_dir)
    try:
        bench = load_benchmark("wild", root, strict=strict)
    except MissingDataError as e:
        _err_console().print(str(e), markup=False, soft_wrap=True)
        raise typer.Exit(2) from None
    except DatasetError as e:
        _err_console().print(f"cannot read a source file: {e}", markup=False, soft_wrap=True)
        raise typer.Exit(2) from None

    out = _console()
    summary = wild.summarize(bench)
    by_ds = bench.by_dataset()
    out.print(f"TrekBench-Wild source data in {root}", markup=False)
    for name, row in summary.overview.iterrows():
        _print_dataset(out, str(name), row, bench.reports[str(name)], by_ds.get(str(name), []))
    out.print()
    out.print(_years_table(summary.years))
    if not summary.skipped.empty:
        out.print(f"{len(summary.skipped)} row(s) skipped; run with --strict to stop at the first one.")


def _print_dataset(out: Console, name: str, row: Any, rep: LoadReport, questions: list[Any]) -> None:
    """One dataset's table: rows read, skipped, left out and kept (beside the paper's count),
    false premises and reference years; then its skipped rows."""
    from trek.datasets import wild

    out.print()
    out.print(f"[bold]{escape(name)}[/bold]: {escape(str(row['file']))}", soft_wrap=True)
    out.print(f"filter: {row['filter']}", markup=False, soft_wrap=True)
    table = Table(show_header=True)
    table.add_column(name, style="bold")
    table.add_column("count", justify="right")
    table.add_row("rows read", str(row["rows_read"]))
    table.add_row("skipped (unreadable)", str(row["rows_skipped"]))
    table.add_row("left out by filter", str(row["rows_filtered_out"]))
    kept = str(row["rows_kept"])
    paper = row["paper_count"]
    if paper is not None and paper == paper and int(paper) != int(row["rows_kept"]):  # skip NaN
        kept += f" (paper: {int(paper)})"
    table.add_row("rows kept", kept)
    table.add_row("false premise (kept)", str(row["false_premise"]))
    years = wild.year_distribution(questions)
    for label, count in years.iloc[:, 0].items() if not years.empty else []:
        table.add_row(f"year {escape(str(label))}", str(int(count)))
    out.print(table)
    if rep.skipped:
        out.print(_skipped_table(rep))


def _years_table(years: Any) -> Table:
    """The reference years of the whole benchmark (Table 10)."""
    table = Table(title="Reference years of TrekBench-Wild (Table 10)")
    table.add_column("year")
    for col in years.columns:
        table.add_column(str(col), justify="right")
    table.add_column("total", justify="right")
    for label, counts in years.iterrows():
        table.add_row(escape(str(label)), *[str(int(v)) for v in counts], str(int(counts.sum())))
    table.add_row("total", *[str(int(v)) for v in years.sum(axis=0)], str(int(years.to_numpy().sum())))
    return table


_MAX_SKIPPED_SHOWN = 25


def _skipped_table(rep: LoadReport) -> Table:
    table = Table(title=f"skipped rows of {Path(rep.path).name}")
    table.add_column(rep.row_kind, justify="right")
    table.add_column("id")
    table.add_column("why")
    for s in rep.skipped[:_MAX_SKIPPED_SHOWN]:
        table.add_row("" if s.row is None else str(s.row), escape(s.id or ""), escape(s.describe()))
    if len(rep.skipped) > _MAX_SKIPPED_SHOWN:
        table.add_row("…", "", f"{len(rep.skipped) - _MAX_SKIPPED_SHOWN} more")
    return table


def _info_mini() -> None:
    from trek.datasets import load_benchmark
    from trek.datasets.wild import describe_corpus

    try:
        bench = load_benchmark("mini")
    except Exception as e:  # the demo data belongs to another module; report whatever went wrong
        _err_console().print(
            f"Could not load the bundled demo benchmark: {type(e).__name__}: {e}",
            markup=False,
            soft_wrap=True,
        )
        raise typer.Exit(2) from None
    tables = describe_corpus(bench.questions, bench.documents)
    out = _console()
    out.print(
        f"Bundled demo benchmark: {len(bench.questions)} questions, {len(bench.documents)} documents",
        markup=False,
    )
    qt = Table(title="Questions per dataset style")
    qt.add_column("dataset")
    qt.add_column("questions", justify="right")
    qt.add_column("false premise", justify="right")
    for name, row in tables["questions"].iterrows():
        qt.add_row(str(name), str(int(row["questions"])), str(int(row["false_premise"])))
    out.print(qt)
    dt = Table(title="Documents per role")
    dt.add_column("role")
    dt.add_column("documents", justify="right")
    dt.add_column("dated", justify="right")
    dt.add_column("undated", justify="right")
    for role, row in tables["documents"].iterrows():
        dt.add_row(str(role), *[str(int(row[c])) for c in ("documents", "dated", "undated")])
    docs = tables["documents"]
    if not docs.empty:
        dt.add_row("total", *[str(int(docs[c].sum())) for c in ("documents", "dated", "undated")])
    out.print(dt)


@app.command("mini-generate")
def mini_generate_command(
    mini_dir: Path | None = typer.Option(
        None, "--mini-dir", help="TrekBench-Mini folder (default: $TREK_MINI_DIR, else the bundled data/mini)."
    ),
    check: bool = typer.Option(
        False, "--check", help="Write nothing; exit 1 when the generated file differs from what the "
        "timelines file gives now."
    ),
) -> None:
    """Generate TrekBench-Mini's timeline pages from timelines.yaml into generated/documents.jsonl.

    Deterministic: the same timelines and hand-written pages give the same bytes.
    """
    from trek.datasets import mini_timeline as T
    from trek.datasets.mini import MiniBenchmarkError
    from trek.types import RecordError

    try:
        if check:
            ok = T.check(mini_dir)
            path = T.output_path(mini_dir)
            _console().print(f"{path}: " + ("up to date" if ok else "differs from timelines.yaml "
                                           "(run trek data mini-generate)"), markup=False, soft_wrap=True)
            raise typer.Exit(0 if ok else 1)
        path, n = T.write(mini_dir)
    except (T.TimelineError, MiniBenchmarkError, RecordError) as e:
        _err_console().print(str(e), markup=False, soft_wrap=True)
        raise typer.Exit(2) from None
    _console().print(f"wrote {n} generated pages to {path}", markup=False, soft_wrap=True)


def _download_help() -> str:
    from trek.datasets.download import PINS, SEALQA_REVISION

    places = "\n\n".join(f"{p.relpath}: {p.source.description}" for p in PINS)
    return (
        "Fetch the source files from their official homes at pinned versions.\n\n"
        "A file is written only once its sha256 (or content checksum) matches the pin, the copy "
        "this project was checked against; an existing file that does not match is left alone "
        "(--force replaces it). When the network is unavailable or a file does not match, nothing "
        "is written and the command prints where to put each file by hand. The files, under the "
        f"data directory:\n\n{places}\n\n"
        f"SealQA comes from revision {SEALQA_REVISION} of the Hugging Face dataset vtllms/sealqa, "
        "whose files are rewritten every few weeks. When that revision's seal-hard.parquet does not "
        "match, download the one you want to use and save it as sealqa/sealqa_seal_hard.parquet "
        "under the data directory: the loaders read any seal_hard parquet file there, and `trek "
        "data info` shows its counts beside the paper's (64 fast-changing questions)."
    )


@app.command("download", help=_download_help())
def download_command(
    data_dir: Path | None = typer.Option(None, "--data-dir", help=_DATA_DIR_HELP),
    only: list[str] = typer.Option(
        [],
        "--only",
        help="Fetch only this dataset or file (freshqa, infodeepseek, sealqa, sealqa_seal_hard, ...).",
    ),
    force: bool = typer.Option(False, "--force", help="Replace files that exist but do not match the pins."),
) -> None:
    from trek.datasets import download

    root = _resolve(data_dir)
    with options.exit_on(ValueError):
        pins = download.select_pins(only)
    out = _console()
    outcomes = download.download_all(root, pins=pins, force=force)
    table = Table(title=f"Source files in {root}")
    table.add_column("file")
    table.add_column("status")
    for o in outcomes:
        table.add_row(escape(o.pin.relpath), o.status)
    out.print(table)
    for o in outcomes:
        out.print(f"{o.pin.relpath}: {o.message}", markup=False, soft_wrap=True)
    failed = [o for o in outcomes if not o.ok]
    if failed:
        out.print(download.manual_instructions(root, [o.pin for o in failed]), markup=False, soft_wrap=True)
        raise typer.Exit(2)
