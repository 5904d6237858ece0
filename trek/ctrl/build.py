"""Build TrekBench-Ctrl: pools, synthetic distractors and frozen contexts in one folder.

    pools = from_mini()                     # or from_longseal(path), or read_pools(file)
    result = build(pools, "build/ctrl")     # writes pools.jsonl, contexts.jsonl, build.json

Fabrication (``fabricator``, see :data:`trek.ctrl.fabrication.FABRICATORS`): ``auto`` (the
default) fabricates exactly, without a model, the pools whose gold documents have an annotated
answer span (TrekBench-Mini's), and through the model the others when a client is given;
``exact`` and ``model`` use one way for every pool, ``none`` skips fabrication. A pool that gets
neither is said so in ``result.messages``; ``build.json`` counts the questions per fabricator,
and every fabrication records its ``fabricator``. Every step but model fabrication is a pure
function of the pools, so building twice gives byte-identical files.
"""

from __future__ import annotations

import json
import os
import tempfile
from array import array
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from trek.aio import closing_run
from trek.contexts import Renderer
from trek.ctrl import conditions as cond
from trek.ctrl import fabrication, republication
from trek.ctrl.calibration import default_min_similarity
from trek.ctrl.common import CtrlError
from trek.ctrl.pools import Pool, shorten, write_pools
from trek.embeddings import Embedder, make_embedder
from trek.llm.client import LLMClient
from trek.outputs import atomic_write, make_folder
from trek.runs import BUILD_MANIFEST, CONTEXTS, POOLS, RunDir
from trek.stage import Reread, StagePlan, plan
from trek.types import iter_jsonl, read_jsonl

__all__ = ["BuildResult", "build", "fabrication_way", "model_fabrication_plan", "POOLS_FILE", "CONTEXTS_FILE", "MANIFEST_FILE"]

POOLS_FILE, CONTEXTS_FILE, MANIFEST_FILE = POOLS, CONTEXTS, BUILD_MANIFEST  # named by trek.runs


class BuildResult:
    """What :func:`build` wrote. ``pools`` are the built pools: held when the build had them in
    memory (model fabrication), otherwise read back from ``pools.jsonl`` when asked for (a large
    build never holds every pool)."""

    def __init__(self, out: Path, pools: list[Pool] | None, contexts: int, fabrication: str,
                 messages: list[str] | None = None):
        self.out = out
        self._pools = pools
        self.contexts = contexts
        self.fabrication = fabrication  # "skipped" or "done"
        self.messages = messages if messages is not None else []

    @property
    def pools(self) -> list[Pool]:
        if self._pools is None:
            return read_jsonl(self.pools_path, Pool)
        return self._pools

    def iter_pools(self) -> Iterator[Pool]:
        """The built pools one at a time (from ``pools.jsonl`` unless held)."""
        return iter(self._pools) if self._pools is not None else iter_jsonl(self.pools_path, Pool)

    @property
    def pools_path(self) -> Path:
        return self.out / POOLS_FILE

    @property
    def contexts_path(self) -> Path:
        return self.out / CONTEXTS_FILE


def _atomic_text(path: Path, text: str) -> None:
    atomic_write(path, text)


def _republished(p: Pool, target: int, fallback_days: int) -> Pool:
    """``p`` with its republications (any synthetic document it had is dropped first)."""
    return republication.add_republications(p.without_synthetic(), target=target, fallback_days=fallback_days)


def fabrication_way(p: Pool, fabricator: str, has_client: bool) -> str | None:
    """How :func:`build` fabricates for ``p`` (republications added): ``exact``, ``model`` or not."""
    if fabricator == "exact" or (fabricator == "auto" and fabrication.has_answer_span(p)):
        return "exact"
    if fabricator in ("auto", "model") and has_client:
        return "model"
    return None


