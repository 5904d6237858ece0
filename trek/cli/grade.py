"""``trek grade``: grade a run's answers with each dataset's own protocol; the work is done by
:func:`trek.grading.run_grading`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from trek.cli import options
from trek.graders.common import explain_unsupported_parameter, parse_judge_params
from trek.grading import estimate_grading, run_grading, run_grading_batch
from trek.llm.cache import LLMCache, default_cache_path
from trek.llm.client import LLMClient
from trek.types import RecordError


def format_accuracy(table: Any) -> str:
    """A plain-text rendering of :func:`trek.analysis.accuracy_by_dataset`'s table: accuracy over
    every question with its interval, the counts behind it, and accuracy over graded answers."""
    shown = table.copy()
    pct = lambda v: "-" if v != v else f"{v:.1f}"  # noqa: E731
    shown["accuracy"] = [pct(v) for v in table["accuracy"]]
    shown["95% CI"] = [
        ("-" if lo != lo else f"[{lo:.1f}, {hi:.1f}]") for lo, hi in zip(table["ci_low"], table["ci_high"], strict=True)
    ]
    shown["acc_graded"] = [pct(v) for v in table["acc_graded"]]
    cols = ["accuracy", "95% CI", "n", "answered", "graded", "correct", "unparsed", "pending", "acc_graded"]
    return shown[cols].to_string()


def grade_command(
    run_dir: Path = typer.Argument(..., help="Run directory with questions.jsonl and answers.jsonl."),
    judge: str = typer.Option(..., "--judge", help="Judge model name, e.g. gpt-4.1-mini."),
    base_url: str = typer.Option(None, "--base-url", envvar="OPENAI_BASE_URL", help="OpenAI-compatible endpoint of the judge."),
    max_connections: int = options.MAX_CONNECTIONS,
    prompts: Path = options.PROMPTS,
    max_retries: int = options.MAX_RETRIES,
    seed: int = typer.Option(None, "--seed", help="Sampling seed sent to the judge, where the endpoint supports one."),
    judge_param: list[str] = options.JUDGE_PARAM,
    progress: bool = options.PROGRESS,
    dry_run: bool = options.DRY_RUN,
    confirm_above: float = options.CONFIRM_ABOVE,
    yes: bool = options.YES,
    assume_output: int = options.ASSUME_OUTPUT,
    batch: bool = options.BATCH,
    batch_poll: float = options.BATCH_POLL,
    batch_wait: bool = typer.Option(True, "--batch-wait/--no-batch-wait", help="--batch: poll until the batches finish, or submit and return."),
    prices: Path = options.PRICES,
) -> None:
    """Grade a run's answers with each dataset's judge and print the accuracy table.

    Re-running resumes: finished grades are kept, pending ones are retried, and judge replies
    come from the cache. The API key comes from OPENAI_API_KEY. Accuracy is over every question
    of the run (unanswered, pending and unparsed count as not correct). Exit code 0 when every
    answered question has a decided grade, 2 for bad input, 3 while some grades are pending or
    unparsed (run the same command again to retry pending ones).
    """
    from trek.analysis import accuracy_by_dataset
    from trek.cli.llm import confirm_spend
    from trek.llm.client import FatalLLMError
    from trek.llm.usage import PriceTable

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
            prices=PriceTable.load(prices),
        )
        settings = parse_judge_params(judge_param)
        if seed is not None:
            settings["seed"] = seed
        est = estimate_grading(run_dir, client, prompts_dir=prompts, batch=batch, assume_output=assume_output, **settings)
        if dry_run:
            typer.echo(est.describe())
            return
        confirm_spend(est, confirm_above, yes)
        if batch:
            report, br = run_grading_batch(run_dir, client, prompts_dir=prompts, progress=progress, wait=batch_wait,
                                           poll_seconds=batch_poll, **settings)
            typer.echo(br.describe(), err=True)
        else:
            report = run_grading(run_dir, client, prompts_dir=prompts, progress=progress, **settings)
    except FatalLLMError as e:
        hint = explain_unsupported_parameter(str(e), sources={"seed": "--seed"})
        typer.echo(f"error: {e}" + (f"\nhint: {hint}" if hint else ""), err=True)
        raise typer.Exit(2) from None
    except (RecordError, ValueError, FileNotFoundError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    typer.echo(report.describe(), err=True)
    typer.echo(format_accuracy(accuracy_by_dataset(run_dir)))
    if report.pending_grades or report.unparsed_grades:
        typer.echo(
            f"not finished: {report.pending_grades} pending and {report.unparsed_grades} unparsed grade(s)",
            err=True,
        )
        raise typer.Exit(3)
