"""The annotations an exact judge decides from: per question, its reference answers and its
annotated pages (which answer each page supports, its role and its date).

TrekBench-Mini annotates every page (``data/mini/documents.jsonl``: ``role``, ``supports_answer``,
``date``, ``metadata.valid_from``), and a Ctrl ``contexts.jsonl`` built from its pools carries the
same annotations for every document it shows (``role``, ``answer``, ``date``; synthetic ones
included). :class:`Annotations` holds them in one shape:

* :func:`from_mini` — the questions and pages of TrekBench-Mini;
* :func:`from_contexts` — the documents of Ctrl contexts, for the questions given (a Ctrl run's
  ``questions.jsonl``), merged with Mini's pages when the questions are Mini's;
* :func:`for_run` — what a run directory needs: Mini, plus the run's Ctrl contexts when its
  ``run.json`` names a contexts file that can be found.

An exact judge never guesses: :meth:`Annotations.question` raises :class:`MissingAnnotation`
(a ``ValueError``) naming what is missing (a question not annotated, reference answers that
differ from the annotated ones, a page without the answer it supports, a gold page without a
date), and :meth:`Annotations.page` does the same for a URL that is not an annotated page.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field

from trek.pages import normalize_url
from trek.types import Document, Question, Record

__all__ = [
    "AnnotatedPage",
    "Annotations",
    "MissingAnnotation",
    "from_mini",
    "from_contexts",
    "pool_urls",
    "for_run",
    "MINI_SOURCE",
]

MINI_SOURCE = "TrekBench-Mini"


class MissingAnnotation(ValueError):
    """The exact judge was asked about something the annotations do not cover (the message says what)."""


@dataclass(frozen=True)
class AnnotatedPage:
    """One annotated page of a question: its URL (``None`` when a Ctrl condition hides it), the id
    of its document, its role (gold, outdated, relevance, republication, fabrication), the answer
    it supports (``None``: not annotated), its date and the date its fact became true."""

    doc_id: str
    question_id: str
    role: str
    answer: str | None
    url: str | None = None
    date: _dt.date | None = None
    valid_from: _dt.date | None = None

    @classmethod
    def of(cls, d: Document) -> AnnotatedPage:
        return cls(doc_id=d.id, question_id=d.question_id or "", role=d.role, answer=d.supports_answer, url=d.url,
                   date=d.date, valid_from=_date(d.metadata.get("valid_from")))


def _date(value: object) -> _dt.date | None:
    if isinstance(value, _dt.date):
        return value
    if isinstance(value, str) and value:
        try:
            return _dt.date.fromisoformat(value[:10])
        except ValueError:
            return None
    return None


@dataclass
class Annotations:
    """Questions and their annotated pages, from one or more sources (``source`` names them)."""

    source: str
    questions: dict[str, Question] = field(default_factory=dict)
    pages: dict[str, list[AnnotatedPage]] = field(default_factory=dict)
    #: Normalized URL -> every annotated page with that URL (a URL belongs to one question in Mini).
    by_url: dict[str, list[AnnotatedPage]] = field(default_factory=dict)
    #: Question id -> what its search queries must aim at (:mod:`trek.query_targets`).
    targets: dict[str, Any] = field(default_factory=dict)
    #: Where the targets were read from (named in messages), ``None`` when no file was read.
    targets_file: str | None = None

    def add(self, question: Question, pages: Iterable[AnnotatedPage]) -> None:
        """Add a question and its pages (pages already known by document id are not repeated)."""
        self.questions.setdefault(question.id, question)
        have = self.pages.setdefault(question.id, [])
        known = {p.doc_id for p in have}
        for p in pages:
            if p.doc_id in known:
                continue
            known.add(p.doc_id)
            have.append(p)
            if p.url:
                self.by_url.setdefault(normalize_url(p.url), []).append(p)

    def merged(self, other: Annotations) -> Annotations:
        out = Annotations(f"{self.source} + {other.source}")
        for a in (self, other):
            for qid, q in a.questions.items():
                out.add(q, a.pages.get(qid, []))
            for qid, t in a.targets.items():
                out.targets.setdefault(qid, t)
            out.targets_file = out.targets_file or a.targets_file
        return out

    def query_targets(self, q: Question) -> Any:
        """What ``q``'s queries must aim at (:class:`trek.query_targets.QueryTargets`);
        raises :class:`MissingAnnotation` when the annotations have none for it."""
        self.question(q)
        found = self.targets.get(q.id)
        if found is None:
            where = self.targets_file or f"no {_targets_name()} was found for {self.source}"
            raise MissingAnnotation(f"question {q.id!r} has no query targets ({where}): the exact query test "
                                    "reads the entity, attribute, time window and competing names from them")
        return found

    def question(self, q: Question) -> list[AnnotatedPage]:
        """The annotated pages of ``q`` after checking that the annotations cover it: the question is
        annotated, its reference answers are the annotated ones, and every page states the answer it
        supports (gold pages also a date). Raises :class:`MissingAnnotation` naming what is missing."""
        known = self.questions.get(q.id)
        if known is None:
            raise MissingAnnotation(
                f"question {q.id!r} ({q.dataset}) is not in the annotations ({self.source}): the exact judge "
                "decides only annotated questions (TrekBench-Mini, or Ctrl contexts built from annotated pools)")
        if [a.strip() for a in known.answers] != [a.strip() for a in q.answers]:
            raise MissingAnnotation(
                f"question {q.id!r}: its reference answers {q.answers} differ from the annotated ones "
                f"{known.answers} ({self.source}); the annotations of its pages are relative to those")
        pages = self.pages.get(q.id, [])
        if not pages:
            raise MissingAnnotation(f"question {q.id!r} has no annotated page in {self.source}")
        for p in pages:
            if p.answer is None or not p.answer.strip():
                raise MissingAnnotation(f"question {q.id!r}: document {p.doc_id!r} ({p.role}) has no annotation of "
                                        f"the answer it supports (supports_answer) in {self.source}")
        return pages

    def competing(self, q: Question) -> list[str]:
        """Every answer the pages of ``q`` support, in page order, without repeats (acceptable ones
        included; the grader keeps apart which are acceptable)."""
        return list(dict.fromkeys(p.answer.strip() for p in self.question(q) if p.answer))

    def gold(self, q: Question) -> list[AnnotatedPage]:
        """The gold pages of ``q`` (checked: annotated, each dated)."""
        gold = [p for p in self.question(q) if p.role == "gold"]
        if not gold:
            raise MissingAnnotation(f"question {q.id!r} has no gold page in {self.source}")
        for p in gold:
            if p.date is None:
                raise MissingAnnotation(f"question {q.id!r}: gold document {p.doc_id!r} has no date in {self.source}")
        return gold

    def page(self, url: str) -> AnnotatedPage | None:
        """The annotated page at ``url`` (URL identity), ``None`` when it is not one."""
        found = self.by_url.get(normalize_url(url))
        return found[0] if found else None

    def unknown_urls(self, urls: Iterable[str]) -> list[str]:
        """The URLs of ``urls`` that are not annotated pages, in order, without repeats."""
        return list(dict.fromkeys(u for u in urls if self.page(u) is None))

    def fingerprint(self, q: Question) -> list[object]:
        """What the exact judge's verdicts on ``q`` depend on (part of the resume keys)."""
        pages: list[object] = [[p.doc_id, p.role, p.answer, p.url, str(p.date), str(p.valid_from)]
                               for p in self.question(q)]
        t = self.targets.get(q.id)
        return pages + ([t.fingerprint()] if t is not None else [])


