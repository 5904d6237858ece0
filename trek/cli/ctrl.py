"""``trek ctrl``: build TrekBench-Ctrl contexts and audit them."""

from __future__ import annotations

from pathlib import Path

import typer

from trek import runs
from trek.cli import options
from trek.ctrl import conditions as cond
from trek.roles import role_options

app = typer.Typer(rich_markup_mode=None, help="TrekBench-Ctrl: distractor pools, synthetic distractors and frozen contexts.",
                  no_args_is_help=True)

SOURCES = ("mini", "longseal", "pools", "wild")
#: The spend ledger of `trek ctrl build --model` in its OUT folder (fabrication calls).
BUILD_LEDGER = ".build.spend"


def _pools(source: str, mini_dir: Path | None, longseal: Path | None, pools_file: Path | None,
           historical: int, relevance: int, questions: list[str] | None):
    pools = _all_pools(source, mini_dir, longseal, pools_file, historical, relevance)
    if questions:
        from trek.ctrl.common import CtrlError

        missing = sorted(set(questions) - {p.question.id for p in pools})
        if missing:
            raise CtrlError(f"--questions: no pool for {missing}")
        pools = [p for p in pools if p.question.id in set(questions)]
    return pools


def _all_pools(source: str, mini_dir: Path | None, longseal: Path | None, pools_file: Path | None,
               historical: int, relevance: int):
    from trek.ctrl import pools as P

    if source == "mini":
        return P.from_mini(mini_dir, historical=historical, relevance=relevance)
    if source == "longseal":
        if longseal is None:
            raise typer.BadParameter("--source longseal needs --longseal PATH (the LongSeal parquet file)")
        return P.from_longseal(longseal, historical=historical, relevance=relevance)
    if source == "pools":
        if pools_file is None:
            raise typer.BadParameter("--source pools needs --pools FILE (a pools.jsonl)")
        return [P.apply_quotas(p, historical=historical, relevance=relevance) for p in P.read_pools(pools_file)]
    raise typer.BadParameter(
        "--source wild: first run 'trek ctrl discover --source wild --out pools.jsonl' (needs a model and a "
        "search backend), then build with --source pools --pools pools.jsonl"
    )


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


