"""``trek local`` (serve the embedded model, say whether it is installed) and ``trek experiments``."""

from __future__ import annotations

import time
from pathlib import Path

import typer

from trek.cli import options
from trek.local import MODEL_NAME, LocalModelUnavailable, LocalServer, find_model_file, server_available

app = typer.Typer(rich_markup_mode=None, help="The embedded local model (llama.cpp server with SmolLM2-135M).", no_args_is_help=True)


@app.command("serve")
def serve(
    port: int = typer.Option(8080, "--port", min=1, max=65535, help="Port on 127.0.0.1."),
    n_ctx: int = typer.Option(4096, "--n-ctx", min=256, help="Context window in tokens."),
) -> None:
    """Start the local model's OpenAI-compatible server and keep it running until Ctrl-C."""
    server = LocalServer(port, n_ctx=n_ctx)
    try:
        server.start()
    except LocalModelUnavailable as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"local model {MODEL_NAME} serving at {server.base_url} (Ctrl-C to stop)")
    try:
        while server.proc is not None and server.proc.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
        typer.echo("stopped")


@app.command("info")
def info() -> None:
    """Say whether the llama.cpp server and the model file are installed."""
    typer.echo(f"llama-cpp-python[server]: {'installed' if server_available() else 'missing'}")
    try:
        typer.echo(f"model: {find_model_file()}")
    except LocalModelUnavailable as e:
        typer.echo(f"model: missing ({e})")


def experiments_command(
    out: Path = typer.Option(Path("data/runs"), "--out", help="Folder of the recorded results: at the end the files an "
                             "earlier run wrote there (its MANIFEST.txt) are replaced, others kept."),
    work: Path = typer.Option(Path("build/experiments"), "--work",
                              help="Working folder: the response cache (kept, so an interrupted run resumes) and passes."),
    replay: Path = typer.Option(None, "--replay", help="Replay log to load first (default: OUT/replay.jsonl.gz)."),
    replay_only: bool = typer.Option(False, "--replay-only",
                                     help="Never start the model: stop if a reply is not in the replay log."),
    fresh: bool = typer.Option(False, "--fresh", help="Empty the working cache first (only the replay log answers)."),
    ctrl_questions: int = typer.Option(None, "--ctrl-questions", min=1,
                                       help="Mini questions used in Ctrl (taking each source style in turn; "
                                       "default: trek.experiments.Settings.ctrl_questions)."),
    judge: str = typer.Option(None, "--judges", help="Who plays every judge role: oracle (the exact judge, the "
                              "model judging alongside for the audit) or model (default: Settings.judge)."),
    old_judge: str = typer.Option(None, "--judge", hidden=True, help="Old spelling of --judges."),
    progress: bool = options.PROGRESS,
) -> None:
    """Run every experiment on TrekBench-Mini with the embedded model, or replay them (`make runs`).

    Wild runs (no search, search-then-read, agentic over the local index) with grading, TrekTrace
    and its verification on the search runs, the Ctrl build (exact fabrications, no model call) and
    every baseline on every condition and ablation, graded; TrekTrace and its verification on a few
    Direct Ctrl runs (Settings.ctrl_trace_runs). Replies come from the replay log where it has them; the model
    (started on demand) answers the rest. Exit code 2 when a stage cannot finish.
    """
    from dataclasses import replace

    from trek.experiments import ExperimentsError, Settings, run_experiments

    try:
        given = {"ctrl_questions": ctrl_questions, "judge": _judges(judge, old_judge)}
        settings = replace(Settings(), **{k: v for k, v in given.items() if v is not None})
        report = run_experiments(out, work=work, replay=replay, replay_only=replay_only, fresh=fresh,
                                 settings=settings, progress=progress, echo=typer.echo)
    except (ExperimentsError, ValueError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    typer.echo(report.summary())  # each stage's line was printed as it finished


def _judges(judges: str | None, old: str | None) -> str | None:
    """``--judges``, or its old spelling ``--judge`` (with a notice)."""
    if old is None:
        return judges
    typer.echo("notice: --judge is the old spelling of --judges in trek experiments; it still works in this release",
               err=True)
    return judges or old