def model_fabrication_plan(
    pools: Iterable[Pool],
    out: str | os.PathLike[str],
    client: LLMClient,
    *,
    embedder: Embedder | str | None = "wordllama",
    republication_target: int = republication.TARGET,
    fallback_days: int = republication.FALLBACK_DAYS,
    fabrication_settings: fabrication.FabricationSettings | None = None,
    fabricator: str = "auto",
) -> StagePlan[Pool, Any]:
    """What :func:`build` with the same arguments would do by model fabrication now: the pools it
    would fabricate (as prepared for the model, republications added) split into those kept from
    the folder's checkpoint (``fabrications.jsonl``) and those it would run. Reads, calls nothing:
    a dry run's estimate counts only the questions still to do."""
    todo = [p for p in (_republished(p, republication_target, fallback_days) for p in pools)
            if fabrication_way(p, fabricator, True) == "model"]
    emb = make_embedder(embedder) if isinstance(embedder, str) or embedder is None else embedder
    records = RunDir(Path(out)).fabrications_path
    return plan(fabrication.FabricationStage(records, client, emb, fabrication_settings), todo, [records])


class _Spool:
    """The prepared pools of a build with model fabrication, in a temporary file of the build
    folder, each read again by offset: per pool only where its line is and its way of fabrication
    are kept (:func:`build` reads them twice: the model's pools, then every pool in order)."""

    WAYS = (None, "exact", "model")

    def __init__(self, folder: Path, prepared: Iterable[tuple[Pool, str | None]]):
        fd, name = tempfile.mkstemp(prefix=".prepared-", suffix=".jsonl", dir=folder)
        self.path = Path(name)
        self.offsets, self.lengths, self.ways = array("q"), array("q"), bytearray()
        at = 0
        with os.fdopen(fd, "wb") as fh:
            for p, w in prepared:
                line = p.model_dump_json().encode("utf-8") + b"\n"
                fh.write(line)
                self.offsets.append(at)
                self.lengths.append(len(line))
                self.ways.append(self.WAYS.index(w))
                at += len(line)
        self.model = self.ways.count(self.WAYS.index("model"))

    def _read(self, numbers: Iterable[int]) -> Iterator[Pool]:
        fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            for n in numbers:
                yield Pool.model_validate_json(os.pread(fd, self.lengths[n], self.offsets[n]))
        finally:
            os.close(fd)

    def model_pools(self) -> Reread[Pool]:
        """The pools the model fabricates (a re-readable source)."""
        model = self.WAYS.index("model")
        return Reread(lambda: self._read(n for n, w in enumerate(self.ways) if w == model), self.model)

    def items(self, fabricated: Iterator[Pool] | None = None) -> Iterator[tuple[Pool, str | None]]:
        """Every pool in order with its way; a model's pool taken from ``fabricated`` (same order)."""
        for n, p in enumerate(self._read(range(len(self.ways)))):
            w = self.WAYS[self.ways[n]]
            yield (next(fabricated) if fabricated is not None and w == "model" else p), w

    def close(self) -> None:
        self.path.unlink(missing_ok=True)


