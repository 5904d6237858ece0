"""``trek wild run``: answer TrekBench-Wild (or the bundled demo) with one search-augmented
system; the work is done by :func:`trek.answering.wild.run_wild`."""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any

import typer

from trek.answering.wild import WildSettings
from trek.cli import options
from trek.pages import AGENT_PAGE_CHARS
from trek.roles import EVALUATED, Role, RoleError, role_options

app = typer.Typer(rich_markup_mode=None,
    help="Run search-augmented systems on TrekBench-Wild (or the bundled demo).", no_args_is_help=True
)


@app.callback()
def _group() -> None:
    """Run search-augmented systems on TrekBench-Wild (or the bundled demo)."""


@dataclasses.dataclass(frozen=True)
class WildOptions:
    """The options of ``trek wild run`` after the model and the run, in their ``--help`` order;
    :meth:`settings` gives the library's :class:`~trek.answering.wild.WildSettings`."""

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
    limit: int = typer.Option(None, "--limit", min=1, metavar="N", help="Only the first N questions.")
    epochs: int = typer.Option(1, "--epochs", min=1, metavar="N", help="Answer every question N times: epoch 1 in "
                               "RUN, epoch k in RUN/epoch-k (each a run of its own; accuracy per epoch and pooled "
                               "in trek grade RUN).")
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


#: The evaluated model: --model, --base-url, --param and the common sampling flags (the one factory).
MODEL = role_options(EVALUATED, required=True, model_flags=("-m",), sampling=True, base_url_env="OPENAI_BASE_URL",
                     model_help="The model to evaluate.", base_url_help="OpenAI-compatible endpoint of the model.")
#: Options a re-run (``trek retry``) does not take from the recorded invocation.
NOT_RECORDED = ("dry_run", "yes", "confirm_above", "progress", "budget")


@app.command("run")
@options.grouped
def run(
    model: MODEL = options.GROUP,
    run_dir: Path = typer.Option(..., "--run", help="Run directory (created; re-run the same command to resume)."),
    o: WildOptions = options.GROUP,
) -> None:
    """Answer the questions with one system and record a trajectory per question.

    Keys come from the environment only: OPENAI_API_KEY (the model), TREK_SEARCH_API_KEY (the
    proxy model; default OPENAI_API_KEY), TAVILY_API_KEY. --epochs N answers every question N
    times: epoch 1 in RUN, epoch k in RUN/epoch-k, each a run of its own (trek grade RUN grades
    them all and prints the accuracy per epoch and pooled). Exit code 0 when every question has a
    final outcome (answered, or no answer after the final round), 3 when some are pending (run the
    same command again, or trek retry RUN), 4 when none is pending but some failed (a call rejected
    for that question: see the errors), 2 on errors that stop the run.
    """
    with options.exit_on(RoleError):
        role = model.role(o.prices, o.max_connections)
    run_epochs(run_dir, role, o)


def recorded(role: Role, o: WildOptions) -> dict[str, Any]:
    """What ``run.json`` records of this invocation for ``trek retry`` (no endpoint, no key)."""
    from trek.llm.client import endpoint_identity

    opts = {f.name: getattr(o, f.name) for f in dataclasses.fields(o) if f.name not in NOT_RECORDED}
    opts = {k: str(v) if isinstance(v, Path) else v for k, v in opts.items()}
    for k in ("search_proxy_base_url", "old_search_base_url"):  # never a credential in run.json
        opts[k] = endpoint_identity(opts[k]) if opts[k] else None
    return {"invocation": {"command": "trek wild run", "model": role.model, "params": dict(role.params),
                           "options": opts}}


def run_epochs(run_dir: Path, role: Role, o: WildOptions) -> None:
    """Run every epoch of ``o.epochs`` (:mod:`trek.epochs`) and finish with their summaries."""
    from trek.answering.wild import run_wild
    from trek.datasets.common import MissingDataError
    from trek.epochs import epoch_dir
    from trek.search.base import FatalSearchError

    settings = o.settings()
    if role.params:
        settings = dataclasses.replace(settings, system={**settings.system, "params": dict(role.params)})
    spend, summaries = o.spending(), []
    for k in range(1, o.epochs + 1):
        if o.epochs > 1:
            options.err.print(f"epoch {k} of {o.epochs}: {epoch_dir(run_dir, k)}", highlight=False)
        record = {**recorded(role, o), "epoch": k, "epochs": o.epochs}
        try:
            with options.exit_on(FatalSearchError, MissingDataError, ValueError, FileNotFoundError):
                summary = run_wild(epoch_dir(run_dir, k), role, settings, search_proxy_base_url=o.proxy_base_url(),
                                   budget_usd=o.budget, prompts_dir=o.prompts, progress=o.progress, epoch=k,
                                   proceed=lambda est, ledger: spend.proceed(est, o.budget, ledger=ledger),
                                   announce=options.say_roles if k == 1 else lambda roles: None, record=record,
                                   warn=lambda text: options.err.print(text, highlight=False))
        except KeyboardInterrupt:
            options.interrupted(kept_answers(epoch_dir(run_dir, k)))
        if summary is not None:
            summaries.append(summary)
    if summaries:
        _finish(summaries)


def kept_answers(run_dir: Path) -> str:
    """What an interrupted Wild run keeps: its final answers in ``answers.jsonl`` (the last record
    of each question; pending ones are asked again on resume) out of its questions."""
    from trek import runs

    rd = runs.RunDir(run_dir)
    last = {str(r.get("question_id")): r.get("status", "ok") for r in rd.raw(runs.ANSWERS)}
    final = sum(s != "pending" for s in last.values())
    total = sum(1 for _ in rd.raw(runs.QUESTIONS))
    return f"{final} of {total or '?'} answers kept in {run_dir / runs.ANSWERS}"


def _finish(summaries: list[Any]) -> None:
    """Print the summaries and their first errors; exit 3 while questions are pending, 4 when some failed."""
    say = functools.partial(options.err.print, highlight=False, soft_wrap=True)
    errors: list[str] = []
    for summary in summaries:
        say(summary.describe())
        errors += summary.errors
    for line in errors[:10]:
        say(f"  {line}")
    if len(errors) > 10:
        say(f"  ... and {len(errors) - 10} more (see answers.jsonl)")
    pending, failed = sum(s.pending for s in summaries), sum(s.failed for s in summaries)
    if pending:
        say(f"{pending} questions are pending: run the same command again (or trek retry RUN) to retry them.")
        raise typer.Exit(3)
    if failed:
        say(f"{failed} questions failed: their calls were rejected (errors above); they count as "
            "unanswered. A re-run (or trek retry RUN) tries them again.")
        raise typer.Exit(4)
