"""``trek ctrl run``: the Ctrl baselines over frozen contexts, one run directory per (model, method,
condition); the work is done by :func:`trek.rag.session.run_ctrl_grid`."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import typer

from trek.cli import options
from trek.rag.session import CtrlSettings
from trek.roles import EVALUATED, Role, role_options

__all__ = ["ctrl_run_command", "DEFAULT_METHODS", "DEFAULT_CONDITIONS"]

DEFAULT_METHODS = "direct,rerank,filter,structured"
DEFAULT_CONDITIONS = "OO,MND,SAA,SBA,GOLD"


def _split(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


JUDGE = role_options("judge", base_url_env="TREK_JUDGE_BASE_URL",
                     model_help="Grade every run afterwards with this judge model (oracle: the exact judge, from the "
                     "contexts' annotations; no model call).",
                     base_url_help="Endpoint of the judge (default: $OPENAI_BASE_URL, else OpenAI's).")
AUDIT = role_options("audit-judge", model_help="With --judge oracle: also ask this model each verdict the exact judge "
                     "gave and record its answers beside them (they decide nothing).")
RERANKER = role_options("reranker", default="wordllama", params=False, base_url_env="TREK_RERANK_BASE_URL",
                        old={"--rerank-scorer": "model", "--rerank-base-url": "base-url"},
                        model_help="Rerank relevance: wordllama (offline), rerank:MODEL or score:MODEL (an endpoint).",
                        base_url_help="Endpoint of rerank:/score: rerankers (e.g. vLLM's http://host:8000/v1).")


@dataclasses.dataclass(frozen=True)
class Grid:
    """The grid's methods and conditions, its questions and the answer calls' parameters."""

    methods: str = typer.Option(DEFAULT_METHODS, "--methods",
                                help="Comma-separated: direct, rerank, filter, structured.")
    conditions: str = typer.Option(DEFAULT_CONDITIONS, "--conditions",
                                   help="Comma-separated conditions (ablations too, e.g. OO:gold=first,OO:k=5).")
    questions: Path = typer.Option(None, "--questions",
                                   help="questions.jsonl or pools.jsonl (default: the one beside CONTEXTS).")
    all_on_gold: bool = typer.Option(False, "--all-on-gold", help="Run every method on GOLD (default: Direct only).")
    effort: str = typer.Option(None, "--effort", help="reasoning_effort sent with every call (not sent when unset).")
    temperature: float = typer.Option(None, "--temperature", callback=options.number(0, 2),
                                      help="Sampling temperature (not sent when unset).")
    max_tokens: int = typer.Option(None, "--max-tokens", min=1, help="max_completion_tokens (not sent when unset).")


@dataclasses.dataclass(frozen=True)
class Methods:
    """The settings of Rerank, Filter and Structured (:meth:`settings`: by method)."""

    sigma_days: float = typer.Option(365.0, "--sigma-days", callback=options.POSITIVE,
                                     help="Rerank: width of the Gaussian temporal decay, in days.")
    combine: str = typer.Option("product", "--combine",
                                help="Rerank: product or sum of relevance and temporal weight.")
    alpha: float = typer.Option(0.5, "--alpha", callback=options.number(0, 1),
                                help="Rerank with --combine sum: weight of relevance.")
    top_k: int = typer.Option(10, "--top-k", min=1, help="Rerank: documents passed to the answer prompt.")
    after_cutoff: str = typer.Option("decay", "--after-cutoff",
                                     help="Rerank: documents dated after the cutoff decay or get zero.")
    empty_fallback: str = typer.Option("all", "--empty-fallback",
                                       help="Filter: on an empty or unreadable selection answer from all or none.")
    max_reasks: int = typer.Option(2, "--max-reasks", min=0,
                                   help="Re-asks of an unreadable JSON reply (Filter, Structured).")
    structured_json: bool = typer.Option(
        False, "--structured-json/--no-structured-json",
        help="Structured: ask for the final answer as JSON (contrast, answer), schema-constrained where the "
        "endpoint supports it, instead of the #Answer: line. Off by default (the paper's format).")


    def settings(self) -> dict[str, dict[str, Any]]:
        return {"rerank": {"sigma_days": self.sigma_days, "combine": self.combine, "alpha": self.alpha,
                           "k": self.top_k, "after_cutoff": self.after_cutoff},
                "filter": {"empty_fallback": self.empty_fallback, "max_reasks": self.max_reasks},
                "structured": {"max_reasks": self.max_reasks, "json_answer": self.structured_json}}


@dataclasses.dataclass(frozen=True)
class Calls:
    """How the model and the judges are called and charged, and the prompts they get."""

    max_connections: int | None = options.MAX_CONNECTIONS
    budget: float | None = options.BUDGET
    timeout: float = options.TIMEOUT
    max_retries: int = options.MAX_RETRIES
    prices: Path | None = options.PRICES
    prompts: Path | None = options.PROMPTS

    def model(self, model: str, base_url: str | None) -> Role:
        return Role(EVALUATED, model, base_url, max_connections=self.max_connections, prices=self.prices)


def _settings(grid: Grid, methods: Methods, grader: str | None, calls: Calls, assume_output: int) -> CtrlSettings:
    return CtrlSettings(**{**dataclasses.asdict(grid), "methods": _split(grid.methods),
                           "conditions": _split(grid.conditions)}, method_settings=methods.settings(), grader=grader,
                        timeout=calls.timeout, max_retries=calls.max_retries, assume_output=assume_output)


@options.grouped
def ctrl_run_command(
    contexts: Path = typer.Argument(..., help="contexts.jsonl written by `trek ctrl build`."),
    model: str = typer.Option(..., "--model", "-m", help="The model to evaluate."),
    runs: Path = typer.Option(..., "--runs", help="Folder for the run directories (re-run the same command to resume)."),
    base_url: str = options.BASE_URL,
    grid: Grid = options.GROUP,
    reranker: RERANKER = options.GROUP,
    methods: Methods = options.GROUP,
    judge: JUDGE = options.GROUP,
    audit: AUDIT = options.GROUP,
    grader: str | None = options.GRADER,
    calls: Calls = options.GROUP,
    spending: options.Spending = options.GROUP,
    progress: bool = options.PROGRESS,
) -> None:
    """Run the Ctrl baselines on frozen contexts and record one standard run per (model, method, condition).

    Model calls per question: direct 1, rerank 1, filter 2, structured 2 (plus re-asks of unreadable
    replies); gold-only is direct on GOLD. With --judge every run is graded and the accuracy grid
    (method x condition) is printed. --budget is one ceiling for the model and the judge over every
    invocation on RUNS (recorded in RUNS/.ctrl.spend). Exit code 0 when every answer and grade is
    in, 3 when some answers are pending or grades pending or failed (run the same command again),
    4 when only answers the endpoint rejected (failed) are left, 2 on bad input.
    """
    from trek.audit import audit_grading
    from trek.rag.session import run_ctrl_grid

    with options.exit_on(ValueError, FileNotFoundError, TypeError):
        j = judge.role()
        report = run_ctrl_grid(
            contexts, runs, calls.model(model, base_url), _settings(grid, methods, grader, calls, spending.assume_output),
            judge=j if j.model else None, audit=options.or_role(audit.role(), j, model=False),
            reranker=reranker.role(), budget_usd=calls.budget, prompts_dir=calls.prompts, dry_run=spending.dry_run,
            progress=progress, announce=options.say_roles, echo=typer.echo,
            proceed=lambda est, ledger: spending.proceed(est, calls.budget, ledger=ledger),
            say=lambda text: options.err.print(text, highlight=False), audit_with=audit_grading)
    if report is not None:
        _finish(report)


def _finish(report: Any) -> None:
    """Print the accuracy grid; exit 3 while answers are pending or grades pending or failed, 4
    when only failed answers are left."""
    say = lambda text: options.err.print(text, highlight=False)  # noqa: E731
    summary = report.summary
    if report.grid:
        typer.echo(report.describe_grid())
    if report.ungraded:
        say(f"{report.ungraded} grade(s) pending or failed: run the same command again to retry them.")
    if summary.pending or summary.failed:
        for line in summary.errors[:5]:
            say(f"  {line}")
        say(f"{summary.pending} answers pending, {summary.failed} failed: run the same command again to retry them.")
    if summary.pending or report.ungraded:
        raise typer.Exit(3)
    if summary.failed:  # nothing pending: only answers the endpoint rejected (docs/exit-codes.md)
        raise typer.Exit(4)