@app.command("build")
@options.grouped
def build_command(
    source: str = typer.Option("mini", "--source", help=f"Where pools come from: {', '.join(SOURCES)}."),
    out: Path = typer.Option(..., "--out", "-o", help="Folder for pools.jsonl, contexts.jsonl and build.json."),
    mini_dir: Path = typer.Option(None, "--mini-dir", help="TrekBench-Mini folder (default: bundled data/mini)."),
    longseal: Path = typer.Option(None, "--longseal", help="LongSeal parquet file (for --source longseal)."),
    pools_file: Path = typer.Option(None, "--pools", help="pools.jsonl to rebuild from (for --source pools)."),
    questions: str = typer.Option(None, "--questions", help="Comma-separated question ids to keep (default: all)."),
    fabricator_role: FABRICATOR = options.GROUP,
    fabrication: str = typer.Option(
        "auto", "--fabrication",
        help="auto: exact edits where gold pages have annotated answer spans (TrekBench-Mini), the --fabricator "
        "model elsewhere; exact: only exact edits (no model); model: only the model; none: no fabrication."),
    embedder_role: EMBEDDER = options.GROUP,
    conditions: str = typer.Option(",".join(cond.ALL_CONDITIONS), "--conditions",
                                   help="Comma-separated conditions to write, in order."),
    historical: int = typer.Option(20, "--historical", min=0, help="Historical (outdated) documents kept per pool."),
    relevance: int = typer.Option(10, "--relevance", min=0, help="Relevance documents kept per pool."),
    republications: int = typer.Option(5, "--republications", min=0, help="Republication documents per question."),
    fabrications: int = typer.Option(5, "--fabrications", min=0, help="Fabrication documents per question."),
    attempts: int = typer.Option(3, "--attempts", min=1, help="Fabrication attempts per slot (retries with feedback)."),
    min_similarity: float = typer.Option(None, "--min-similarity", callback=options.number(-1, 1),
                                         help="Embedding similarity floor for fabrications (default: calibrated per "
                                              "embedder: 0.90 for openai:text-embedding-3-small as in the paper, "
                                              "0.89 for wordllama; see 'trek ctrl calibrate')."),
    effort: str = typer.Option(None, "--effort", help="reasoning_effort sent with fabrication calls (e.g. high)."),
    cache: Path = typer.Option(None, "--cache", help="LLM cache file (default: $TREK_CACHE or OUT/llm-cache.sqlite)."),
    max_connections: int = options.MAX_CONNECTIONS,
    prompts: Path = options.PROMPTS,
    tokens: bool = typer.Option(True, "--tokens/--no-tokens", help="Count o200k_base tokens of each context."),
    show_urls: str = typer.Option("cued", "--show-urls",
                                  help="Where source URLs are shown: 'cued' (the paper: only SAA and "
                                       "SAA:domainswap) or 'all' (every condition but SBA)."),
    prices: Path = options.PRICES,
    budget: float = options.BUDGET,
    spending: options.Spending = options.GROUP,
) -> None:
    """Build pools and frozen contexts (every condition and ablation) into OUT.

    With --model, fabrication spends on model calls: --dry-run estimates them and writes nothing,
    and --budget is a ceiling over every build into OUT (recorded in OUT/.build.spend). Exit code
    3 when a question's fabrication is left pending (a failed call, or the budget): run again."""
    import dataclasses

    from trek import templates
    from trek.ctrl.build import build
    from trek.ctrl.common import CtrlError
    from trek.ctrl.fabrication import FABRICATORS, FabricationSettings, has_answer_span
    from trek.embeddings import make_embedder

    fabricator = fabrication
    if fabricator_role.fabricator in FABRICATORS and fabricator == "auto":  # the old --fabricator auto|exact|...
        typer.echo(f"notice: --fabricator {fabricator_role.fabricator} is the old spelling of --fabrication "
                   f"{fabricator_role.fabricator}; it still works in this release", err=True)
        fabricator, fabricator_role = fabricator_role.fabricator, dataclasses.replace(fabricator_role, fabricator=None)
    fab, emb = fabricator_role.role(prices, max_connections), embedder_role.role()
    embedder = emb.model if not emb.base_url else make_embedder(emb.model, base_url=emb.base_url)
    model = fab.model
    from trek.llm.client import FatalLLMError
    from trek.llm.ledger import spending as ledger_for
    from trek.types import RecordError

    if source not in SOURCES:
        raise typer.BadParameter(f"--source must be one of {', '.join(SOURCES)}, got {source!r}")
    if show_urls not in cond.SHOW_URLS:
        raise typer.BadParameter(f"--show-urls must be one of {', '.join(cond.SHOW_URLS)}, got {show_urls!r}")
    if fabricator not in FABRICATORS:
        raise typer.BadParameter(f"--fabrication must be one of {', '.join(FABRICATORS)}, got {fabricator!r}")
    if fabricator == "model" and not model:
        raise typer.BadParameter("--fabrication model needs --fabricator MODEL")
    names = tuple(c.strip() for c in conditions.split(",") if c.strip())
    bad = [c for c in names if c not in cond.ALL_CONDITIONS]
    if bad or not names:
        raise typer.BadParameter(f"unknown condition(s) {bad}; known: {', '.join(cond.ALL_CONDITIONS)}")
    from trek.ctrl.build import CONTEXTS_FILE, MANIFEST_FILE, POOLS_FILE
    from trek.outputs import check_folder_out, make_folder

    with options.exit_on(CtrlError, RecordError, ValueError, FileNotFoundError, FatalLLMError), \
            templates.prompts_folder(prompts):
        check_folder_out(out, reads=[pools_file, longseal, cache], writes=[POOLS_FILE, CONTEXTS_FILE, MANIFEST_FILE])
        qids = [q.strip() for q in questions.split(",") if q.strip()] if questions else None
        pools = _pools(source, mini_dir, longseal, pools_file, historical, relevance, qids)
        settings = FabricationSettings(target=fabrications, max_attempts=attempts, min_similarity=min_similarity,
                                       chat_params={**({"reasoning_effort": effort} if effort else {}), **fab.params})
        client = None
        ledger = out / BUILD_LEDGER
        # the pools the model fabricates: all under --fabricator model, those without annotated answer
        # spans under auto (exact edits need no model), none under exact or none
        by_model = [p for p in pools if fabricator == "model" or (fabricator == "auto" and not has_answer_span(p))]
        if model and by_model:
            from trek.ctrl.estimate import estimate_fabrication
            from trek.llm.cache import LLMCache

            cache_path = cache or runs.RunDir(out).llm_cache
            if not spending.dry_run:
                make_folder(out)
            client = runs.RunDir(out).client(fab, cache=LLMCache(cache_path) if cache_path.exists() or
                                             not spending.dry_run else None, budget_usd=budget,
                                             assume_output=spending.assume_output)
            est = estimate_fabrication(by_model, client, settings, assume_output=spending.assume_output)
            if not spending.proceed(est, budget, ledger=ledger):
                return
            options.say_roles({"fabricator": client})
        elif spending.dry_run:
            typer.echo("no model fabrication to do (no --fabricator, or every pool is fabricated exactly): "
                       "no model call would be made")
            return
        with ledger_for([client], ledger):
            result = build(pools, out, client=client, embedder=embedder, conditions=names,
                           republication_target=republications, fabrication_settings=settings,
                           fabricator=fabricator, count_tokens=tokens, source=source, show_urls=show_urls)
    for m in result.messages:
        typer.echo(m, err=m.startswith("warning:"))
    pending = [p.notes["fabrication"]["pending"] for p in result.pools if p.notes.get("fabrication", {}).get("pending")]
    if pending:  # a call failed or the budget stopped it: the same command resumes (from the cache)
        typer.echo(f"{len(pending)} question(s) pending, e.g. {pending[0]}", err=True)
        raise typer.Exit(3)


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
    import json

    import openai

    from trek.ctrl import calibration as K
    from trek.ctrl.common import CtrlError
    from trek.embeddings import make_embedder

    try:
        ts = [float(x) for x in thresholds.split(",") if x.strip()]
    except ValueError:
        raise typer.BadParameter(f"--thresholds: numbers separated by commas, got {thresholds!r}") from None
    if not ts or any(not 0 < t <= 1 for t in ts):
        raise typer.BadParameter(f"--thresholds: each in (0, 1], got {thresholds!r}")
    if reference_unrelated is not None and not -1 <= reference_unrelated < K.PAPER_THRESHOLD:
        raise typer.BadParameter(f"--reference-unrelated must be below {K.PAPER_THRESHOLD}, got {reference_unrelated}")
    with options.exit_on(CtrlError, ValueError, openai.OpenAIError):
        if json_out is not None:
            from trek.outputs import check_out

            check_out(json_out, reads=[set_file], example="calibration.json", owner=b'{\n  "embedder": ',
                      command="trek ctrl calibrate", force=force)
        pairs = K.load_pairs(set_file)
        role = embedder_role.role()
        emb = make_embedder(role.model, base_url=role.base_url)
        result = K.calibrate(emb, ts, pairs=pairs, reference_unrelated=reference_unrelated)
    typer.echo(result.report())
    default, why = K.default_min_similarity(result.embedder)
    typer.echo(f"  default threshold for {result.embedder}: {default:.2f} ({why})")
    if json_out is not None:
        from trek.ctrl.build import _atomic_text

        with options.exit_on(ValueError):
            _atomic_text(json_out, json.dumps(result.as_dict(), indent=2) + "\n")
        typer.echo(f"wrote {json_out}")


