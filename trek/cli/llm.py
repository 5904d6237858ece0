"""``trek llm ...`` and ``trek cost``."""

from __future__ import annotations

from pathlib import Path

import typer

from trek.cli import options

app = typer.Typer(rich_markup_mode=None, help="Run model calls through Trek's cached, concurrent, retrying client.", no_args_is_help=True)


@app.command("run")
@options.grouped
def run(
    requests: Path = typer.Argument(..., help="JSONL file: one chat request per line ({'id', 'messages', ...})."),
    out: Path = typer.Option(..., "--out", "-o", help="JSONL file to write, one result per id, in input order."),
    base_url: str = typer.Option(None, "--base-url", envvar="OPENAI_BASE_URL", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1; several, separated by commas, form a pool of replicas."),
    model: str = typer.Option(None, "--model", "-m", help="Model for lines that do not name one."),
    max_connections: int = options.MAX_CONNECTIONS,
    cache: Path = typer.Option(None, "--cache", help="SQLite cache file (default: $TREK_CACHE or llm-cache.sqlite next to --out)."),
    timeout: float = options.TIMEOUT,
    max_retries: int = options.MAX_RETRIES,
    budget: float = options.BUDGET,
    prices: Path = options.PRICES,
    progress: bool = options.PROGRESS,
    transport: str = typer.Option("aiohttp", "--transport", envvar="TREK_HTTP_TRANSPORT",
                                  help="HTTP transport: aiohttp (the default; the SDK's DefaultAioHttpClient, about half the CPU per request at wide fan-out) or httpx (the SDK's own default, the fallback)."),
    spending: options.Spending = options.GROUP,
    batch: options.Batch = options.GROUP,
) -> None:
    """Run a batch of chat requests; re-run the same command to resume.

    The API key comes from OPENAI_API_KEY (never a flag, so it stays out of shell history).
    Exit code 0 when every id is ok, 3 when some are pending (run again to retry them), 4 when
    none is pending but the endpoint rejected some ids for themselves alone (each named by file,
    line and id; the others are answered), 2 on bad input.
    """
    from trek.batch import run_requests
    from trek.errors import FatalLLMError, RecordError
    from trek.roles import EVALUATED, Role

    with options.exit_on(RecordError, ValueError, FatalLLMError, OSError):
        summary = run_requests(
            requests, out, Role(EVALUATED, model, base_url, max_connections=max_connections, prices=prices),
            cache=cache, batch=batch.settings() if batch.enabled else None, timeout=timeout, max_retries=max_retries,
            budget_usd=budget, assume_output=spending.assume_output, progress=progress, transport=transport,
            announce=lambda client: options.say_roles({"model": client}),
            proceed=lambda estimate, ledger: spending.proceed(estimate, budget, ledger=ledger))
    for line in summary.report() if summary else ():
        options.err.print(line, highlight=False)
    if summary and summary.exit_code:
        raise typer.Exit(summary.exit_code)


def cost_command(
    run_dir: Path = typer.Argument(..., help="Run directory holding JSONL records with usage."),
    prices: Path = options.PRICES,
) -> None:
    """Summarize the tokens and dollars recorded in a run directory (the rule of Table 12)."""
    from trek import textable
    from trek.costs import summarize_usage
    from trek.llm.usage import PriceTable
    from trek.types import RecordError

    with options.exit_on(RecordError, ValueError, FileNotFoundError):
        df = summarize_usage(run_dir, PriceTable.load(prices))
    if df.empty:
        typer.echo(f"no usage records found under {run_dir}")
        return
    shown = df.copy()
    shown["cost_usd"] = [("-" if v != v else f"${v:.4f}") for v in shown["cost_usd"]]  # NaN -> tokens only
    for c in shown.columns:
        if c not in ("file", "model", "cost_usd"):
            shown[c] = shown[c].astype(int)
    typer.echo(f"usage in {run_dir} (dollars as recorded at run time, Batch API discount included; else from "
               "the current price table; '-' = no price known)")
    typer.echo(textable.frame(shown.set_index(["file", "model"])))
    ledgers = sorted(run_dir.rglob(".*.spend"))
    if ledgers:
        from trek.llm.ledger import read_ledger

        with options.exit_on(RecordError):
            billed = ", ".join(f"{p.relative_to(run_dir)} ${read_ledger(p):.4f}" for p in ledgers)
        typer.echo(f"billed (the spend ledgers: fresh calls only, what --budget counts): {billed}")
    parts = df[df["file"] != "TOTAL"]["cost_usd"]
    if parts.isna().any():
        typer.echo(f"the total is unknown: {int(parts.isna().sum())} row(s) without a price; the priced rows sum to "
                   f"${parts.sum(skipna=True):.4f}")
