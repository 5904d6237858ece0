"""``trek import``, ``trek validate``, ``trek schema`` and ``trek pages add``: runs from other
agents' logs, checked against the documented trajectory schema; the work is done by
:mod:`trek.imports`."""

from __future__ import annotations

from pathlib import Path

import typer

from trek.cli import options
from trek.runs import RunDir
from trek.types import RecordError

pages_app = typer.Typer(rich_markup_mode=None, help="The run's page store: add page text without a live fetch.", no_args_is_help=True)


#: The options of the trace formats (otlp, langfuse, phoenix, mlflow) and of the two servers.
SEARCH_TOOL = typer.Option(None, "--search-tool", metavar="PATTERN",
                           help="trace formats: a tool name glob whose calls are searches (repeatable; "
                           "default *search*, *retriev*, duckduckgo*, wikipedia*, tavily*; retrieval spans always are).")
QUESTION_KEY = typer.Option("question_id", "--question-key", metavar="KEY",
                            help="trace formats: the trace metadata, tag or span attribute naming the "
                            "question id (a trace without it is matched by the question text it holds).")
IN_ORDER = typer.Option(False, "--in-order", help="trace formats: match traces naming no question id to the "
                        "questions in file order (one each) instead of by their question text.")
PROJECT = typer.Option(None, "--project", metavar="NAME", help="phoenix: the project (default: default).")
EXPERIMENT = typer.Option(None, "--experiment", metavar="NAME|ID",
                          help="mlflow: the experiment, by name or id (default: Default, id 0).")


def import_command(
    fmt: str = typer.Argument(..., metavar="FORMAT",
                              help="openai-responses, anthropic-messages, inspect-ai, chat-completions, gemini, otlp, "
                              "langfuse, or a trace server: phoenix, mlflow."),
    files: list[str] = typer.Argument(..., metavar="FILE...|URL", help="Log files (.json, .jsonl; .eval/.json for "
                                      "inspect-ai); phoenix: the server's URL; mlflow: the tracking URI."),
    out: Path = typer.Option(..., "--out", help="The run directory to write."),
    questions: Path = typer.Option(None, "--questions", help="Questions file (JSONL or CSV) the records answer; "
                                   "inspect-ai logs bring their own."),
    mapping: str = typer.Option(None, "--map", help="Columns of the questions file: FIELD=COLUMN,... "
                                "(fields: id, question, answers, gold_urls, effective_year, dataset, false_premise)."),
    dataset: str = typer.Option(None, "--dataset", help="Dataset name of the questions (default: custom; "
                                "inspect-ai: the task name)."),
    model: str = typer.Option(None, "--model", help="The evaluated model, when the log does not name it."),
    epoch: int = typer.Option(1, "--epoch", min=1, help="inspect-ai: the epoch to import."),
    replace: bool = typer.Option(False, "--replace", help="Replace an existing run directory (once the import worked)."),
    search_tool: list[str] = SEARCH_TOOL,
    question_key: str = QUESTION_KEY,
    in_order: bool = IN_ORDER,
    project: str = PROJECT,
    experiment: str = EXPERIMENT,
) -> None:
    """Import an agent's logs as a Trek run directory that `trek grade` and `trek trace` read.

    Records are bare provider objects matched in order to the questions, or wrappers
    {"question_id": ..., "record": {...}}; phoenix URL and mlflow TRACKING_URI read a server's
    traces. Traces are matched by the question id they name, else by their question text (in
    order only with --in-order). Nothing is written unless every record imports.
    Exit code 0 when done, 2 for bad input.
    """
    from trek.imports import ImportFailure, import_run, parse_mapping

    with options.exit_on(ImportFailure, RecordError, ValueError):
        report = import_run(fmt, files, out, questions=questions, mapping=parse_mapping(mapping), dataset=dataset,
                            model=model, epoch=epoch, replace=replace, search_tools=search_tool or None,
                            question_key=question_key, in_order=in_order, project=project, experiment=experiment)
    typer.echo(report.describe())


def validate_command(
    run_dir: Path = typer.Argument(..., help="A run directory."),
) -> None:
    """Check every file of a run directory against the trajectory schema.

    Lists every problem with its file, line and field. Exit code 0 when the run is valid, 2 when not.
    """
    from trek.imports.schema import validate_run

    problems = validate_run(run_dir)
    for p in problems:
        typer.echo(str(p), err=True)
    if problems:
        typer.echo(f"{run_dir}: {len(problems)} problem(s)", err=True)
        raise typer.Exit(2)
    typer.echo(f"{run_dir}: valid")


#: What ``trek schema`` documents: the format name -> (what it is, a suggested file name).
SCHEMAS = {"trajectory": "one line of a run's answers.jsonl (what `trek import` and `trek validate` check)",
           "pools": "one line of the pools.jsonl that `trek ctrl build --pools` reads and `trek ctrl discover` writes",
           "fake-script": "the --script file of the fake OpenAI server (python -m trek.testing.fake_openai)"}


def schema_command(
    what: str = typer.Argument("trajectory", help="Which format: " + "; ".join(f"{k}: {v}" for k, v in SCHEMAS.items())
                               + "."),
    out: Path = typer.Option(None, "--out", help="Write the schema here instead of printing it."),
) -> None:
    """Print a JSON Schema of one of Trek's file formats (default: the trajectory of answers.jsonl)."""
    import json

    from trek.outputs import atomic_write, check_out

    if what not in SCHEMAS:
        options.fail(f"unknown format {what!r}; choose one of: {', '.join(SCHEMAS)}")
    if what == "trajectory":
        from trek.imports.schema import schema_text

        text = schema_text()
    elif what == "pools":
        from trek.ctrl.pools import Pool

        text = json.dumps({"title": "Trek Ctrl pool (one line of pools.jsonl)", **Pool.model_json_schema()},
                          indent=2, sort_keys=True) + "\n"
    else:
        from trek.testing.fake_openai import SCRIPT_SCHEMA

        text = json.dumps(SCRIPT_SCHEMA, indent=2, sort_keys=True) + "\n"
    if out is None:
        typer.echo(text, nl=False)
    else:
        with options.exit_on(ValueError):
            atomic_write(check_out(out, example="trajectory.schema.json"), text)
        typer.echo(f"wrote {out}")


@pages_app.command("add")
def pages_add_command(
    run_dir: Path = typer.Argument(..., help="The run directory whose page store gets the pages."),
    sources: list[Path] = typer.Argument(..., metavar="SOURCE...", help="Page files: .jsonl (url, text, title, date; "
                                         "other fields are ignored with a note), .html (trafilatura) or .txt."),
    url: str = typer.Option(None, "--url", help="The URL of a single .html or .txt source."),
) -> None:
    """Load page text into RUN_DIR/pages.sqlite, so tracing needs no live fetch.

    Exit code 0 when done, 2 for bad input (nothing is written then).
    """
    from trek.imports.page_files import add_pages, extractor

    notes: list[str] = []
    with options.exit_on(RecordError, ValueError):
        n = add_pages(run_dir, sources, url, notes)
    html = any(s.suffix.lower() in (".html", ".htm") for s in sources)
    typer.echo(f"stored {n} page(s) in {RunDir(run_dir).pages_file}" + (f" (HTML text by {extractor()})" if html else ""))
    for note in notes:
        typer.echo(f"note: {note}")