@app.command("audit")
def audit_command(
    folder: Path = typer.Argument(..., help="A folder written by 'trek ctrl build'."),
) -> None:
    """Print the shortcut audit: accuracy ceilings of content-blind heuristics per condition."""
    from trek.report.ctrl_build import load_build, shortcut_table

    with options.exit_on(FileNotFoundError, ValueError):
        built = load_build(folder.resolve())
        table = shortcut_table(built)
    typer.echo(table.to_string(float_format=lambda x: f"{x:.1f}"))


@app.command("discover")
@options.grouped
def discover_command(
    source: str = typer.Option("wild", "--source", help="Questions and starting pools: wild, mini, longseal, pools."),
    out: Path = typer.Option(..., "--out", "-o", help="pools.jsonl to write (then: trek ctrl build --source pools); "
                             "a report goes beside it (NAME.report.json)."),
    discovery: DISCOVERY = options.GROUP,
    search: str = typer.Option("local", "--search", help="Search backend: local, tavily, duckduckgo, proxy:MODEL."),
    pages: Path = typer.Option(None, "--pages", help="Page store SQLite file (default: in memory)."),
    fetch: bool = typer.Option(False, "--fetch/--no-fetch", help="Fetch pages that are not in the page store."),
    fetch_private: bool = typer.Option(False, "--fetch-private",
                                       help="Also fetch addresses on this machine or a private network (a local "
                                            "web archive); off by default, since the URLs come from a model."),
    data_dir: Path = typer.Option(None, "--data-dir", help="Source datasets for --source wild (default: $TREK_DATA_DIR)."),
    mini_dir: Path = typer.Option(None, "--mini-dir", help="TrekBench-Mini folder (default: bundled data/mini)."),
    longseal: Path = typer.Option(None, "--longseal", help="LongSeal parquet: SealQA pools for wild/longseal."),
    pools_file: Path = typer.Option(None, "--pools", help="pools.jsonl to extend (for --source pools)."),
    questions: str = typer.Option(None, "--questions", help="Comma-separated question ids to keep (default: all)."),
    historical: int = typer.Option(20, "--historical", min=0, help="Historical documents wanted per question."),
    relevance: int = typer.Option(10, "--relevance", min=0, help="Relevance documents wanted per question."),
    check_gold: bool = typer.Option(True, "--check-gold/--no-check-gold",
                                    help="Check that gold pages still state the reference answer (else flag)."),
    recover_dates: bool = typer.Option(True, "--recover-dates/--no-recover-dates",
                                       help="Date undated documents from their cached pages (one call each)."),
    cache: Path = typer.Option(None, "--cache", help="LLM cache file (default: $TREK_CACHE or next to --out)."),
    prompts: Path = options.PROMPTS,
    effort: str = typer.Option(None, "--effort", help="reasoning_effort sent with discovery calls."),
    prices: Path = options.PRICES,
    budget: float = options.BUDGET,
    spending: options.Spending = options.GROUP,
    allow_partial: bool = typer.Option(False, "--allow-partial",
                                       help="--source wild: go on when a source file holds fewer questions than the "
                                       "paper's benchmark (without it that is an error)."),
    force: bool = typer.Option(False, "--force", help="Replace an existing --out file that is not a pools file."),
) -> None:
    """Discover outdated and relevance distractors with a search backend and a model; write pools.

    --dry-run estimates the model calls and searches and writes nothing; --budget is a ceiling on
    the model calls over every discovery into OUT (recorded in .<OUT name>.spend beside it). Exit
    code 3 when a question was left out (no usable gold page) or is pending (a failed call, or the
    budget): run again."""
    import json

    from trek import templates
    from trek.aio import closing_run, run_sync
    from trek.ctrl import discovery as D
    from trek.ctrl.build import _atomic_text
    from trek.ctrl.common import CtrlError
    from trek.ctrl.estimate import estimate_discovery
    from trek.ctrl.pools import Pool, apply_quotas, write_pools
    from trek.llm.cache import LLMCache
    from trek.llm.client import FatalLLMError
    from trek.llm.ledger import ledger_path
    from trek.llm.ledger import spending as ledger_for
    from trek.outputs import check_out
    from trek.pages import PageStore
    from trek.runs import default_cache_path, default_search_cache_path
    from trek.search import SearchError, make_backend
    from trek.types import RecordError

    qids = [q.strip() for q in questions.split(",") if q.strip()] if questions else None
    with (options.exit_on(CtrlError, RecordError, ValueError, FileNotFoundError, SearchError, FatalLLMError),
          templates.prompts_folder(prompts)):
        cache_path = cache or default_cache_path(out.parent)
        check_out(out, reads=[pools_file, longseal, pages, cache_path], example=runs.POOLS, owner=b'{"question":',
                  command="trek ctrl discover", force=force)
        # a dry run reads and writes no page store and fetches nothing
        store = PageStore(None, fetch=False) if spending.dry_run else \
            PageStore(pages, fetch=fetch, allow_private=fetch_private)
        role = discovery.role(prices)
        if not role.model:
            raise ValueError("name the discovery model: --discovery MODEL")
        client = runs.RunDir(out.parent).client(role, budget_usd=budget, assume_output=spending.assume_output,
                                                cache=LLMCache(cache_path) if cache_path.exists() or
                                                not spending.dry_run else None)
        skipped: list[dict] = []
        if source == "wild":
            from trek.datasets import load_benchmark

            bench = load_benchmark("wild", data_dir)
            options.check_wild(bench, allow_partial)
            qs = [q for q in bench.questions if qids is None or q.id in qids]
            if qids is not None and len(qs) < len(set(qids)):
                raise CtrlError(f"--questions: not in TrekBench-Wild: {sorted(set(qids) - {q.id for q in qs})}")
            seal = []
            if longseal is not None:
                from trek.ctrl.pools import from_longseal

                seal = from_longseal(longseal, historical=historical, relevance=relevance)
            if spending.dry_run:  # no page is fetched: each question counts with the pool it starts from
                by_id = {p.question.id: p for p in seal}
                start = [by_id.get(q.id) or Pool(question=q, documents=[]) for q in qs]
            else:
                start, skipped = run_sync(D.awild_start_pools(qs, store, seal))
        else:
            start = _pools(source, mini_dir, longseal, pools_file, historical, relevance, qids)
            for p in start:
                store.add_documents(p.documents)
        backend = make_backend(search, store=store, client=client,
                               cache=None if spending.dry_run else default_search_cache_path(out.parent))
        if backend is None:
            raise CtrlError("discovery needs a search backend (--search)")
        settings = D.DiscoverySettings(historical=historical, relevance=relevance, check_gold=check_gold,
                                       recover_dates=recover_dates,
                                       chat_params={"reasoning_effort": effort} if effort else {})
        est = estimate_discovery(start, client, backend, store, settings, assume_output=spending.assume_output)
        if not spending.proceed(est, budget, ledger=ledger_path(out)):
            return
        options.say_roles({"discovery": client})
        with ledger_for([client], ledger_path(out)):
            found = closing_run(D.adiscover_pools(start, client, backend, store, settings), client)
        found = [apply_quotas(p, historical=historical, relevance=relevance) for p in found]
        write_pools(out, found)
        report = D.discovery_report(found, skipped)
        report_path = out.with_name(f"{out.stem}.report.json")
        _atomic_text(report_path, json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    for s in skipped:
        typer.echo(f"skipped {s['question_id']}: {s['reason']}", err=True)
    for qid in report["flagged"]:
        typer.echo(f"flagged {qid}: no gold page states the reference answer (kept; review it)", err=True)
    added_o = sum(p.notes["discovery"]["outdated_added"] for p in found)
    added_r = sum(p.notes["discovery"]["relevance_added"] for p in found)
    pend = report["pending"]
    typer.echo(f"discovered {added_o} outdated and {added_r} relevance documents for {len(found)} questions"
               f"; {report['dates_recovered']} dates recovered"
               + (f"; {len(report['flagged'])} flagged" if report["flagged"] else "")
               + (f"; {len(skipped)} left out" if skipped else "")
               + (f"; {len(pend)} pending (re-run to retry)" if pend else "") + f"; wrote {out} and {report_path}")
    if pend:  # a call failed or the budget stopped it
        why = next((p.notes["discovery"]["pending"] for p in found if p.notes["discovery"]["pending"]), None)
        if why:
            typer.echo(f"pending, e.g.: {why}", err=True)
    if skipped or pend:
        raise typer.Exit(3)
