"""``trek wild run``: answer TrekBench-Wild (or the bundled demo) with one search-augmented
system; the work is done by :func:`trek.wild.run_wild`."""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any

import typer

from trek.cli import options
from trek.pages import AGENT_PAGE_CHARS
from trek.roles import EVALUATED, Role
from trek.wild import WildSettings

app = typer.Typer(rich_markup_mode=None,
    help="Run search-augmented systems on TrekBench-Wild (or the bundled demo).", no_args_is_help=True
)


@app.callback()
def _group() -> None:
    """Run search-augmented systems on TrekBench-Wild (or the bundled demo)."""


@dataclasses.dataclass(frozen=True)
class WildOptions:
    """The options of ``trek wild run`` after the model and the run, in their ``--help`` order;
    :meth:`settings` gives the library's :class:`~trek.wild.WildSettings`."""

    search: str = typer.Option(None, "--search", help="none, local, tavily, duckduckgo, openai or proxy:MODEL "
                               "(default: local for --questions mini, whose corpus is bundled; required for wild).")
    system: str = typer.Option("agentic", "--system",
                               help="agentic or search-then-read (no-search when --search none).")
    effort: str = typer.Option(None, "--effort", help="Reasoning effort: low, medium or high (not sent when unset).")
    questions: str = typer.Option("wild", "--questions",
                                  help="wild (TrekBench-Wild) or mini (the bundled offline demo).")
    data_dir: Path = typer.Option(None, "--data-dir",
                                  help="Source datasets folder (wild) or demo benchmark folder (mini).")
    max_connections: int = options.MAX_CONNECTIONS
    budget: float = options.BUDGET
    max_rounds: int = typer.Option(8, "--max-rounds", min=1,
                                   help="Agentic: rounds of tool calls before the answer is forced.")
    results: int = typer.Option(5, "--results", min=1, help="Agentic: results per web_search call.")
    top_k: int = typer.Option(5, "--top-k", min=1, help="Search-then-read: pages read.")
    fetch: bool = typer.Option(None, "--fetch/--no-fetch", help="Fetch pages missing from the page store live, "
                               "keeping them in pages.sqlite. Default: on for tavily, duckduckgo, openai and "
                               "proxy:MODEL; off for local.")
    page_chars: int = typer.Option(AGENT_PAGE_CHARS, "--page-chars", min=1, help="Characters of each page shown to "
                                   "the system (open_url, search-then-read); longer pages are cut with a marker.")
    hints: bool = typer.Option(False, "--hints/--no-hints", help="Add evidence advice to the prompts (check dates "
                               "and sources; pages may be outdated or in conflict). Off by default: the paper's "
                               "systems got none.")
    first_search: bool = typer.Option(False, "--first-search/--no-first-search", help="Agentic: require a web_search "
                                      "call on the first round (tool_choice naming the tool). Off by default (the "
                                      "paper's systems chose freely); for a small model that otherwise never "
                                      "searches.")
    fetch_timeout: float = typer.Option(20.0, "--fetch-timeout", callback=options.number(0.1),
                                        help="Seconds per live page fetch.")
    search_proxy_base_url: str = typer.Option(None, "--search-proxy-base-url", envvar="TREK_SEARCH_BASE_URL",
                                              metavar="URL", help="Endpoint of the proxy search model "
                                              "(default: --base-url).")
    old_search_base_url: str = typer.Option(None, "--search-base-url", hidden=True,
                                            help="Old spelling of --search-proxy-base-url.")
    proxy_api: str = typer.Option("chat", "--proxy-api", help="Proxy search through 'chat' (web_search_options) "
                                  "or 'responses' (web_search tool).")
    limit: int = typer.Option(None, "--limit", min=1, help="Only the first N questions.")
    prompts: Path = options.PROMPTS
    allow_partial: bool = typer.Option(False, "--allow-partial", help="wild: run on the questions the source files "
                                       "hold even when a dataset has fewer than the paper's benchmark (a cut or "
                                       "older file; recorded in run.json). Without it that is an error.")
    timeout: float = options.TIMEOUT
    max_retries: int = options.MAX_RETRIES
    prices: Path = options.PRICES
    progress: bool = options.PROGRESS
    dry_run: bool = options.DRY_RUN
    assume_rounds: int = typer.Option(None, "--assume-rounds", min=1, help="Estimate: model calls per agentic "
                                      "question (searches per question with --search openai) (default: a range "
                                      "from 1 to --max-rounds + 1).")
    assume_output: int = options.ASSUME_OUTPUT
    confirm_above: float = options.CONFIRM_ABOVE
    yes: bool = options.YES

    def settings(self) -> WildSettings:
        system = {"system": self.system, "effort": self.effort, "max_rounds": self.max_rounds,
                  "results_per_search": self.results, "top_k": self.top_k, "page_chars": self.page_chars,
                  "hints": self.hints, "first_search": self.first_search}
        return WildSettings(**{f.name: getattr(self, f.name) for f in dataclasses.fields(WildSettings)
                               if f.name != "system"}, system=system)

    def spending(self) -> options.Spending:
        return options.Spending(self.dry_run, self.confirm_above, self.yes, self.assume_output)

    def proxy_base_url(self) -> str | None:
        """``--search-proxy-base-url`` (or its old spelling, with a notice)."""
        if self.old_search_base_url is None:
            return self.search_proxy_base_url
        if self.search_proxy_base_url is not None:
            options.fail("--search-base-url is the old spelling of --search-proxy-base-url: give only "
                         "--search-proxy-base-url")
        typer.echo("notice: --search-base-url is the old spelling of --search-proxy-base-url; it still works in "
                   "this release", err=True)
        return self.old_search_base_url