def _targets_name() -> str:
    from trek.query_targets import FILE

    return FILE


def from_mini(path: str | os.PathLike[str] | None = None) -> Annotations:
    """The annotations of TrekBench-Mini (``data/mini`` or ``$TREK_MINI_DIR``; ``path`` to choose)."""
    from trek.datasets import load_benchmark

    bench = load_benchmark("mini", path)
    ann = Annotations(MINI_SOURCE)
    for q in bench.questions:
        ann.add(q, (AnnotatedPage.of(d) for d in bench.documents_for(q.id)))
    if bench.path is not None:
        from trek import query_targets

        file = Path(bench.path) / query_targets.FILE
        if file.is_file():
            try:
                targets = query_targets.load(file)
            except query_targets.QueryTargetsError as e:
                raise MissingAnnotation(str(e)) from None
            unknown = sorted(set(targets) - set(ann.questions))
            if unknown:
                raise MissingAnnotation(f"{file}: question id(s) not in TrekBench-Mini: {', '.join(unknown[:5])}")
            ann.targets, ann.targets_file = dict(targets), str(file)
    return ann


def from_contexts(path: str | os.PathLike[str], questions: Mapping[str, Question], *,
                  label: str | None = None) -> Annotations:
    """The documents of a Ctrl ``contexts.jsonl`` as annotated pages of ``questions`` (by id).

    A document's annotation is its ``answer``; its shown URL is kept only when it is the document's
    own (an ablation that shows another URL keeps the original), and a document whose URL the
    condition hides is known by the URL its pool gives it (:func:`pool_urls`). Contexts of
    questions not in ``questions`` are left out. ``label`` names the file in records (default:
    ``path`` as given)."""
    ann = Annotations(f"contexts {label or path}")
    pools = pool_urls(Path(path))
    for ctx in _read_contexts(Path(path)):
        q = questions.get(ctx.question_id)
        if q is None:
            continue
        ann.add(q, (AnnotatedPage(doc_id=d.doc_id, question_id=ctx.question_id, role=d.role, answer=d.answer,
                                  url=d.original_url or d.url or pools.get(d.doc_id),
                                  date=_date(d.original_date or d.date))
                    for d in ctx.documents))
    return ann


