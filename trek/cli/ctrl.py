"""``trek ctrl``: build TrekBench-Ctrl contexts and audit them."""

from __future__ import annotations

from pathlib import Path

import typer

from trek.cli import options
from trek.ctrl import conditions as cond

app = typer.Typer(help="TrekBench-Ctrl: distractor pools, synthetic distractors and frozen contexts.",
                  no_args_is_help=True)

SOURCES = ("mini", "longseal", "pools", "wild")


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


@app.command("build")
def build_command(
    source: str = typer.Option("mini", "--source", help=f"Where pools come from: {', '.join(SOURCES)}."),
    out: Path = typer.Option(..., "--out", "-o", help="Folder for pools.jsonl, contexts.jsonl and build.json."),
    mini_dir: Path = typer.Option(None, "--mini-dir", help="TrekBench-Mini folder (default: bundled data/mini)."),
    longseal: Path = typer.Option(None, "--longseal", help="LongSeal parquet file (for --source longseal)."),
    pools_file: Path = typer.Option(None, "--pools", help="pools.jsonl to rebuild from (for --source pools)."),
    questions: str = typer.Option(None, "--questions", help="Comma-separated question ids to keep (default: all)."),
    model: str = typer.Option(None, "--model", "-m", help="Model for fabrication (of pools without annotated answer "
                              "spans under --fabricator auto)."),
    fabricator: str = typer.Option(
        "auto", "--fabricator",
        help="auto: exact edits where gold pages have annotated answer spans (TrekBench-Mini), the --model "
        "elsewhere; exact: only exact edits (no model); model: only the model; none: no fabrication."),
    base_url: str = options.BASE_URL,
    embedder: str = typer.Option("wordllama", "--embeddings", help="'wordllama' (offline) or 'openai:MODEL'."),
    conditions: str = typer.Option(",".join(cond.ALL_CONDITIONS), "--conditions",
                                   help="Comma-separated conditions to write, in order."),
    historical: int = typer.Option(20, "--historical", min=0, help="Historical (outdated) documents kept per pool."),
    relevance: int = typer.Option(10, "--relevance", min=0, help="Relevance documents kept per pool."),
    republications: int = typer.Option(5, "--republications", min=0, help="Republication documents per question."),
    fabrications: int = typer.Option(5, "--fabrications", min=0, help="Fabrication documents per question."),
    attempts: int = typer.Option(3, "--attempts", min=1, help="Fabrication attempts per slot (retries with feedback)."),
    min_similarity: float = typer.Option(0.90, "--min-similarity", help="Embedding similarity floor for fabrications."),
    effort: str = typer.Option(None, "--effort", help="reasoning_effort sent with fabrication calls (e.g. high)."),
    cache: Path = typer.Option(None, "--cache", help="LLM cache file (default: $TREK_CACHE or OUT/llm-cache.sqlite)."),
    max_connections: int = options.MAX_CONNECTIONS,
    prompts: Path = options.PROMPTS,
    tokens: bool = typer.Option(True, "--tokens/--no-tokens", help="Count o200k_base tokens of each context."),
) -> None:
    """Build pools and frozen contexts (every condition and ablation) into OUT."""
    from trek import templates
    from trek.ctrl.build import build
    from trek.ctrl.common import CtrlError
    from trek.ctrl.fabrication import FABRICATORS, FabricationSettings
    from trek.types import RecordError

    if source not in SOURCES:
        raise typer.BadParameter(f"--source must be one of {', '.join(SOURCES)}, got {source!r}")
    if fabricator not in FABRICATORS:
        raise typer.BadParameter(f"--fabricator must be one of {', '.join(FABRICATORS)}, got {fabricator!r}")
    if fabricator == "model" and not model:
        raise typer.BadParameter("--fabricator model needs --model")
    names = tuple(c.strip() for c in conditions.split(",") if c.strip())
    bad = [c for c in names if c not in cond.ALL_CONDITIONS]
    if bad or not names:
        raise typer.BadParameter(f"unknown condition(s) {bad}; known: {', '.join(cond.ALL_CONDITIONS)}")
    with options.exit_on(CtrlError, RecordError, ValueError, FileNotFoundError), templates.prompts_folder(prompts):
        qids = [q.strip() for q in questions.split(",") if q.strip()] if questions else None
        pools = _pools(source, mini_dir, longseal, pools_file, historical, relevance, qids)
        client = None
        if model and fabricator in ("auto", "model"):
            from trek.llm.cache import LLMCache, default_cache_path
            from trek.llm.client import LLMClient

            cache_path = cache or default_cache_path(out)
            out.mkdir(parents=True, exist_ok=True)
            client = LLMClient(model, base_url=base_url, cache=LLMCache(cache_path),
                               max_connections=max_connections, progress=False)
            options.say_roles({"fabricator": client})
        settings = FabricationSettings(target=fabrications, max_attempts=attempts, min_similarity=min_similarity,
                                       chat_params={"reasoning_effort": effort} if effort else {})
        result = build(pools, out, client=client, embedder=embedder, conditions=names,
                       republication_target=republications, fabrication_settings=settings,
                       fabricator=fabricator, count_tokens=tokens, source=source)
    for m in result.messages:
        typer.echo(m, err=m.startswith("warning:"))


