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
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
from trek.types import write_jsonl

__all__ = ["BuildResult", "build", "POOLS_FILE", "CONTEXTS_FILE", "MANIFEST_FILE"]

POOLS_FILE, CONTEXTS_FILE, MANIFEST_FILE = POOLS, CONTEXTS, BUILD_MANIFEST  # named by trek.runs


@dataclass
class BuildResult:
    out: Path
    pools: list[Pool]
    contexts: int
    fabrication: str  # "skipped" or "done"
    messages: list[str] = field(default_factory=list)

    @property
    def pools_path(self) -> Path:
        return self.out / POOLS_FILE

    @property
    def contexts_path(self) -> Path:
        return self.out / CONTEXTS_FILE


def _atomic_text(path: Path, text: str) -> None:
    atomic_write(path, text)


def build(
    pools: Sequence[Pool],
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
    messages: list[str] = []
    base = [p.without_synthetic() for p in pools]
    made = [republication.add_republications(p, target=republication_target, fallback_days=fallback_days)
            for p in base]

    def way(p: Pool) -> str | None:
        if fabricator == "exact" or (fabricator == "auto" and fabrication.has_answer_span(p)):
            return "exact"
        if fabricator in ("auto", "model") and client is not None:
            return "model"
        return None

    ways = [way(p) for p in made]
    given = fabrication_settings or fabrication.FabricationSettings()
    settings = given
    emb: Embedder | None = None
    fab_info: dict[str, Any] = {"embedder": None, "min_similarity": None, "min_similarity_source": None}
    if any(ways):
        emb = make_embedder(embedder) if isinstance(embedder, str) or embedder is None else embedder
        settings = fabrication.resolve_settings(given, emb)
        why = "given" if given.min_similarity is not None else default_min_similarity(emb.name)[1]
        fab_info = {"embedder": emb.name, "min_similarity": settings.min_similarity, "min_similarity_source": why}
        messages.append(f"fabrication similarity threshold {settings.min_similarity:.2f} with {emb.name} ({why})")
    if "exact" in ways:
        assert emb is not None
        made = [fabrication.fabricate_exact(p, emb, given) if w == "exact" else p for p, w in zip(made, ways, strict=True)]
        n = sum(len(p.role("fabrication")) for p, w in zip(made, ways, strict=True) if w == "exact")
        messages.append(f"fabrication: {n} documents for {ways.count('exact')} questions by exact edits of "
                        "annotated answer spans (no model)")
    if "model" in ways:
        assert client is not None and emb is not None
        todo = [p for p, w in zip(made, ways, strict=True) if w == "model"]
        records = RunDir(out_dir).fabrications_path  # the checkpoint: a build resumes from it
        done = iter(closing_run(fabrication.afabricate_into(records, todo, client, emb, given), client))
        made = [next(done) if w == "model" else p for p, w in zip(made, ways, strict=True)]
        n = sum(len(p.role("fabrication")) for p, w in zip(made, ways, strict=True) if w == "model")
        pend = sum(1 for p, w in zip(made, ways, strict=True) if w == "model" and p.notes.get("fabrication", {}).get("pending"))
        messages.append(f"fabrication: {n} documents for {len(todo)} questions with {client.model}"
                        + (f"; {pend} questions pending (re-run to retry)" if pend else ""))
    skipped = ways.count(None)
    if skipped:
        why = ("--fabricator none" if fabricator == "none" else
               "no annotated answer span and no model given (pass --model to add fabrication distractors)")
        messages.append(f"fabrication skipped for {skipped} of {len(made)} questions: {why}")
    if doc_chars is not None:
        made = [shorten(p, doc_chars) for p in made]
    fab_state = "done" if any(ways) else "skipped"
    model_used = client.model if client is not None and "model" in ways else None
    write_pools(out_dir / POOLS_FILE, made)
    n_ctx = 0

    def records():
        nonlocal n_ctx
        for r in cond.iter_contexts(made, conditions, budgets=budgets, count_tokens=count_tokens,
                                    show_urls=show_urls):
            n_ctx += 1
            yield r

    write_jsonl(out_dir / CONTEXTS_FILE, records())
    messages += [f"warning: {line}" for line in
                 cond.budget_shortfalls(made, conditions, budgets, fabricated=any(ways))]
    flagged = [p.question.id for p in made if p.notes.get("gold_check", {}).get("status") == "flagged"]
    if flagged:
        messages.append(f"warning: {len(flagged)} question(s) flagged by discovery's gold check (no gold page states "
                        f"the reference answer; built as they are): {', '.join(flagged[:10])}"
                        + (" ..." if len(flagged) > 10 else ""))
    manifest: dict[str, Any] = {
        "source": source,
        "questions": len(made),
        "conditions": list(conditions),
        "contexts": n_ctx,
        "fabrication": fab_state,
        "fabricator": fabricator,
        "fabricators": {k: ways.count(k) for k in ("exact", "model")},
        "model": model_used,
        "fabrication_similarity": fab_info,
        "gold_check_flagged": flagged,
        "documents": {r: sum(len(p.role(r)) for p in made)
                      for r in ("gold", "outdated", "relevance", "republication", "fabrication")},
        "budgets": vars(budgets or cond.Budgets()),
        "doc_chars": doc_chars,
        "show_urls": show_urls,
        "url_conditions": [c for c in conditions if cond.shows_urls(c, show_urls)],
        "versions": {
            "conditions": cond.VERSION,
            "republication": republication.VERSION,
            "fabrication": fabrication.VERSION if any(ways) else None,
            **Renderer.versions(),
        },
        "tokens": "o200k_base" if count_tokens else None,
    }
    _atomic_text(out_dir / MANIFEST_FILE, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    messages.append(f"wrote {n_ctx} contexts for {len(made)} questions to {out_dir / CONTEXTS_FILE}")
    return BuildResult(out_dir, made, n_ctx, fab_state, messages)