def build(
    pools: Iterable[Pool],
    out: str | os.PathLike[str],
    *,
    client: LLMClient | None = None,
    embedder: Embedder | str | None = "wordllama",
    conditions: Sequence[str] = cond.ALL_CONDITIONS,
    budgets: cond.Budgets | None = None,
    republication_target: int = republication.TARGET,
    fallback_days: int = republication.FALLBACK_DAYS,
    fabrication_settings: fabrication.FabricationSettings | None = None,
    fabricator: str = "auto",
    doc_chars: int | None = None,
    count_tokens: bool = True,
    source: str = "pools",
    show_urls: str = "cued",
) -> BuildResult:
    """Add republications and fabrications (see the module docstring), then write the three files
    to ``out``.

    ``pools`` may be any iterable (a generator reading a file): without model fabrication each
    pool is built, written with its contexts and dropped before the next is read, so memory does
    not grow with the number of questions; with model fabrication (``client`` given, fabricator
    ``auto`` or ``model``) the prepared pools are spooled to a temporary file of ``out`` and read
    again one at a time (the model's pools, then every pool), so memory stays flat too.

    ``doc_chars`` cuts every document, synthetic ones included, to a passage of about that many
    characters around its answer (:func:`trek.ctrl.pools.shorten`) *after* the synthetic documents
    are made: fabrication edits and checks the paper's window of the gold page, and the model
    reads the passage. ``show_urls``: ``"cued"`` (the paper: source URLs only in the domain-cued
    conditions) or ``"all"`` (every condition but SBA); see :func:`trek.ctrl.conditions.shows_urls`."""
    if show_urls not in cond.SHOW_URLS:
        raise CtrlError(f"show_urls must be one of {', '.join(cond.SHOW_URLS)}, not {show_urls!r}")
    if fabricator not in fabrication.FABRICATORS:
        raise CtrlError(f"unknown fabricator {fabricator!r}; choose one of {', '.join(fabrication.FABRICATORS)}")
    if fabricator == "model" and client is None:
        raise CtrlError("the model fabricator needs a model (--model)")
    out_dir = make_folder(out)
    given = fabrication_settings or fabrication.FabricationSettings()
    # the embedder is made when the first pool needs it (the similarity check of fabrication)
    fab: dict[str, Any] = {"emb": None, "settings": given,
                           "info": {"embedder": None, "min_similarity": None, "min_similarity_source": None}}

    def embedder_now() -> Embedder:
        if fab["emb"] is None:
            emb = make_embedder(embedder) if isinstance(embedder, str) or embedder is None else embedder
            fab["settings"] = fabrication.resolve_settings(given, emb)
            why = "given" if given.min_similarity is not None else default_min_similarity(emb.name)[1]
            fab["info"] = {"embedder": emb.name, "min_similarity": fab["settings"].min_similarity,
                           "min_similarity_source": why}
            fab["emb"] = emb
        return fab["emb"]

    def prepared(source_pools: Iterable[Pool]) -> Iterator[tuple[Pool, str | None]]:
        """Each pool with its republications and exact fabrications, and its way of fabrication."""
        for p in source_pools:
            made = _republished(p, republication_target, fallback_days)
            w = fabrication_way(made, fabricator, client is not None)
            if w is not None:
                emb = embedder_now()
                if w == "exact":
                    made = fabrication.fabricate_exact(made, emb, given)
            yield made, w

    held: list[Pool] | None = None
    items: Iterable[tuple[Pool, str | None]]
    spool: _Spool | None = None
    if client is not None and fabricator in ("auto", "model"):
        # model fabrication runs over every pool it fabricates: the prepared pools are spooled to
        # a file beside the build (one pass over ``pools``) and read again by offset, one at a time
        spool = _Spool(out_dir, prepared(pools))
        items = spool.items()
        if spool.model:
            records = RunDir(out_dir).fabrications_path  # the checkpoint: a build resumes from it
            closing_run(fabrication.afabricate_records(records, spool.model_pools(), client, embedder_now(), given),
                        client)
            items = spool.items(fabrication.iter_fabricated(records))
    else:
        items = prepared(pools)

    checks = cond.BudgetCounter(conditions, budgets)
    roles = ("gold", "outdated", "relevance", "republication", "fabrication")
    stats: dict[str, Any] = {"pools": 0, "contexts": 0, "ways": {"exact": 0, "model": 0, None: 0},
                             "made": {"exact": 0, "model": 0}, "pending": 0, "flagged": [],
                             "documents": dict.fromkeys(roles, 0)}
    renderer = Renderer()

    def write_contexts(fh: IO[bytes]) -> None:
        def built() -> Iterator[Pool]:
            for p, w in items:
                if doc_chars is not None:
                    p = shorten(p, doc_chars)
                stats["pools"] += 1
                stats["ways"][w] += 1
                if w is not None:
                    stats["made"][w] += len(p.role("fabrication"))
                if w == "model" and p.notes.get("fabrication", {}).get("pending"):
                    stats["pending"] += 1
                if p.notes.get("gold_check", {}).get("status") == "flagged":
                    stats["flagged"].append(p.question.id)
                for r in roles:
                    stats["documents"][r] += len(p.role(r))
                checks.add(p)
                if held is not None:
                    held.append(p)
                yield p
                for ctx in cond.assemble_pool(p, conditions, budgets=budgets, renderer=renderer,
                                              count_tokens=count_tokens, show_urls=show_urls):
                    stats["contexts"] += 1
                    fh.write(ctx.model_dump_json().encode("utf-8") + b"\n")

        write_pools(out_dir / POOLS_FILE, built())

    # pools.jsonl is written (and renamed into place) as contexts.jsonl is, one pool at a time
    try:
        atomic_write(out_dir / CONTEXTS_FILE, write_contexts)
    finally:
        if spool is not None:
            spool.close()
    ways, n_ctx, n_pools = stats["ways"], stats["contexts"], stats["pools"]
    fabricated = bool(ways["exact"] or ways["model"])
    messages: list[str] = []
    if fab["emb"] is not None:
        info = fab["info"]
        messages.append(f"fabrication similarity threshold {info['min_similarity']:.2f} with {info['embedder']} "
                        f"({info['min_similarity_source']})")
    if ways["exact"]:
        messages.append(f"fabrication: {stats['made']['exact']} documents for {ways['exact']} questions by exact "
                        "edits of annotated answer spans (no model)")
    if ways["model"]:
        assert client is not None
        pend = stats["pending"]
        messages.append(f"fabrication: {stats['made']['model']} documents for {ways['model']} questions with "
                        f"{client.model}" + (f"; {pend} questions pending (re-run to retry)" if pend else ""))
    if ways[None]:
        why = ("--fabricator none" if fabricator == "none" else
               "no annotated answer span and no model given (pass --model to add fabrication distractors)")
        messages.append(f"fabrication skipped for {ways[None]} of {n_pools} questions: {why}")
    fab_state = "done" if fabricated else "skipped"
    model_used = client.model if client is not None and ways["model"] else None
    messages += [f"warning: {line}" for line in checks.lines(fabricated=fabricated)]
    flagged = stats["flagged"]
    if flagged:
        messages.append(f"warning: {len(flagged)} question(s) flagged by discovery's gold check (no gold page states "
                        f"the reference answer; built as they are): {', '.join(flagged[:10])}"
                        + (" ..." if len(flagged) > 10 else ""))
    manifest: dict[str, Any] = {
        "source": source,
        "questions": n_pools,
        "conditions": list(conditions),
        "contexts": n_ctx,
        "fabrication": fab_state,
        "fabricator": fabricator,
        "fabricators": {k: ways[k] for k in ("exact", "model")},
        "model": model_used,
        "fabrication_similarity": fab["info"],
        "gold_check_flagged": flagged,
        "documents": stats["documents"],
        "budgets": vars(budgets or cond.Budgets()),
        "doc_chars": doc_chars,
        "show_urls": show_urls,
        "url_conditions": [c for c in conditions if cond.shows_urls(c, show_urls)],
        "versions": {
            "conditions": cond.VERSION,
            "republication": republication.VERSION,
            "fabrication": fabrication.VERSION if fabricated else None,
            **Renderer.versions(),
        },
        "tokens": "o200k_base" if count_tokens else None,
    }
    _atomic_text(out_dir / MANIFEST_FILE, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    messages.append(f"wrote {n_ctx} contexts for {n_pools} questions to {out_dir / CONTEXTS_FILE}")
    return BuildResult(out_dir, held, n_ctx, fab_state, messages)
