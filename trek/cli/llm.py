"""``trek llm ...`` and ``trek cost``."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from trek.cli import options

app = typer.Typer(help="Run model calls through Trek's cached, concurrent, retrying client.", no_args_is_help=True)
_err = Console(stderr=True)

#: Default of ``--confirm-above``: a run whose high estimate passes this many dollars asks first.
CONFIRM_ABOVE_USD = 5.0


def confirm_spend(estimate: object, confirm_above: float | None, yes: bool, budget: float | None = None) -> None:
    """Ask before a run whose high estimate exceeds ``confirm_above`` dollars (``--yes`` skips).

    A ``--budget`` is taken as the answer: the run cannot spend more than it, so there is no
    question (a note says when the high estimate passes the budget). Without a terminal to ask
    on, the run stops (exit 2) and says to pass ``--yes``.
    """
    import math
    import sys

    high = float(getattr(estimate, "usd_high", 0.0))
    if math.isnan(high):  # a model without a price: nothing to compare with --confirm-above
        _err.print("note: no dollar estimate (a model has no price in the price table); not asking", highlight=False)
        return
    if budget is not None:
        if high > budget:
            _err.print(f"note: the estimate reaches ${high:.2f}, above --budget ${budget:.2f}: calls stop at the "
                       "budget and the rest stay pending", highlight=False)
        return
    if yes or confirm_above is None or high <= confirm_above:
        return
    _err.print(estimate.describe(), highlight=False)  # type: ignore[attr-defined]
    question = f"this run may cost up to ${high:.2f} (above --confirm-above ${confirm_above:.2f}); start it?"
    if not sys.stdin.isatty():
        _err.print(f"[red]error:[/red] {question} No terminal to ask on: pass --yes to start it, or "
                   "raise --confirm-above.", highlight=False)
        raise typer.Exit(2)
    if not typer.confirm(question, default=False, err=True):
        _err.print("not started.", highlight=False)
        raise typer.Exit(1)


@app.command("run")
def run(
    requests: Path = typer.Argument(..., help="JSONL file: one chat request per line ({'id', 'messages', ...})."),
    out: Path = typer.Option(..., "--out", "-o", help="JSONL file to write, one result per id, in input order."),
    base_url: str = typer.Option(None, "--base-url", envvar="OPENAI_BASE_URL", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1."),
    model: str = typer.Option(None, "--model", "-m", help="Model for lines that do not name one."),
    max_connections: int = options.MAX_CONNECTIONS,
    cache: Path = typer.Option(None, "--cache", help="SQLite cache file [default: $TREK_CACHE or llm-cache.sqlite next to --out]."),
    timeout: float = options.TIMEOUT,
    max_retries: int = options.MAX_RETRIES,
    budget: float = typer.Option(None, "--budget", help="Cap in US dollars on the fresh calls made for this --out, over all runs (resumes included)."),
    prices: Path = options.PRICES,
    progress: bool = options.PROGRESS,
    transport: str = typer.Option("httpx", "--transport", envvar="TREK_HTTP_TRANSPORT",
                                  help="HTTP transport: httpx (the SDK's default) or aiohttp (pip install 'trek[aiohttp]'; faster for wide fan-out)."),
    dry_run: bool = options.DRY_RUN,
    confirm_above: float = options.CONFIRM_ABOVE,
    yes: bool = options.YES,
    assume_output: int = options.ASSUME_OUTPUT,
    batch: bool = options.BATCH,
    batch_poll: float = options.BATCH_POLL,
    batch_wait: bool = typer.Option(True, "--batch-wait/--no-batch-wait", help="--batch: poll until the batches finish, or submit and return."),
) -> None:
    """Run a batch of chat requests; re-run the same command to resume.

    The API key comes from OPENAI_API_KEY (never a flag, so it stays out of shell history).
    Exit code 0 when every id is ok, 3 when some are pending (run again to retry them).
    """
    import os

    from trek.llm.batch import check_output_path, run_batch
    from trek.llm.cache import LLMCache
    from trek.llm.client import FatalLLMError, LLMClient, run_sync
    from trek.llm.usage import PriceTable
    from trek.types import RecordError

    cache_path = cache or (Path(os.environ["TREK_CACHE"]) if os.environ.get("TREK_CACHE") else out.parent / "llm-cache.sqlite")
    try:
        check_output_path(out, requests)  # before the cache file is created beside it
        client = LLMClient(
            model,
            base_url=base_url,
            max_connections=max_connections,
            timeout=timeout,
            max_retries=max_retries,
            cache=LLMCache(cache_path),
            prices=PriceTable.load(prices),
            budget_usd=budget,
            progress=progress,
            transport=transport,
        )
        from trek.llm.batch import load_requests
        from trek.llm.estimate import estimate_requests
        from trek.llm.usage import BATCH_PRICE_FACTOR

        est = estimate_requests(
            [it.request for it in load_requests(requests, default_model=model)], client, label="trek llm run",
            price_factor=BATCH_PRICE_FACTOR if batch else 1.0, assume_output=assume_output,
        )
        if dry_run:
            typer.echo(est.describe())
            return
        confirm_spend(est, confirm_above, yes, budget)
        if batch:
            from trek.llm.openai_batch import run_openai_batch

            summary = run_sync(run_openai_batch(requests, out, client, wait=batch_wait, poll_seconds=batch_poll,
                                                progress=progress))
            _err.print(summary.batch.describe(), highlight=False)
        else:
            summary = run_sync(run_batch(requests, out, client))
    except (RecordError, ValueError, FatalLLMError, OSError) as e:
        _err.print(f"[red]error:[/red] {e}", highlight=False)
        raise typer.Exit(2) from None
    _err.print(summary.describe(), highlight=False)
    if client.usage.calls:
        spent = client.spent_text()
        _err.print(f"tokens: {client.usage.prompt_tokens} in, {client.usage.completion_tokens} out; spent {spent}"
                   + (f" (${summary.spent_usd:.4f} for this output over all runs)" if budget is not None else ""),
                   highlight=False)
    if summary.pending:
        _err.print(f"{summary.pending} ids are pending: run the same command again to retry them.", highlight=False)
        raise typer.Exit(3)


def cost_command(
    run_dir: Path = typer.Argument(..., help="Run directory holding JSONL records with usage."),
    prices: Path = options.PRICES,
) -> None:
    """Summarize the tokens and dollars recorded in a run directory."""
    from trek.llm.cost import summarize_usage
    from trek.llm.usage import PriceTable
    from trek.types import RecordError

    try:
        df = summarize_usage(run_dir, PriceTable.load(prices))
    except (RecordError, ValueError, FileNotFoundError) as e:
        _err.print(f"[red]error:[/red] {e}", highlight=False)
        raise typer.Exit(2) from None
    if df.empty:
        typer.echo(f"no usage records found under {run_dir}")
        return
    shown = df.copy()
    shown["cost_usd"] = [("-" if v != v else f"${v:.4f}") for v in shown["cost_usd"]]  # NaN -> tokens only
    for c in shown.columns:
        if c not in ("file", "model", "cost_usd"):
            shown[c] = shown[c].astype(int)
    typer.echo(f"usage in {run_dir} (dollars from the current price table; '-' = model without a price)")
    typer.echo(shown.to_string(index=False))
