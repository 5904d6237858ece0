"""``trek wild run``: answer TrekBench-Wild (or the bundled demo) with one search-augmented
system; the work is done by :func:`trek.runner.run_system`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import typer

from trek.cli import options
from trek.pages import AGENT_PAGE_CHARS, PageStore
from trek.search.agent import EFFORTS, SYSTEMS
from trek.types import Question, RecordError

app = typer.Typer(rich_markup_mode=None,
    help="Run search-augmented systems on TrekBench-Wild (or the bundled demo).", no_args_is_help=True
)


@app.callback()
def _group() -> None:
    """Run search-augmented systems on TrekBench-Wild (or the bundled demo)."""


def _load_questions(which: str, data_dir: Path | None, allow_partial: bool = False,
                    ) -> tuple[list[Question], list[Any], dict[str, Any]]:
    """The question set, its documents, and what ``run.json`` records of a partial set."""
    from trek.datasets import load_benchmark
    from trek.datasets.wild import WildBenchmark

    bench = load_benchmark(which, data_dir)
    partial: dict[str, Any] = {}
    if isinstance(bench, WildBenchmark) and options.check_wild(bench, allow_partial):
        partial = {"partial_question_set": bench.counts()}
    # Mini's search corpus: its hand-written pages (generated timeline pages are Ctrl pool material)
    docs = getattr(bench, "corpus", None) or getattr(bench, "documents", []) or []
    return list(bench.questions), list(docs), partial


@app.command("run")
def run(
    model: str = typer.Option(..., "--model", "-m", help="The model to evaluate."),
    run_dir: Path = typer.Option(
        ..., "--run", help="Run directory (created; re-run the same command to resume)."
    ),
    base_url: str = typer.Option(
        None, "--base-url", envvar="OPENAI_BASE_URL", help="OpenAI-compatible endpoint of the model."
    ),
    search: str = typer.Option(
        None, "--search",
        help="none, local, tavily, duckduckgo, openai or proxy:MODEL (default: local for --questions mini, "
        "whose corpus is bundled; required for wild).",
    ),
    system: str = typer.Option(
        "agentic", "--system", help="agentic or search-then-read (no-search when --search none)."
    ),
    effort: str = typer.Option(
        None, "--effort", help="Reasoning effort: low, medium or high (not sent when unset)."
    ),
    questions: str = typer.Option(
        "wild", "--questions", help="wild (TrekBench-Wild) or mini (the bundled offline demo)."
    ),
    data_dir: Path = typer.Option(
        None, "--data-dir", help="Source datasets folder (wild) or demo benchmark folder (mini)."
    ),
    max_connections: int = options.MAX_CONNECTIONS,
    budget: float = options.BUDGET,
    max_rounds: int = typer.Option(
        8, "--max-rounds", min=1, help="Agentic: rounds of tool calls before the answer is forced."
    ),
    results: int = typer.Option(5, "--results", min=1, help="Agentic: results per web_search call."),
    top_k: int = typer.Option(5, "--top-k", min=1, help="Search-then-read: pages read."),
    fetch: bool = typer.Option(
        None,
        "--fetch/--no-fetch",
        help="Fetch pages missing from the page store live, keeping them in pages.sqlite. "
        "Default: on for tavily, duckduckgo, openai and proxy:MODEL; off for local.",
    ),
    page_chars: int = typer.Option(
        AGENT_PAGE_CHARS,
        "--page-chars",
        min=1,
        help="Characters of each page shown to the system (open_url, search-then-read); longer "
        "pages are cut with a marker.",
    ),
    hints: bool = typer.Option(
        False,
        "--hints/--no-hints",
        help="Add evidence advice to the prompts (check dates and sources; pages may be outdated "
        "or in conflict). Off by default: the paper's systems got none.",
    ),
    first_search: bool = typer.Option(
        False,
        "--first-search/--no-first-search",
        help="Agentic: require a web_search call on the first round (tool_choice naming the tool). Off by "
        "default (the paper's systems chose freely); for a small model that otherwise never searches.",
    ),
    fetch_timeout: float = typer.Option(
        20.0, "--fetch-timeout", callback=options.number(0.1), help="Seconds per live page fetch."
    ),
    search_base_url: str = typer.Option(
        None,
        "--search-base-url",
        envvar="TREK_SEARCH_BASE_URL",
        help="Endpoint of the proxy search model (default: --base-url).",
    ),
    proxy_api: str = typer.Option(
        "chat",
        "--proxy-api",
        help="Proxy search through 'chat' (web_search_options) or 'responses' (web_search tool).",
    ),
    limit: int = typer.Option(None, "--limit", min=1, help="Only the first N questions."),
    prompts: Path = options.PROMPTS,
    allow_partial: bool = typer.Option(
        False, "--allow-partial",
        help="wild: run on the questions the source files hold even when a dataset has fewer than the paper's "
        "benchmark (a cut or older file; recorded in run.json). Without it that is an error.",
    ),
    timeout: float = options.TIMEOUT,
    max_retries: int = options.MAX_RETRIES,
    prices: Path = options.PRICES,
    progress: bool = options.PROGRESS,
    dry_run: bool = options.DRY_RUN,
    assume_rounds: int = typer.Option(
        None, "--assume-rounds", min=1,
        help="Estimate: model calls per agentic question (searches per question with --search openai) "
        "(default: a range from 1 to --max-rounds + 1).",
    ),
    assume_output: int = options.ASSUME_OUTPUT,
    confirm_above: float = options.CONFIRM_ABOVE,
    yes: bool = options.YES,
) -> None:
    """Answer the questions with one system and record a trajectory per question.

    Keys come from the environment only: OPENAI_API_KEY (the model), TREK_SEARCH_API_KEY (the
    proxy model; default OPENAI_API_KEY), TAVILY_API_KEY. Exit code 0 when every question has a
    final outcome (answered, or no answer after the final round), 3 when some are pending (run the
    same command again), 4 when none is pending but some failed (a call rejected for that
    question: see the errors), 2 on errors that stop the run.
    """
    from trek.datasets.common import MissingDataError
    from trek.limits import EndpointLimits
    from trek.llm.client import FatalLLMError
    from trek.llm.ledger import ledger_path
    from trek.roles import EVALUATED, Role
    from trek.runner import run_system
    from trek.runs import ANSWERS, RunDir, default_pages_path, default_search_cache_path
    from trek.search import make_backend
    from trek.search.base import FatalSearchError, SearchCache

    if system not in SYSTEMS[:2]:
        options.fail(f"--system must be agentic or search-then-read, not {system!r}")
    if effort is not None and effort not in EFFORTS:
        options.fail(f"--effort must be one of {', '.join(EFFORTS)}, not {effort!r}")
    if proxy_api not in ("chat", "responses"):
        options.fail("--proxy-api must be chat or responses")
    if search is None:
        if questions != "mini":
            options.fail("choose a search backend with --search: tavily, duckduckgo, openai, proxy:MODEL, local (a "
                         "corpus you loaded into the run's page store with trek pages add) or none")
        search = "local"
    from trek import templates

    with options.exit_on(FatalLLMError, FatalSearchError, MissingDataError, RecordError, ValueError, FileNotFoundError), \
            templates.prompts_folder(prompts):
        from trek.runs import RunDir

        RunDir(run_dir).check_target("wild", option="--run")
        qs, docs, partial = _load_questions(questions, data_dir, allow_partial)
        if limit is not None:
            qs = qs[:limit]
        # the model and a proxy search model: one cache, one price table, and on one server one limit
        rd, limits = RunDir(run_dir), EndpointLimits()

        def endpoint(name: str, base_url: str | None, role: str = EVALUATED, **kw: Any) -> Any:
            return rd.client(Role(role, name, base_url, max_connections=max_connections, prices=prices),
                             timeout=timeout, max_retries=max_retries, limits=limits, assume_output=assume_output, **kw)

        client = endpoint(model, base_url, budget_usd=budget)
        if fetch is None:
            fetch = search.strip() not in ("none", "", "local")
        store = PageStore(default_pages_path(run_dir), fetch=fetch, timeout=fetch_timeout)
        if docs:
            store.add_documents(docs)
        del docs  # the store holds them now (a large benchmark's pages are not kept twice)
        if search.strip() == "local" and not any(True for _ in store.pages("corpus")):
            from trek.search.local import EMPTY_CORPUS

            raise FatalSearchError(EMPTY_CORPUS.format(store=store.path))
        search_client, proxy = None, {}  # proxy:MODEL: a client of its own, and --proxy-api
        if search.startswith("proxy:"):
            search_client = endpoint(search.split(":", 1)[1], search_base_url or base_url, "search-proxy",
                                     api_key=os.environ.get("TREK_SEARCH_API_KEY") or None)
            proxy["api"] = proxy_api
        backend = make_backend(search, store=store, client=client, search_client=search_client,
                               cache=SearchCache(default_search_cache_path(run_dir)), max_retries=max_retries, **proxy)
        options.say_roles({"evaluated": client, "search proxy": search_client})
        from trek.dry_run import estimate_wild_run

        settings: dict[str, Any] = dict(
            system=system, effort=effort, store=store, max_rounds=max_rounds, results_per_search=results,
            top_k=top_k, page_chars=page_chars, hints=hints, first_search=first_search,
        )
        est = estimate_wild_run(qs, run_dir, client, backend, assume_rounds=assume_rounds,
                                assume_output=assume_output, **settings)
        spend = options.Spending(dry_run, confirm_above, yes, assume_output)
        if not spend.proceed(est, budget, ledger=ledger_path(run_dir / ANSWERS)):
            return
        run_config = {"question_set": questions, "fetch": fetch, **partial}
        if search_client is not None:
            run_config["search_endpoint"] = search_client.base_url
        summary = run_system(qs, run_dir, client, backend, progress=progress, run_config=run_config, **settings)
    options.err.print(summary.describe(), highlight=False)
    for line in summary.errors[:10]:
        options.err.print(f"  {line}", highlight=False)
    if len(summary.errors) > 10:
        options.err.print(f"  ... and {len(summary.errors) - 10} more (see answers.jsonl)", highlight=False)
    if summary.pending:
        options.err.print(
            f"{summary.pending} questions are pending: run the same command again to retry them.",
            highlight=False,
        )
        raise typer.Exit(3)
    if summary.failed:
        options.err.print(
            f"{summary.failed} questions failed: their calls were rejected (errors above); they count "
            "as unanswered. A re-run tries them again.",
            highlight=False,
        )
        raise typer.Exit(4)
