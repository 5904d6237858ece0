"""``trek ctrl``: build TrekBench-Ctrl contexts and audit them."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import typer

from trek.cli import options
from trek.ctrl import conditions as cond
from trek.roles import role_options

app = typer.Typer(rich_markup_mode=None, help="TrekBench-Ctrl: distractor pools, synthetic distractors and frozen contexts.",
                  no_args_is_help=True)

FABRICATOR = role_options("fabricator", old={"--model": "model", "-m": "model", "--base-url": "base-url"},
                          model_help="Model that fabricates documents (for pools without annotated answer spans "
                          "under --fabrication auto).")
EMBEDDER = role_options("embedder", default="wordllama", params=False, old={"--embeddings": "model"},
                        model_help="'wordllama' (offline) or 'openai:MODEL'.",
                        base_url_help="Embeddings endpoint for openai:MODEL (default: $OPENAI_BASE_URL, else OpenAI).")
#: ``trek ctrl calibrate`` calls only the embedder: its old ``--base-url`` was the embedder's.
CALIBRATED = role_options("embedder", default="wordllama", params=False,
                          old={"--embeddings": "model", "--base-url": "base-url"},
                          model_help="'wordllama' (offline) or 'openai:MODEL'.",
                          base_url_help="Embeddings endpoint for openai:MODEL (default: $OPENAI_BASE_URL, else "
                          "OpenAI).")
DISCOVERY = role_options("discovery", old={"--model": "model", "-m": "model", "--base-url": "base-url"},
                         model_help="Model that proposes queries and verifies pages (required).")


def _errors() -> tuple[type[Exception], ...]:
    """What the Ctrl commands report as ``error: ...`` (besides :func:`options.always_clear`)."""
    from trek.ctrl.common import CtrlError
    from trek.search import SearchError

    return (CtrlError, ValueError, FileNotFoundError, SearchError)


def _say(line: str) -> None:
    options.err.print(line, highlight=False)


def _finish(done: Any) -> None:
    """Print what a job says (:class:`trek.ctrl.jobs.Outcome`) and stop with its exit code."""
    for line, err in done.lines if done is not None else ():
        typer.echo(line, err=err)
    if done is not None and done.exit_code:
        raise typer.Exit(done.exit_code)


def _fabrication(role: Any, fabrication: str) -> tuple[str, Any]:
    """``--fabrication`` and the fabricator's options, the old ``--fabricator auto|exact|model|none``
    (now ``--fabrication``) taken with a notice."""
    from trek.ctrl.fabrication import FABRICATORS

    old = role.fabricator
    if old in FABRICATORS and fabrication == "auto":
        typer.echo(f"notice: --fabricator {old} is the old spelling of --fabrication {old}; it still works in this "
                   "release", err=True)
        return old, dataclasses.replace(role, fabricator=None)
    return fabrication, role


_QUESTIONS = typer.Option(None, "--questions", help="Comma-separated question ids to keep (default: all).")
_MINI_DIR = typer.Option(None, "--mini-dir", help="TrekBench-Mini folder (default: bundled data/mini).")
_FABRICATION = ("auto: exact edits where gold pages have annotated answer spans (TrekBench-Mini), the --fabricator "
                "model elsewhere; exact: only exact edits (no model); model: only the model; none: no fabrication.")
_EFFORT = "reasoning_effort sent with {} calls (e.g. high; same as --{}-param reasoning_effort=...)."


@dataclasses.dataclass(frozen=True)
class BuildSource:
    """Where ``trek ctrl build`` takes its pools from."""

    source: str = typer.Option("mini", "--source", help="Where pools come from: mini, longseal, pools, wild.")
    mini_dir: Path = _MINI_DIR
    longseal: Path = typer.Option(None, "--longseal", help="LongSeal parquet file (for --source longseal).")
    pools_file: Path = typer.Option(None, "--pools", help="pools.jsonl to rebuild from (for --source pools).")
    questions: str = _QUESTIONS


@dataclasses.dataclass(frozen=True)
class BuildKnobs:
    """What ``trek ctrl build`` makes: conditions, quotas, synthetic documents, how contexts show."""

    conditions: str = typer.Option(",".join(cond.ALL_CONDITIONS), "--conditions",
                                   help="Comma-separated conditions to write, in order.")
    historical: int = typer.Option(20, "--historical", min=0, help="Historical (outdated) documents kept per pool.")
    relevance: int = typer.Option(10, "--relevance", min=0, help="Relevance documents kept per pool.")
    republications: int = typer.Option(5, "--republications", min=0, help="Republication documents per question.")
    fabrications: int = typer.Option(5, "--fabrications", min=0, help="Fabrication documents per question.")
    attempts: int = typer.Option(3, "--attempts", min=1, help="Fabrication attempts per slot (retries with feedback).")
    min_similarity: float = typer.Option(None, "--min-similarity", callback=options.number(-1, 1),
                                         help="Embedding similarity floor for fabrications (default: calibrated per "
                                              "embedder: 0.90 for openai:text-embedding-3-small as in the paper, "
                                              "0.89 for wordllama; see 'trek ctrl calibrate').")
    effort: str = typer.Option(None, "--effort", help=_EFFORT.format("fabrication", "fabricator"))
    tokens: bool = typer.Option(True, "--tokens/--no-tokens", help="Count o200k_base tokens of each context.")
    show_urls: str = typer.Option("cued", "--show-urls",
                                  help="Where source URLs are shown: 'cued' (the paper: only SAA and "
                                       "SAA:domainswap) or 'all' (every condition but SBA).")


@dataclasses.dataclass(frozen=True)
class DiscoverSource:
    """Which questions ``trek ctrl discover`` works on, and their starting pools."""

    source: str = typer.Option("wild", "--source", help="Questions and starting pools: wild, mini, longseal, pools.")
    data_dir: Path = typer.Option(None, "--data-dir",
                                  help="Source datasets for --source wild (default: $TREK_DATA_DIR).")
    mini_dir: Path = _MINI_DIR
    longseal: Path = typer.Option(None, "--longseal", help="LongSeal parquet: SealQA pools for wild/longseal.")
    pools_file: Path = typer.Option(None, "--pools", help="pools.jsonl to extend (for --source pools).")
    questions: str = _QUESTIONS
    allow_partial: bool = typer.Option(False, "--allow-partial",
                                       help="--source wild: go on when a source file holds fewer questions than the "
                                       "paper's benchmark (without it that is an error).")


@dataclasses.dataclass(frozen=True)
class DiscoverPages:
    """Where ``trek ctrl discover`` reads pages from."""

    pages: Path = typer.Option(None, "--pages", help="Page store SQLite file (default: in memory).")
    fetch: bool = typer.Option(False, "--fetch/--no-fetch", help="Fetch pages that are not in the page store.")
    fetch_private: bool = typer.Option(False, "--fetch-private",
                                       help="Also fetch addresses on this machine or a private network (a local "
                                            "web archive); off by default, since the URLs come from a model.")


@dataclasses.dataclass(frozen=True)
class DiscoverKnobs:
    """What ``trek ctrl discover`` looks for and checks."""

    historical: int = typer.Option(20, "--historical", min=0, help="Historical documents wanted per question.")
    relevance: int = typer.Option(10, "--relevance", min=0, help="Relevance documents wanted per question.")
    check_gold: bool = typer.Option(True, "--check-gold/--no-check-gold",
                                    help="Check that gold pages still state the reference answer (else flag).")
    recover_dates: bool = typer.Option(True, "--recover-dates/--no-recover-dates",
                                       help="Date undated documents from their cached pages (one call each).")
    effort: str = typer.Option(None, "--effort", help=_EFFORT.format("discovery", "discovery"))


@dataclasses.dataclass(frozen=True)
class Calls:
    """The model calls of a Ctrl job: their response cache, prompts, prices and budget."""

    cache: Path = typer.Option(None, "--cache", help="LLM cache file (default: $TREK_CACHE, else llm-cache.sqlite "
                               "in the output's folder).")
    prompts: Path = options.PROMPTS
    prices: Path = options.PRICES
    budget: float = options.BUDGET


@app.command("build")
@options.grouped
def build_command(
    pools: BuildSource = options.GROUP,
    out: Path = typer.Option(..., "--out", "-o", help="Folder for pools.jsonl, contexts.jsonl and build.json."),
    fabricator_role: FABRICATOR = options.GROUP,
    fabrication: str = typer.Option("auto", "--fabrication", help=_FABRICATION),
    embedder_role: EMBEDDER = options.GROUP,
    knobs: BuildKnobs = options.GROUP,
    max_connections: int = options.MAX_CONNECTIONS,
    calls: Calls = options.GROUP,
    spending: options.Spending = options.GROUP,
) -> None:
    """Build pools and frozen contexts (every condition and ablation) into OUT.

    With --fabricator, fabrication spends on model calls: --dry-run estimates them and writes
    nothing, and --budget is a ceiling over every build into OUT (recorded in OUT/.build.spend).
    Each question's fabrication is checkpointed in OUT/fabrications.jsonl: exit code 3 when one
    is left pending (a failed call, or the budget); the same command again (also after Ctrl-C)
    keeps the finished ones and writes what an uninterrupted build writes."""
    from trek import templates
    from trek.ctrl.jobs import build_folder

    fabrication, fab = _fabrication(fabricator_role, fabrication)
    with options.exit_on(*_errors()), templates.prompts_folder(calls.prompts):
        done = build_folder(out, fab.role(calls.prices, max_connections), embedder_role.role(), spending=spending,
                            fabrication=fabrication, cache=calls.cache, budget=calls.budget,
                            announce=options.say_roles, **vars(pools), **vars(knobs))
    _finish(done)


@app.command("calibrate")
@options.grouped
def calibrate_command(
    embedder_role: CALIBRATED = options.GROUP,
    thresholds: str = typer.Option("0.80,0.85,0.89,0.90,0.95", "--thresholds",
                                   help="Comma-separated thresholds to report the separation at."),
    reference_unrelated: float = typer.Option(None, "--reference-unrelated",
                                              help="text-embedding-3-small's median similarity of unrelated "
                                                   "pairs on this set, when measured (default: the published 0.20)."),
    set_file: Path = typer.Option(None, "--set", help="Another calibration set in the same JSON shape."),
    json_out: Path = typer.Option(None, "--json", help="Also write every pair's similarity to this JSON file."),
    force: bool = typer.Option(False, "--force", help="Replace an existing --json file that is not a calibration."),
) -> None:
    """What a fabrication similarity threshold separates for an embedder: one-span edits vs rewrites."""
    import openai

    from trek.ctrl.calibration import run_calibration

    with options.exit_on(*_errors(), openai.OpenAIError):
        lines = run_calibration(embedder_role.role(), thresholds, reference_unrelated=reference_unrelated,
                                set_file=set_file, json_out=json_out, force=force)
    typer.echo("\n".join(lines))


@app.command("audit")
def audit_command(
    folder: Path = typer.Argument(..., help="A folder written by 'trek ctrl build'."),
) -> None:
    """Print the shortcut audit: accuracy ceilings of content-blind heuristics per condition."""
    from trek.report.ctrl_build import load_build, shortcut_table

    with options.exit_on(FileNotFoundError, ValueError):
        built = load_build(folder.resolve())
        table = shortcut_table(built)
    typer.echo(format_shortcuts(table))


#: What each heuristic of the shortcut audit does (trek.ctrl.shortcuts), for the key below its table.
HEURISTIC_WORDS = {
    "latest": "the answer of the latest dated document",
    "majority": "the most frequent answer",
    "latest_real_domain": "latest among documents not on a fictitious domain",
}


def format_shortcuts(table: Any, limit: int | None = None) -> str:
    """:func:`trek.report.ctrl_build.shortcut_table` as text within ``limit`` (default: the
    terminal's width): one column per heuristic, its accuracy with the 95% interval beside it,
    then a key to the heuristics."""
    from trek import textable
    from trek.ctrl.shortcuts import HEURISTICS

    headers = ["condition", "n", *HEURISTICS]
    rows = [[cond, int(row["n"]), *(f"{row[h]:.1f} ({row[f'{h} low']:.1f}-{row[f'{h} high']:.1f})" for h in HEURISTICS)]
            for cond, row in table.iterrows()]
    key = [(h, HEURISTIC_WORDS.get(h, h)) for h in HEURISTICS]
    return ("accuracy (%) of content-blind heuristics per condition, with 95% intervals\n"
            + textable.render(headers, rows, limit=limit, right=(1,)) + "\n" + textable.legend(key, limit=limit))


@app.command("discover")
@options.grouped
def discover_command(
    src: DiscoverSource = options.GROUP,
    out: Path = typer.Option(..., "--out", "-o", help="pools.jsonl to write (then: trek ctrl build --source pools); "
                             "a report goes beside it (NAME.report.json)."),
    discovery: DISCOVERY = options.GROUP,
    search: str = typer.Option("local", "--search", help="Search backend: local, tavily, duckduckgo, proxy:MODEL."),
    pages: DiscoverPages = options.GROUP,
    knobs: DiscoverKnobs = options.GROUP,
    calls: Calls = options.GROUP,
    spending: options.Spending = options.GROUP,
    force: bool = typer.Option(False, "--force", help="Replace an existing --out file that is not a pools file."),
) -> None:
    """Discover outdated and relevance distractors with a search backend and a model; write pools.

    --dry-run estimates the model calls and searches and writes nothing; --budget is a ceiling on
    the model calls over every discovery into OUT (recorded in .<OUT name>.spend beside it). Each
    question is checkpointed in NAME.discovery.jsonl beside OUT: exit code 3 when a question was
    left out (no usable gold page) or is pending (a failed call, or the budget); the same command
    again (also after Ctrl-C) keeps the finished ones and writes what an uninterrupted run writes."""
    from trek import templates
    from trek.ctrl.jobs import discover

    with options.exit_on(*_errors()), templates.prompts_folder(calls.prompts):
        done = discover(out, discovery.role(calls.prices), spending=spending, search=search, cache=calls.cache,
                        budget=calls.budget, force=force, announce=options.say_roles, say=_say, **vars(src),
                        **vars(pages), **vars(knobs))
    _finish(done)
