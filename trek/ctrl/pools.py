"""Distractor pools (paper D.1-D.2): per question, the gold documents and candidate distractors.

A :class:`Pool` holds one question and its documents, each a :class:`trek.types.Document` whose
``role`` is ``gold``, ``outdated`` (temporality), ``relevance``, ``republication`` or
``fabrication``. Provenance lives in ``Document.metadata``:

``origin``     where the document came from (``mini``, ``longseal``, ``discovery``, ``synthetic``)
``policy``     which policy found or made it (e.g. ``longseal:12_docs``, ``republication``)
``synthetic``  true only for republication and fabrication documents
``source_doc`` for synthetic documents, the id of the document they were made from
``edits``      for synthetic documents, the exact ``{"old", "new"}`` text edits

``pools.jsonl`` holds one :class:`Pool` per line; :func:`read_pools` validates every line and
names the file, line and field of a bad one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from trek.ctrl.common import CtrlError, cut_window
from trek.types import Document, Question, Record, RecordError, iter_jsonl, read_jsonl, write_jsonl

__all__ = [
    "Pool",
    "HISTORICAL_TARGET",
    "RELEVANCE_TARGET",
    "DISTRACTOR_ROLES",
    "from_mini",
    "shorten",
    "from_longseal",
    "apply_quotas",
    "read_pools",
    "iter_pools",
    "write_pools",
    "PoolRecord",
    "SOURCES",
    "SourcePools",
    "source_pools",
]

#: Targets of D.2: 20 historical (temporality) and 10 relevance documents per question.
HISTORICAL_TARGET = 20
RELEVANCE_TARGET = 10
DISTRACTOR_ROLES = ("outdated", "relevance", "republication", "fabrication")


class Pool(Record):
    """One question with its gold documents and distractor candidates.

    ``origin`` names the source of the pool (``mini``, ``longseal``, ``discovery``); ``notes``
    records construction decisions (quotas applied, shortages, republication date policy,
    fabrication attempts and rejections).
    """

    question: Question
    documents: list[Document] = Field(default_factory=list)
    origin: str = "unknown"
    notes: dict[str, Any] = Field(default_factory=dict)

    @property
    def question_id(self) -> str:
        return self.question.id

    def role(self, role: str) -> list[Document]:
        """Documents with this role, in pool order."""
        return [d for d in self.documents if d.role == role]

    @property
    def gold(self) -> list[Document]:
        return self.role("gold")

    def anchor_date(self):
        """The gold-date anchor: the latest date among the gold documents (None when undated)."""
        dates = [d.date for d in self.gold if d.date is not None]
        return max(dates) if dates else None

    def without_synthetic(self) -> Pool:
        """A copy holding only the natural documents (synthetic ones are rebuilt by each build)."""
        docs = [d for d in self.documents if d.role not in ("republication", "fabrication")]
        return self.model_copy(update={"documents": docs})


def shorten(pool: Pool, chars: int) -> Pool:
    """A copy of ``pool`` whose documents are cut to passages of about ``chars`` characters.

    For a model that can only read short contexts (the embedded one). Each passage is centred
    on the document's annotated answer span (``metadata.answer_span``, see
    :mod:`trek.datasets.mini`), else on the first mention of the answer it supports (the head when
    it names none), snapped to whitespace; the cut is recorded in
    ``Document.metadata["shortened"]`` as ``{"start", "end", "of"}`` (characters of the original
    text), and an answer span is moved to the passage's characters (dropped when the cut leaves
    it out). :func:`trek.ctrl.build.build` (``doc_chars``) shortens after making synthetic
    documents, so fabrication edits the paper's window of the gold page and the model reads the
    passage around the edited span.
    """
    from trek.datasets.mini import answer_span

    if chars < 1:
        raise CtrlError(f"shorten: chars must be at least 1, not {chars}")
    docs = []
    for d in pool.documents:
        span = answer_span(d)
        if span is not None:
            start, end = span.start, span.end
        else:
            at = d.text.find(d.supports_answer) if d.supports_answer else -1
            start, end = (at, at + len(d.supports_answer or "")) if at >= 0 else (0, 0)
        lo, hi = cut_window(d.text, start, end, chars)
        raw = d.text[lo:hi]
        text = raw.strip()
        shift = lo + (len(raw) - len(raw.lstrip()))
        meta = {**d.metadata, "shortened": {"start": lo, "end": hi, "of": len(d.text)}}
        if span is not None:
            meta.pop("answer_span")
            if shift <= span.start and span.end - shift <= len(text):
                meta["answer_span"] = {**d.metadata["answer_span"], "start": span.start - shift,
                                       "end": span.end - shift}
        docs.append(d.model_copy(update={"text": text, "metadata": meta}))
    notes = {**pool.notes, "shortened_to_chars": chars}
    return pool.model_copy(update={"documents": docs, "notes": notes})


def _provenance(doc: Document, origin: str, policy: str) -> Document:
    meta = dict(doc.metadata)
    meta.setdefault("origin", origin)
    meta.setdefault("policy", policy)
    meta.setdefault("synthetic", False)
    return doc.model_copy(update={"metadata": meta}, deep=True)


def apply_quotas(
    pool: Pool, *, historical: int = HISTORICAL_TARGET, relevance: int = RELEVANCE_TARGET
) -> Pool:
    """Keep at most ``historical`` outdated and ``relevance`` relevance documents (pool order).

    Shortages are recorded in ``notes['shortage']``; nothing is padded.
    """
    kept: list[Document] = []
    counts = {"outdated": 0, "relevance": 0}
    limits = {"outdated": historical, "relevance": relevance}
    dropped = {"outdated": 0, "relevance": 0}
    for d in pool.documents:
        if d.role in limits:
            if counts[d.role] >= limits[d.role]:
                dropped[d.role] += 1
                continue
            counts[d.role] += 1
        kept.append(d)
    notes = dict(pool.notes)
    notes["quotas"] = {"outdated": historical, "relevance": relevance, "dropped": dropped}
    short = {r: limits[r] - counts[r] for r in limits if counts[r] < limits[r]}
    if short:
        notes["shortage"] = short
    else:
        notes.pop("shortage", None)
    return pool.model_copy(update={"documents": kept, "notes": notes})


def from_mini(
    path: str | os.PathLike[str] | None = None,
    *,
    question_ids: Sequence[str] | None = None,
    historical: int = HISTORICAL_TARGET,
    relevance: int = RELEVANCE_TARGET,
) -> list[Pool]:
    """Pools from TrekBench-Mini (bundled in ``data/mini``): its gold, outdated and relevance pages."""
    from trek.datasets import load_benchmark

    bench = load_benchmark("mini", path)
    wanted = set(question_ids) if question_ids is not None else None
    if wanted is not None:
        unknown = wanted - {q.id for q in bench.questions}
        if unknown:
            raise CtrlError(f"TrekBench-Mini has no question(s) {sorted(unknown)}")
    pools = []
    for q in bench.questions:
        if wanted is not None and q.id not in wanted:
            continue
        docs = [
            _provenance(d, "mini", f"mini:{d.role}")
            for d in bench.documents_for(q.id, ("gold", "outdated", "relevance"))
        ]
        pools.append(apply_quotas(Pool(question=q, documents=docs, origin="mini"), historical=historical,
                                  relevance=relevance))
    return pools


def from_longseal(
    path: str | os.PathLike[str],
    *,
    historical: int = HISTORICAL_TARGET,
    relevance: int = RELEVANCE_TARGET,
    strict: bool = False,
) -> list[Pool]:
    """Pools for SealQA from a LongSeal parquet file: gold and outdated snapshots.

    Outdated documents come in LongSeal's pool order (the 12-document pool first, then the
    documents the larger pools add), so a shortage in the small pool is filled from the larger
    ones; at most ``historical`` are kept. LongSeal has no relevance documents: they come from
    discovery, and the shortage is recorded in ``notes``.
    """
    from trek.datasets.longseal import load_longseal

    questions, documents, _report = load_longseal(path, strict=strict)
    by_q: dict[str, list[Document]] = {}
    for d in documents:
        pools_of = d.metadata.get("pools") or ["?"]
        by_q.setdefault(d.question_id or "", []).append(_provenance(d, "longseal", f"longseal:{pools_of[0]}"))
    out = []
    for q in questions:
        pool = Pool(question=q, documents=by_q.get(q.id, []), origin="longseal")
        out.append(apply_quotas(pool, historical=historical, relevance=relevance))
    return out


def read_pools(path: str | os.PathLike[str]) -> list[Pool]:
    """Read ``pools.jsonl``; raises :class:`trek.types.RecordError` naming file, line and field."""
    pools = read_jsonl(path, Pool)
    seen: set[str] = set()
    for i, p in enumerate(pools, start=1):
        _check_pool(path, i, p, seen)
    return pools


def iter_pools(path: str | os.PathLike[str]) -> Iterator[Pool]:
    """:func:`read_pools` one pool at a time (for :func:`trek.ctrl.build.build` of a large file:
    only the question ids seen so far are held); the same checks, raised when the bad line is
    reached."""
    seen: set[str] = set()
    for i, p in enumerate(iter_jsonl(path, Pool), start=1):
        _check_pool(path, i, p, seen)
        yield p


def _check_pool(path: str | os.PathLike[str], i: int, p: Pool, seen: set[str]) -> None:
    if p.question.id in seen:
        raise RecordError(path, i, f"duplicate question id {p.question.id!r}")
    seen.add(p.question.id)
    if not p.gold:
        raise RecordError(path, i, f"question {p.question.id!r} has no gold document")
    ids = [d.id for d in p.documents]
    if len(set(ids)) != len(ids):
        dup = sorted({x for x in ids if ids.count(x) > 1})
        raise RecordError(path, i, f"question {p.question.id!r}: duplicate document id(s) {dup}")


def write_pools(path: str | os.PathLike[str], pools: Iterable[Pool]) -> Path:
    """Write ``pools.jsonl`` atomically."""
    return write_jsonl(path, pools)


class PoolRecord(Record):
    """One question's record in a model-calling Ctrl stage (discovery, model fabrication), as its
    checkpoint file holds it: the pool the stage made (``pending``: what was made before a call
    failed or the budget stopped it; ``failed``: the pool as it came in, ``error`` says why), the
    ``input_key`` of what decided it (:meth:`trek.stage.Stage.input_key`) and the status."""

    question_id: str
    input_key: str
    status: Literal["ok", "pending", "failed"]
    error: str | None = None
    pool: Pool


#: Where ``trek ctrl build`` and ``trek ctrl discover`` take their pools from.
SOURCES = ("mini", "longseal", "pools", "wild")


class SourcePools:
    """The pools of ``source`` (one of :data:`SOURCES` but ``wild``, whose pools ``trek ctrl
    discover`` makes) cut to the quotas, only those of ``questions`` when given, as an iterable
    that can be gone over more than once: a pools file is read again each time, one pool at a
    time (a large file is never held); Mini and LongSeal are read whole, once. A bad source or a
    missing path raises :class:`~trek.ctrl.common.CtrlError` here; ids of ``questions`` without a
    pool are found by :meth:`missing` after a pass."""

    def __init__(self, source: str, *, mini_dir: str | os.PathLike[str] | None = None,
                 longseal: str | os.PathLike[str] | None = None, pools_file: str | os.PathLike[str] | None = None,
                 historical: int = HISTORICAL_TARGET, relevance: int = RELEVANCE_TARGET,
                 questions: Sequence[str] | None = None):
        self.pools_file, self.historical, self.relevance = pools_file, historical, relevance
        self.questions = list(questions or [])
        self._loaded: list[Pool] | None = None
        if source == "mini":
            self._loaded = from_mini(mini_dir, historical=historical, relevance=relevance)
        elif source == "longseal":
            if longseal is None:
                raise CtrlError("--source longseal needs --longseal PATH (the LongSeal parquet file)")
            self._loaded = from_longseal(longseal, historical=historical, relevance=relevance)
        elif source == "pools":
            if pools_file is None:
                raise CtrlError("--source pools needs --pools FILE (a pools.jsonl)")
        elif source == "wild":
            raise CtrlError("--source wild: first run 'trek ctrl discover --source wild --out pools.jsonl' (needs a "
                            "model and a search backend), then build with --source pools --pools pools.jsonl")
        else:
            raise CtrlError(f"--source must be one of {', '.join(SOURCES)}, got {source!r}")

    def __iter__(self) -> Iterator[Pool]:
        want = set(self.questions)
        if self._loaded is not None:
            src: Iterable[Pool] = self._loaded
        else:
            assert self.pools_file is not None
            src = (apply_quotas(p, historical=self.historical, relevance=self.relevance)
                   for p in iter_pools(self.pools_file))
        for p in src:
            if not want or p.question.id in want:
                yield p

    def missing(self, seen: Iterable[str]) -> None:
        """Raise :class:`~trek.ctrl.common.CtrlError` if an id of ``questions`` is not in ``seen``
        (the ids a pass over the pools gave)."""
        missing = sorted(set(self.questions) - set(seen))
        if missing:
            raise CtrlError(f"--questions: no pool for {missing}")


def source_pools(source: str, *, mini_dir: str | os.PathLike[str] | None = None,
                 longseal: str | os.PathLike[str] | None = None, pools_file: str | os.PathLike[str] | None = None,
                 historical: int = HISTORICAL_TARGET, relevance: int = RELEVANCE_TARGET,
                 questions: Sequence[str] | None = None) -> list[Pool]:
    """The pools of :class:`SourcePools` in a list (an id of ``questions`` without a pool is an
    error)."""
    sp = SourcePools(source, mini_dir=mini_dir, longseal=longseal, pools_file=pools_file, historical=historical,
                     relevance=relevance, questions=questions)
    pools = list(sp)
    sp.missing(p.question.id for p in pools)
    return pools