@app.command("audit")
def audit_command(
    folder: Path = typer.Argument(..., help="A folder written by 'trek ctrl build'."),
) -> None:
    """Print the shortcut audit: accuracy ceilings of content-blind heuristics per condition."""
    from trek.report.ctrl_build import load_build, shortcut_table

    built = load_build(folder.resolve())
    typer.echo(shortcut_table(built).to_string(float_format=lambda x: f"{x:.1f}"))


@app.command("discover")
def discover_command(
    source: str = typer.Option("wild", "--source", help="Questions and starting pools: wild, mini, longseal, pools."),
    out: Path = typer.Option(..., "--out", "-o", help="pools.jsonl to write (then: trek ctrl build --source pools)."),
    model: str = typer.Option(..., "--model", "-m", help="Model that proposes queries and verifies pages."),
    search: str = typer.Option("local", "--search", help="Search backend: local, tavily, duckduckgo, proxy:MODEL."),
    pages: Path = typer.Option(None, "--pages", help="Page store SQLite file (default: in memory)."),
    fetch: bool = typer.Option(False, "--fetch/--no-fetch", help="Fetch pages that are not in the page store."),
    data_dir: Path = typer.Option(None, "--data-dir", help="Source datasets for --source wild (default: $TREK_DATA_DIR)."),
    mini_dir: Path = typer.Option(None, "--mini-dir", help="TrekBench-Mini folder (default: bundled data/mini)."),
    longseal: Path = typer.Option(None, "--longseal", help="LongSeal parquet: SealQA pools for wild/longseal."),
    pools_file: Path = typer.Option(None, "--pools", help="pools.jsonl to extend (for --source pools)."),
    questions: str = typer.Option(None, "--questions", help="Comma-separated question ids to keep (default: all)."),
    base_url: str = options.BASE_URL,
    historical: int = typer.Option(20, "--historical", min=0, help="Historical documents wanted per question."),
    relevance: int = typer.Option(10, "--relevance", min=0, help="Relevance documents wanted per question."),
    cache: Path = typer.Option(None, "--cache", help="LLM cache file (default: $TREK_CACHE or next to --out)."),
    prompts: Path = options.PROMPTS,
    effort: str = typer.Option(None, "--effort", help="reasoning_effort sent with discovery calls."),
) -> None:
    """Discover outdated and relevance distractors with a search backend and a model; write pools."""
    from trek import templates
    from trek.aio import closing_run, run_sync
    from trek.ctrl import discovery as D
    from trek.ctrl.common import CtrlError
    from trek.ctrl.pools import apply_quotas, write_pools
    from trek.llm.cache import LLMCache, default_cache_path
    from trek.llm.client import LLMClient
    from trek.pages import PageStore
    from trek.search import make_backend
    from trek.types import RecordError

    qids = [q.strip() for q in questions.split(",") if q.strip()] if questions else None
    store = PageStore(pages, fetch=fetch)
    client = LLMClient(model, base_url=base_url, progress=False,
                       cache=LLMCache(cache or default_cache_path(out.parent)))
    options.say_roles({"discovery": client})
    with options.exit_on(CtrlError, RecordError, ValueError, FileNotFoundError), templates.prompts_folder(prompts):
        skipped: list[dict] = []
        if source == "wild":
            from trek.datasets import load_benchmark

            bench = load_benchmark("wild", data_dir)
            qs = [q for q in bench.questions if qids is None or q.id in qids]
            start = []
            if longseal is not None:
                from trek.ctrl.pools import from_longseal

                by_text = {p.question.id: p for p in from_longseal(longseal, historical=historical, relevance=relevance)}
                start = [by_text[q.id] for q in qs if q.id in by_text]
            have = {p.question.id for p in start}
            fetched, skipped = run_sync(D.agold_pools([q for q in qs if q.id not in have], store))
            start += fetched
        else:
            start = _pools(source, mini_dir, longseal, pools_file, historical, relevance, qids)
        for p in start:
            store.add_documents(p.documents)
        backend = make_backend(search, store=store, client=client)
        if backend is None:
            raise CtrlError("discovery needs a search backend (--search)")
        settings = D.DiscoverySettings(historical=historical, relevance=relevance,
                                       chat_params={"reasoning_effort": effort} if effort else {})
        found = closing_run(D.adiscover_pools(start, client, backend, store, settings), client)
        found = [apply_quotas(p, historical=historical, relevance=relevance) for p in found]
        write_pools(out, found)
    for s in skipped:
        typer.echo(f"skipped {s['question_id']}: {s['reason']}")
    added_o = sum(p.notes["discovery"]["outdated_added"] for p in found)
    added_r = sum(p.notes["discovery"]["relevance_added"] for p in found)
    pend = sum(1 for p in found if p.notes["discovery"]["pending"])
    typer.echo(f"discovered {added_o} outdated and {added_r} relevance documents for {len(found)} questions"
               + (f"; {pend} pending (re-run to retry)" if pend else "") + f"; wrote {out}")