@app.command("run")
@options.grouped
def run(
    model: str = typer.Option(..., "--model", "-m", help="The model to evaluate."),
    run_dir: Path = typer.Option(..., "--run", help="Run directory (created; re-run the same command to resume)."),
    base_url: str = typer.Option(None, "--base-url", envvar="OPENAI_BASE_URL",
                                 help="OpenAI-compatible endpoint of the model."),
    o: WildOptions = options.GROUP,
) -> None:
    """Answer the questions with one system and record a trajectory per question.

    Keys come from the environment only: OPENAI_API_KEY (the model), TREK_SEARCH_API_KEY (the
    proxy model; default OPENAI_API_KEY), TAVILY_API_KEY. Exit code 0 when every question has a
    final outcome (answered, or no answer after the final round), 3 when some are pending (run the
    same command again), 4 when none is pending but some failed (a call rejected for that
    question: see the errors), 2 on errors that stop the run.
    """
    from trek.datasets.common import MissingDataError
    from trek.search.base import FatalSearchError
    from trek.wild import run_wild

    with options.exit_on(FatalSearchError, MissingDataError, ValueError, FileNotFoundError):
        spend = o.spending()
        summary = run_wild(run_dir, Role(EVALUATED, model, base_url, max_connections=o.max_connections,
                                         prices=o.prices), o.settings(), search_proxy_base_url=o.proxy_base_url(),
                           budget_usd=o.budget, prompts_dir=o.prompts, progress=o.progress,
                           proceed=lambda est, ledger: spend.proceed(est, o.budget, ledger=ledger),
                           announce=options.say_roles, warn=lambda text: options.err.print(text, highlight=False))
    if summary is not None:
        _finish(summary)


def _finish(summary: Any) -> None:
    """Print the summary and its first errors; exit 3 while questions are pending, 4 when some failed."""
    say = functools.partial(options.err.print, highlight=False)
    say(summary.describe())
    for line in summary.errors[:10]:
        say(f"  {line}")
    if len(summary.errors) > 10:
        say(f"  ... and {len(summary.errors) - 10} more (see answers.jsonl)")
    if summary.pending:
        say(f"{summary.pending} questions are pending: run the same command again to retry them.")
        raise typer.Exit(3)
    if summary.failed:
        say(f"{summary.failed} questions failed: their calls were rejected (errors above); they count as "
            "unanswered. A re-run tries them again.")
        raise typer.Exit(4)
