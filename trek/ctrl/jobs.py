"""The Ctrl jobs that call models, as one library call each: :func:`discover` (``trek ctrl
discover``) and :func:`build_folder` (``trek ctrl build``); the commands only parse their options.

Both run their model calls through the one stage executor (:mod:`trek.stage`): discovery as
:class:`~trek.ctrl.discovery.DiscoveryStage`, model fabrication as
:class:`~trek.ctrl.fabrication.FabricationStage`. Each question is an item with an input key;
its record is checkpointed in a journal as it finishes (``NAME.discovery.jsonl`` beside the
pools file, ``fabrications.jsonl`` in the build folder), a question whose call failed or that the
budget stopped is recorded as ``pending``, the run directory is locked for the whole job, and the
same command run again after a Ctrl-C or a ``kill -9`` keeps every finished question without a
call (the calls of unfinished ones replay from the response cache) and writes the outputs an
uninterrupted run writes. The outputs themselves (``pools.jsonl`` and its report; a build's
``pools.jsonl``, ``contexts.jsonl`` and ``build.json``) are written whole, atomically, at the end.

The look before spending (``--dry-run``, ``--confirm-above``) is the caller's ``spending`` (an
object with ``dry_run``, ``assume_output`` and ``proceed(estimate, budget, ledger=...)``, as
:class:`trek.cli.options.Spending`); ``announce`` is told which client plays which role before
the first call; ``say`` prints a line on standard error.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from trek.ctrl.common import CtrlError
from trek.ctrl.pools import Pool, SourcePools, source_pools
from trek.roles import Role
from trek.runs import POOLS, RunDir, run_lock

__all__ = ["Outcome", "Spending", "split_ids", "discover", "build_folder"]


class Spending(Protocol):
    dry_run: bool
    assume_output: int

    def proceed(self, estimate: Any, budget: float | None = None, ledger: Any = None) -> bool: ...


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


@dataclass
class Outcome:
    """What a job says when it ends: ``lines`` as ``(text, to standard error)``, and the exit
    code (3: a question is pending or was left out; run the same command again)."""

    lines: list[tuple[str, bool]] = field(default_factory=list)
    exit_code: int = 0

    def say(self, text: str, err: bool = False) -> None:
        self.lines.append((text, err))


def split_ids(questions: str | Sequence[str] | None) -> list[str] | None:
    """Question ids from ``--questions a,b`` (``None``: every question)."""
    if questions is None:
        return None
    items = questions.split(",") if isinstance(questions, str) else list(questions)
    return [q.strip() for q in items if q.strip()] or None


def _cache(path: Path, dry_run: bool) -> Any:
    """The response cache at ``path``; a dry run opens only an existing one (it writes nothing)."""
    from trek.llm.cache import LLMCache

    return LLMCache(path) if path.exists() or not dry_run else None


# -- trek ctrl discover ----------------------------------------------------------------------------
def _wild_start(store: Any, qids: list[str] | None, *, data_dir: Any, longseal: Any, historical: int,
                relevance: int, allow_partial: bool, dry_run: bool, say: Callable[[str], None]
                ) -> tuple[list[Pool], list[dict[str, Any]]]:
    """The starting pools of TrekBench-Wild questions and the questions left out."""
    from trek.aio import run_sync
    from trek.ctrl.discovery import awild_start_pools
    from trek.ctrl.pools import from_longseal
    from trek.datasets import load_benchmark
    from trek.datasets.wild import IncompleteDataError, check_complete

    bench = load_benchmark("wild", data_dir)
    try:
        check_complete(bench)
    except IncompleteDataError as e:
        if not allow_partial:
            raise
        say(f"warning: {e}")
    qs = [q for q in bench.questions if qids is None or q.id in qids]
    if qids is not None and len(qs) < len(set(qids)):
        raise CtrlError(f"--questions: not in TrekBench-Wild: {sorted(set(qids) - {q.id for q in qs})}")
    seal = from_longseal(longseal, historical=historical, relevance=relevance) if longseal is not None else []
    if dry_run:  # no page is fetched: each question counts with the pool it starts from
        by_id = {p.question.id: p for p in seal}
        return [by_id.get(q.id) or Pool(question=q, documents=[]) for q in qs], []
    return run_sync(awild_start_pools(qs, store, seal))


def discover(
    out: str | Path, role: Role, *, spending: Spending, source: str = "wild", data_dir: Any = None,
    mini_dir: Any = None, longseal: Any = None, pools_file: Any = None, questions: str | Sequence[str] | None = None,
    allow_partial: bool = False, search: str = "local", pages: Any = None, fetch: bool = False,
    fetch_private: bool = False, historical: int = 20, relevance: int = 10, check_gold: bool = True,
    recover_dates: bool = True, effort: str | None = None, cache: Any = None, budget: float | None = None,
    force: bool = False, announce: Callable[[dict[str, Any]], None] = lambda roles: None,
    say: Callable[[str], None] = _stderr,
) -> Outcome | None:
    """Discover distractors for the questions of ``source`` with the discovery ``role`` and write
    the pools file ``out`` and its report (module doc). ``None``: a dry run, or not approved."""
    from trek.aio import closing_run
    from trek.ctrl import discovery as D
    from trek.ctrl.estimate import estimate_discovery
    from trek.ctrl.pools import write_pools
    from trek.llm.ledger import ledger_path
    from trek.llm.ledger import spending as ledger_for
    from trek.outputs import atomic_write, check_out
    from trek.pages import PageStore
    from trek.search import make_backend
    from trek.stage import execute, plan

    out = Path(out)
    rd, qids, dry = RunDir(out.parent), split_ids(questions), spending.dry_run
    cache_path = Path(cache) if cache else rd.llm_cache
    check_out(out, reads=[pools_file, longseal, pages, cache_path], example=POOLS, owner=b'{"question":',
              command="trek ctrl discover", force=force)
    store = PageStore(None, fetch=False) if dry else PageStore(pages, fetch=fetch, allow_private=fetch_private)
    if not role.model:
        raise ValueError("name the discovery model: --discovery MODEL")
    client = rd.client(role, budget_usd=budget, assume_output=spending.assume_output, cache=_cache(cache_path, dry))
    skipped: list[dict[str, Any]] = []
    if source == "wild":
        start, skipped = _wild_start(store, qids, data_dir=data_dir, longseal=longseal, historical=historical,
                                     relevance=relevance, allow_partial=allow_partial, dry_run=dry, say=say)
    else:
        start = source_pools(source, mini_dir=mini_dir, longseal=longseal, pools_file=pools_file,
                             historical=historical, relevance=relevance, questions=qids)
        for p in start:
            store.add_documents(p.documents)
    backend = make_backend(search, store=store, client=client, cache=None if dry else rd.search_cache)
    if backend is None:
        raise CtrlError("discovery needs a search backend (--search)")
    settings = D.DiscoverySettings(historical=historical, relevance=relevance, check_gold=check_gold,
                                   recover_dates=recover_dates,
                                   chat_params={**({"reasoning_effort": effort} if effort else {}), **role.params})
    records = rd.discovery_records(out.name)
    stage = D.DiscoveryStage(records, client, backend, store, settings)
    with contextlib.ExitStack() as held:
        if not dry:
            held.enter_context(run_lock(rd.path))  # for the whole job: the checkpoint, the pools and the report
        todo = plan(stage, start, [records])
        est = estimate_discovery(todo.todo, client, backend, store, settings, assume_output=spending.assume_output)
        est.items += len(todo.kept)
        est.cached_items += len(todo.kept)
        if not spending.proceed(est, budget, ledger=ledger_path(out)):
            return None
        announce({"discovery": client})
        with ledger_for([client], ledger_path(out)):
            tally = closing_run(execute(stage, start, outputs=[records], progress=client.progress), client)
        found = [r.pool for r in tally.of(records)]
        write_pools(out, found)
        report = D.discovery_report(found, skipped)
        report_path = rd.discovery_report(out.name)
        atomic_write(report_path, json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    return _discovered(found, skipped, report, out, report_path)


def _discovered(found: list[Pool], skipped: list[dict[str, Any]], report: dict[str, Any], out: Path,
                report_path: Path) -> Outcome:
    done = Outcome()
    for s in skipped:
        done.say(f"skipped {s['question_id']}: {s['reason']}", err=True)
    for qid in report["flagged"]:
        done.say(f"flagged {qid}: no gold page states the reference answer (kept; review it)", err=True)
    added_o = sum(p.notes["discovery"]["outdated_added"] for p in found)
    added_r = sum(p.notes["discovery"]["relevance_added"] for p in found)
    pend = report["pending"]
    done.say(f"discovered {added_o} outdated and {added_r} relevance documents for {len(found)} questions"
             f"; {report['dates_recovered']} dates recovered"
             + (f"; {len(report['flagged'])} flagged" if report["flagged"] else "")
             + (f"; {len(skipped)} left out" if skipped else "")
             + (f"; {len(pend)} pending (re-run to retry)" if pend else "") + f"; wrote {out} and {report_path}")
    why = next((p.notes["discovery"]["pending"] for p in found if p.notes["discovery"]["pending"]), None)
    if why:  # a call failed or the budget stopped it
        done.say(f"pending, e.g.: {why}", err=True)
    done.exit_code = 3 if skipped or pend else 0
    return done


# -- trek ctrl build -------------------------------------------------------------------------------
def _conditions(conditions: str | Sequence[str]) -> tuple[str, ...]:
    from trek.ctrl import conditions as cond

    items = conditions.split(",") if isinstance(conditions, str) else list(conditions)
    names = tuple(c.strip() for c in items if c.strip())
    bad = [c for c in names if c not in cond.ALL_CONDITIONS]
    if bad or not names:
        raise CtrlError(f"unknown condition(s) {bad}; known: {', '.join(cond.ALL_CONDITIONS)}")
    return names


def build_folder(
    out: str | Path, fabricator: Role, embedder: Role, *, spending: Spending, source: str = "mini",
    mini_dir: Any = None, longseal: Any = None, pools_file: Any = None, questions: str | Sequence[str] | None = None,
    fabrication: str = "auto", conditions: str | Sequence[str] | None = None, historical: int = 20,
    relevance: int = 10, republications: int = 5, fabrications: int = 5, attempts: int = 3,
    min_similarity: float | None = None, effort: str | None = None, cache: Any = None, tokens: bool = True,
    show_urls: str = "cued", budget: float | None = None,
    announce: Callable[[dict[str, Any]], None] = lambda roles: None,
) -> Outcome | None:
    """Build pools and frozen contexts into the folder ``out`` (:func:`trek.ctrl.build.build`),
    the model ``fabricator`` fabricating where ``fabrication`` says (module doc). ``None``: a dry
    run that printed its estimate, or a run not approved."""
    from trek.ctrl import conditions as cond
    from trek.ctrl.build import build, fabrication_way, model_fabrication_plan
    from trek.ctrl.estimate import estimate_fabrication
    from trek.ctrl.fabrication import FABRICATORS, FabricationSettings
    from trek.embeddings import make_embedder
    from trek.llm.ledger import spending as ledger_for
    from trek.outputs import check_folder_out, make_folder
    from trek.runs import BUILD_MANIFEST, CONTEXTS

    out, rd, dry = Path(out), RunDir(out), spending.dry_run
    if source not in ("mini", "longseal", "pools", "wild"):
        raise CtrlError(f"--source must be one of mini, longseal, pools, wild, got {source!r}")
    if show_urls not in cond.SHOW_URLS:
        raise CtrlError(f"--show-urls must be one of {', '.join(cond.SHOW_URLS)}, got {show_urls!r}")
    if fabrication not in FABRICATORS:
        raise CtrlError(f"--fabrication must be one of {', '.join(FABRICATORS)}, got {fabrication!r}")
    if fabrication == "model" and not fabricator.model:
        raise CtrlError("--fabrication model needs --fabricator MODEL")
    names = _conditions(cond.ALL_CONDITIONS if conditions is None else conditions)
    emb: Any = embedder.model if not embedder.base_url else make_embedder(embedder.model, base_url=embedder.base_url)
    cache_path = Path(cache) if cache else rd.llm_cache
    check_folder_out(out, reads=[pools_file, longseal, cache], writes=[POOLS, CONTEXTS, BUILD_MANIFEST])
    source_set = SourcePools(source, mini_dir=mini_dir, longseal=longseal, pools_file=pools_file,
                             historical=historical, relevance=relevance, questions=split_ids(questions))
    seen: set[str] = set()
    n_model = 0  # a first pass, one pool at a time: the ids, and the pools the model fabricates
    for p in source_set:
        seen.add(p.question.id)
        n_model += fabrication_way(p, fabrication, True) == "model"
    source_set.missing(seen)
    del seen
    settings = FabricationSettings(target=fabrications, max_attempts=attempts, min_similarity=min_similarity,
                                   chat_params={**({"reasoning_effort": effort} if effort else {}),
                                                **fabricator.params})
    # the pools the model fabricates (n_model): all under --fabrication model, those without
    # annotated answer spans under auto (exact edits need no model), none under exact or none.
    # Model fabrication holds every pool (trek.ctrl.build); otherwise they stream from the source.
    by_model = bool(fabricator.model and n_model)
    pools: Iterable[Pool] = list(source_set) if by_model else source_set
    client = None
    with contextlib.ExitStack() as held:
        if by_model:
            if not dry:  # for the whole build: the fabrication checkpoint and the outputs
                held.enter_context(run_lock(make_folder(out)))
            if isinstance(emb, str):  # made once, for the plan and the build
                emb = make_embedder(emb)
            client = rd.client(fabricator, cache=_cache(cache_path, dry), budget_usd=budget,
                               assume_output=spending.assume_output)
            todo = model_fabrication_plan(pools, out, client, embedder=emb, fabrication_settings=settings,
                                          fabricator=fabrication, republication_target=republications)
            est = estimate_fabrication(todo.todo, client, settings, assume_output=spending.assume_output)
            est.items += len(todo.kept)  # finished in the checkpoint (same input): no call
            est.cached_items += len(todo.kept)
            if not spending.proceed(est, budget, ledger=rd.build_ledger):
                return None
            announce({"fabricator": client})
        elif dry:
            return Outcome([("no model fabrication to do (no --fabricator, or every pool is fabricated exactly): "
                             "no model call would be made", False)])
        with ledger_for([client], rd.build_ledger):
            result = build(pools, out, client=client, embedder=emb, conditions=names,
                           republication_target=republications, fabrication_settings=settings,
                           fabricator=fabrication, count_tokens=tokens, source=source, show_urls=show_urls)
    done = Outcome([(m, m.startswith("warning:")) for m in result.messages])
    pending = [p.notes["fabrication"]["pending"] for p in result.iter_pools()
               if p.notes.get("fabrication", {}).get("pending")]
    if pending:  # a call failed or the budget stopped it: the same command resumes
        done.say(f"{len(pending)} question(s) pending, e.g. {pending[0]}", err=True)
        done.exit_code = 3
    return done