class _PooledDoc(Record):
    model_config = ConfigDict(extra="ignore")
    id: str
    url: str | None = None


class _PoolUrls(Record):
    model_config = ConfigDict(extra="ignore")
    documents: list[_PooledDoc] = Field(default_factory=list)


_POOLS: dict[tuple[str, int, int], dict[str, str]] = {}


def pool_urls(contexts_path: str | os.PathLike[str]) -> dict[str, str]:
    """Document id -> URL of the pools a contexts file was built from (``pools.jsonl`` beside it;
    empty when there is none): the URL of a document whose condition hides it. Read once while
    the file is unchanged."""
    from trek.runs import POOLS
    from trek.types import iter_jsonl

    path = Path(contexts_path).parent / POOLS
    if not path.is_file():
        return {}
    st = path.stat()
    key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    if key not in _POOLS:
        if len(_POOLS) >= 4:
            _POOLS.pop(next(iter(_POOLS)))
        _POOLS[key] = {d.id: d.url for p in iter_jsonl(path, _PoolUrls) for d in p.documents if d.url}
    return _POOLS[key]


_CONTEXTS: dict[tuple[str, int, int], list] = {}


def _read_contexts(path: Path) -> list:
    """The contexts of ``path``, read once while the file is unchanged (Ctrl runs share one file)."""
    from trek.contexts import read_contexts

    st = path.stat()
    key = (str(path.resolve()), st.st_mtime_ns, st.st_size)
    if key not in _CONTEXTS:
        if len(_CONTEXTS) >= 4:
            _CONTEXTS.pop(next(iter(_CONTEXTS)))
        _CONTEXTS[key] = read_contexts(path)
    return _CONTEXTS[key]


def _find(path: str, run_dir: Path) -> Path | None:
    """``path`` as given (absolute or from the working folder), else from the run directory's parents."""
    p = Path(path)
    if p.is_absolute():
        return p if p.is_file() else None
    if p.is_file():
        return p
    for parent in run_dir.resolve().parents:
        if (parent / p).is_file():
            return parent / p
    return None


def for_run(run_dir: str | os.PathLike[str], *, contexts: str | os.PathLike[str] | None = None,
            mini_path: str | os.PathLike[str] | None = None, mini: Annotations | None = None,
            memo: dict[Any, Annotations] | None = None) -> Annotations:
    """The annotations a run needs: TrekBench-Mini (``mini`` when already loaded), plus Ctrl contexts
    (``contexts``, else the file its ``run.json`` names when it can be found) for the run's questions.
    ``memo`` keeps merged annotations for runs with the same contexts file and questions."""
    from trek import runs

    rd = Path(run_dir)
    ann = mini if mini is not None else from_mini(mini_path)
    ctx_path: Path | None = Path(contexts) if contexts is not None else None
    label = Path(contexts).name if contexts is not None else None
    if ctx_path is None:
        meta = runs.read_meta(rd)
        named = meta.config.get("contexts") if meta is not None else None
        ctx_path = _find(str(named), rd) if isinstance(named, str) and named else None
        label = Path(str(named)).name if ctx_path is not None else None  # never an absolute path in a record
    if ctx_path is not None:
        questions = runs.load_questions(rd)
        st = ctx_path.stat()
        key = (str(ctx_path.resolve()), st.st_mtime_ns, st.st_size, label,
               tuple((q.id, tuple(q.answers)) for q in questions.values()))
        if memo is not None and key in memo:
            return memo[key]
        ann = ann.merged(from_contexts(ctx_path, questions, label=label))
        if memo is not None:
            memo[key] = ann
    return ann


def check_questions(ann: Annotations, questions: Sequence[Question]) -> None:
    """Every question annotated (raises :class:`MissingAnnotation` for the first that is not)."""
    for q in questions:
        ann.question(q)
