"""TrekBench-Mini: the small, fictional, offline demo benchmark bundled in ``data/mini/``.

TrekBench-Mini is demo data written by the Trek authors about invented towns, clubs, companies and
people; it lets every later stage (local search, failure-attribution probes, controlled-distractor
contexts, notebooks) run offline. Its numbers are not results. See ``data/mini/README.md`` for the
content rules and the file formats.

:func:`load` reads ``questions.jsonl`` and ``documents.jsonl`` from the benchmark folder and, when
present, from each of its direct subfolders (``*/questions.jsonl``, ``*/documents.jsonl``), so that a
part written separately (e.g. ``_part2/``) is included before it is merged. Every line is validated by
:func:`trek.types.read_jsonl` (errors name the file, the line and the field) and the cross-references
are then checked; a broken reference raises :class:`MiniBenchmarkError` (a ``ValueError``) naming the
file and the id.
"""

from __future__ import annotations

import os
import string
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trek.paths import BUNDLED_MINI_DIR, env_path
from trek.runs import QUESTIONS
from trek.types import Document, Question, read_jsonl

__all__ = [
    "MINI_DIR_ENV",
    "QUESTIONS_FILE",
    "DOCUMENTS_FILE",
    "GENERATED_DIR",
    "is_generated",
    "VALUE_FIELDS",
    "AnswerSpan",
    "answer_span",
    "template_fields",
    "MiniBenchmark",
    "MiniBenchmarkError",
    "MiniQuestions",
    "MiniScan",
    "default_mini_dir",
    "load",
    "scan",
    "latest_document_answer",
]

#: Environment variable that overrides the folder of the bundled benchmark.
MINI_DIR_ENV = "TREK_MINI_DIR"
QUESTIONS_FILE = QUESTIONS  # the same name as a run's question set (trek.runs)
DOCUMENTS_FILE = "documents.jsonl"
#: The subfolder of generated timeline pages (:mod:`trek.datasets.mini_timeline`).
GENERATED_DIR = "generated"
#: The fields an answer-span template may use to write a value (see
#: :func:`trek.datasets.mini_timeline.format_value`).
VALUE_FIELDS = ("value", "value_words", "value_words_cap", "value_ordinal", "value_number")

#: ``data/mini`` at the repository root, located relative to this file.
BUNDLED_DIR = BUNDLED_MINI_DIR


class MiniBenchmarkError(ValueError):
    """The benchmark files are individually valid but do not fit together (ids, references, urls)."""


def default_mini_dir() -> Path:
    """``$TREK_MINI_DIR`` when set and non-empty, else the bundled ``data/mini`` folder."""
    return env_path(MINI_DIR_ENV, BUNDLED_DIR)


@dataclass
class MiniBenchmark:
    """The loaded benchmark: questions and documents in file order (root folder first).

    ``sources`` maps every question id and document id to the file it was read from.
    """

    questions: list[Question]
    documents: list[Document]
    path: Path | None = None
    sources: dict[str, Path] = field(default_factory=dict, repr=False)
    _grouped: tuple[tuple[int, int], dict[str | None, list[Document]]] | None = field(
        default=None, init=False, repr=False, compare=False)

    def question(self, question_id: str) -> Question:
        """The question with this id; ``KeyError`` when there is none."""
        for q in self.questions:
            if q.id == question_id:
                return q
        raise KeyError(f"no question with id {question_id!r} in TrekBench-Mini")

    @property
    def corpus(self) -> list[Document]:
        """The pages a search over TrekBench-Mini finds: the hand-written ones. Generated timeline
        pages (:func:`is_generated`) feed TrekBench-Ctrl's pools only; short and dense in the
        question's words, they would crowd the gold pages out of a BM25 ranking."""
        return [d for d in self.documents if not is_generated(d)]

    def documents_for(self, question_id: str, roles: str | Iterable[str] | None = None) -> list[Document]:
        """Documents of one question, in file order, optionally only those with the given role(s)."""
        wanted: set[str] | None
        if roles is None:
            wanted = None
        elif isinstance(roles, str):
            wanted = {roles}
        else:
            wanted = set(roles)
        return [d for d in self._by_question().get(question_id, ()) if wanted is None or d.role in wanted]

    def _by_question(self) -> dict[str | None, list[Document]]:
        """The documents grouped by question (file order), built once: a scan of every document per
        question would make the per-question look-ups quadratic. Rebuilt when ``documents`` is
        replaced or grows or shrinks."""
        stamp = (id(self.documents), len(self.documents))
        if self._grouped is None or self._grouped[0] != stamp:
            by: dict[str | None, list[Document]] = {}
            for d in self.documents:
                by.setdefault(d.question_id, []).append(d)
            self._grouped = (stamp, by)
        return self._grouped[1]


def latest_document_answer(docs: Iterable[Document]) -> str | None:
    """The ``supports_answer`` of the latest-dated document: the "pick the latest" shortcut.

    Undated documents are ignored. Returns ``None`` when no document is dated, or when several
    documents share the latest date and support different answers (the shortcut is then undecided).
    """
    dated = [d for d in docs if d.date is not None]
    if not dated:
        return None
    latest = max(d.date for d in dated if d.date is not None)
    answers = {d.supports_answer for d in dated if d.date == latest}
    if len(answers) != 1:
        return None
    return answers.pop()


@dataclass(frozen=True)
class AnswerSpan:
    """Where a page states the answer it supports: ``text[start:end]``; ``template`` says how to
    write another value there (``{value}`` unless the annotation gives one, e.g. ``{value_words}``
    where the page writes "four", or a phrase such as ``was acquired by {value}``)."""

    start: int
    end: int
    template: str = "{value}"


def template_fields(template: str) -> list[str]:
    """The ``{field}`` names of ``template``, in order (``ValueError`` for a malformed one)."""
    return [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]


def _span_problem(doc: Document) -> str | None:
    raw = doc.metadata.get("answer_span")
    if raw is None:
        return None
    if not isinstance(raw, dict) or set(raw) - {"start", "end", "template"}:
        return "must be an object with start, end and an optional template"
    start, end = raw.get("start"), raw.get("end")
    if not (isinstance(start, int) and isinstance(end, int)) or isinstance(start, bool) or isinstance(end, bool):
        return "start and end must be whole numbers"
    if not 0 <= start < end <= len(doc.text):
        return f"[{start}, {end}) is not a non-empty part of the text ({len(doc.text)} characters)"
    tpl = raw.get("template", "{value}")
    if not isinstance(tpl, str):
        return "template must be a string"
    try:
        names = template_fields(tpl)
    except ValueError as e:
        return f"template {tpl!r}: {e}"
    if len(names) != 1 or names[0] not in VALUE_FIELDS:
        return f"template {tpl!r} must hold exactly one of {', '.join('{' + f + '}' for f in VALUE_FIELDS)}"
    return None


def answer_span(doc: Document) -> AnswerSpan | None:
    """The page's annotated answer span (``metadata.answer_span``), or None when it has none."""
    raw = doc.metadata.get("answer_span")
    if raw is None or _span_problem(doc) is not None:
        return None
    return AnswerSpan(raw["start"], raw["end"], raw.get("template", "{value}"))


def _files(root: Path, name: str, skip: str | None = None) -> list[Path]:
    """``root/name`` (always, so a missing root file is reported) then ``root/*/name`` in name order
    (leaving out the subfolder ``skip``)."""
    subs = sorted(p for p in root.glob(f"*/{name}") if p.is_file() and p.parent.name != skip)
    return [root / name, *subs]


def is_generated(doc: Document) -> bool:
    """True for a page made by :mod:`trek.datasets.mini_timeline` (``metadata.generated``)."""
    return bool(doc.metadata.get("generated"))


def load(path: str | os.PathLike[str] | None = None, *, generated: bool = True) -> MiniBenchmark:
    """Load and check TrekBench-Mini from ``path`` (default: :func:`default_mini_dir`).

    ``generated=False`` leaves out the generated timeline pages (the ``generated/`` subfolder,
    see :mod:`trek.datasets.mini_timeline`): the hand-written benchmark alone.

    Raises :class:`trek.types.RecordError` for a missing file or an invalid line, and
    :class:`MiniBenchmarkError` for duplicate ids or urls, a document pointing at an unknown
    question, a question without gold documents, or ``gold_urls`` that differ from the urls of the
    question's gold documents.
    """
    root = Path(path).expanduser() if path is not None else default_mini_dir()
    if not root.is_dir():
        raise MiniBenchmarkError(f"{root}: TrekBench-Mini folder does not exist")

    sources: dict[str, Path] = {}
    questions: list[Question] = []
    # the root folder must hold both files; a subfolder may hold either or both
    skip = None if generated else GENERATED_DIR
    q_files = _files(root, QUESTIONS_FILE, skip)
    d_files = _files(root, DOCUMENTS_FILE, skip)

    for f in q_files:
        for q in read_jsonl(f, Question):
            if q.id in sources:
                raise MiniBenchmarkError(
                    f"{f}: duplicate question id {q.id!r} (first defined in {sources[q.id]})"
                )
            sources[q.id] = f
            questions.append(q)
    q_by_id = {q.id: q for q in questions}

    documents: list[Document] = []
    doc_sources: dict[str, Path] = {}
    url_sources: dict[str, tuple[str, Path]] = {}
    for f in d_files:
        for d in read_jsonl(f, Document):
            if d.id in doc_sources:
                raise MiniBenchmarkError(
                    f"{f}: duplicate document id {d.id!r} (first defined in {doc_sources[d.id]})"
                )
            if d.url in url_sources:
                other, other_file = url_sources[d.url]
                raise MiniBenchmarkError(
                    f"{f}: document {d.id!r} repeats url {d.url} of document {other!r} ({other_file})"
                )
            problem = _span_problem(d)
            if problem is not None:
                raise MiniBenchmarkError(f"{f}: document {d.id!r}: metadata.answer_span {problem}")
            if d.question_id is not None and d.question_id not in q_by_id:
                raise MiniBenchmarkError(
                    f"{f}: document {d.id!r} points at unknown question {d.question_id!r}"
                )
            doc_sources[d.id] = f
            url_sources[d.url] = (d.id, f)
            documents.append(d)
    sources.update(doc_sources)  # question and document ids have different shapes ("mini:01:gold:1")

    gold_of: dict[str, list[Document]] = {}  # one pass: a search per question would be quadratic
    for d in documents:
        if d.role == "gold" and d.question_id is not None:
            gold_of.setdefault(d.question_id, []).append(d)
    for q in questions:
        gold = gold_of.get(q.id, [])
        if not gold:
            raise MiniBenchmarkError(f"{sources[q.id]}: question {q.id!r} has no gold documents")
        _check_gold_urls(q.id, q.gold_urls, {d.url for d in gold}, sources[q.id])

    return MiniBenchmark(questions=questions, documents=documents, path=root, sources=sources)


class MiniQuestions:
    """TrekBench-Mini's questions indexed, not loaded: per question the file it is in and the
    byte offset and length of its line, in arrays (a few dozen bytes a question). Iterating reads
    them again, one line at a time, and validates each as a :class:`~trek.types.Question`, in file
    order; ``limit`` keeps the first ``limit`` alone. A re-readable source for
    :func:`trek.stage.execute` (every pass gives the same questions)."""

    def __init__(self, files: list[Path]):
        from array import array

        self.files = files
        self.file_of, self.offsets, self.lengths = array("H"), array("q"), array("q")
        self.limit: int | None = None

    def __len__(self) -> int:
        return len(range(len(self.offsets))[:self.limit])  # slice semantics, as list[:limit]

    def __bool__(self) -> bool:
        return len(self) > 0

    def head(self, limit: int | None) -> MiniQuestions:
        """The first ``limit`` questions (all of them for ``None``), sharing this index."""
        out = MiniQuestions.__new__(MiniQuestions)
        out.files, out.file_of, out.offsets, out.lengths = self.files, self.file_of, self.offsets, self.lengths
        out.limit = limit
        return out

    def __iter__(self) -> Iterator[Question]:
        from trek.jsonio import loads

        fds: dict[int, int] = {}
        try:
            for n in range(len(self)):
                f = self.file_of[n]
                if f not in fds:
                    fds[f] = os.open(self.files[f], os.O_RDONLY | os.O_CLOEXEC)
                path = self.files[f]
                blob = os.pread(fds[f], self.lengths[n], self.offsets[n])
                if len(blob) != self.lengths[n]:
                    raise MiniBenchmarkError(f"{path}: changed while it was read (a line at byte "
                                             f"{self.offsets[n]} is gone)")
                yield Question.model_validate(loads(blob.decode("utf-8"), path))
        finally:
            for fd in fds.values():
                os.close(fd)


def _spans(path: Path, model: type[Any]) -> Iterator[tuple[int, int, int, Any]]:
    """``(line, offset, length, record)`` of a JSONL file, each line validated as ``model`` with
    the errors of :func:`trek.types.read_jsonl` (file, line and field)."""
    from pydantic import ValidationError

    from trek.jsonio import iter_jsonl_spans
    from trek.types import RecordError, describe_validation_error

    for line, offset, length, obj in iter_jsonl_spans(path):
        try:
            rec = model.model_validate(obj)
        except ValidationError as e:
            raise RecordError(path, line, f"{model.__name__}: {describe_validation_error(e)}") from None
        yield line, offset, length, rec


_MASK = (1 << 64) - 1


@dataclass
class MiniScan:
    """TrekBench-Mini checked as :func:`load` checks it, without holding it: the questions
    indexed (:class:`MiniQuestions`) and the documents read again on demand (:meth:`documents`).
    ``corpus_count``: how many documents are not generated (the search corpus)."""

    questions: MiniQuestions
    path: Path
    document_files: list[Path]
    corpus_count: int = 0

    def documents(self, corpus: bool = False) -> Iterator[Document]:
        """The documents in file order, validated again (``corpus``: the hand-written ones alone,
        as :attr:`MiniBenchmark.corpus`)."""
        for f in self.document_files:
            for _, _, _, d in _spans(f, Document):
                if not (corpus and is_generated(d)):
                    yield d


def scan(path: str | os.PathLike[str] | None = None, *, generated: bool = True) -> MiniScan:
    """Check TrekBench-Mini as :func:`load` does (the same errors, raised in the same order) while
    holding per question only its id, where its line is and a few numbers, and per document two
    hashes: a benchmark of any size is checked in a bounded amount of memory per question, and its
    questions and documents are read again from the files when they are needed.

    The duplicate and gold checks compare hashes first; a hash that repeats is confirmed against
    the files (reading them again) before an error names it, so a collision raises nothing."""
    from array import array

    root = Path(path).expanduser() if path is not None else default_mini_dir()
    if not root.is_dir():
        raise MiniBenchmarkError(f"{root}: TrekBench-Mini folder does not exist")
    skip = None if generated else GENERATED_DIR
    q_files = _files(root, QUESTIONS_FILE, skip)
    d_files = _files(root, DOCUMENTS_FILE, skip)

    questions = MiniQuestions(q_files)
    number: dict[str, int] = {}  # question id -> its number
    listed_sum, listed_n = array("Q"), array("l")
    repeated = bytearray()
    for fi, f in enumerate(q_files):
        for _, offset, length, q in _spans(f, Question):
            if q.id in number:
                first = q_files[questions.file_of[number[q.id]]]
                raise MiniBenchmarkError(f"{f}: duplicate question id {q.id!r} (first defined in {first})")
            number[q.id] = len(questions.offsets)
            questions.file_of.append(fi)
            questions.offsets.append(offset)
            questions.lengths.append(length)
            urls = set(q.gold_urls)
            listed_sum.append(sum(hash(u) & _MASK for u in urls) & _MASK)
            listed_n.append(len(urls))
            repeated.append(len(urls) != len(q.gold_urls))

    gold_sum, gold_n = array("Q", bytes(8 * len(listed_n))), array("l", bytes(8 * len(listed_n)))
    seen_ids: set[int] = set()
    seen_urls: set[int] = set()
    corpus = 0
    for fi, f in enumerate(d_files):
        for line, _, _, d in _spans(f, Document):
            h = hash(d.id)
            if h in seen_ids:
                first = _first_document(d_files, fi, line, "id", d.id)
                if first is not None:
                    raise MiniBenchmarkError(
                        f"{f}: duplicate document id {d.id!r} (first defined in {first[1]})")
            h_url = hash(d.url)
            if h_url in seen_urls:
                first = _first_document(d_files, fi, line, "url", d.url)
                if first is not None:
                    raise MiniBenchmarkError(
                        f"{f}: document {d.id!r} repeats url {d.url} of document {first[0].id!r} ({first[1]})")
            problem = _span_problem(d)
            if problem is not None:
                raise MiniBenchmarkError(f"{f}: document {d.id!r}: metadata.answer_span {problem}")
            if d.question_id is not None and d.question_id not in number:
                raise MiniBenchmarkError(f"{f}: document {d.id!r} points at unknown question {d.question_id!r}")
            seen_ids.add(h)
            seen_urls.add(h_url)
            corpus += not is_generated(d)
            if d.role == "gold" and d.question_id is not None:
                n = number[d.question_id]
                gold_sum[n] = (gold_sum[n] + (hash(d.url) & _MASK)) & _MASK
                gold_n[n] += 1
    del seen_ids, seen_urls
    result = MiniScan(questions, root, d_files, corpus)
    for qid, n in number.items():
        source = q_files[questions.file_of[n]]
        if gold_n[n] == 0:
            raise MiniBenchmarkError(f"{source}: question {qid!r} has no gold documents")
        if gold_n[n] != listed_n[n] or gold_sum[n] != listed_sum[n] or repeated[n]:
            _check_gold(result, n, qid, source)  # the exact comparison, and its message
    return result


def _first_document(files: list[Path], upto_file: int, upto_line: int, field_: str,
                    value: str) -> tuple[Document, Path] | None:
    """The first document before line ``upto_line`` of ``files[upto_file]`` whose ``field_`` is
    ``value``, with its file (``None``: a hash collision, no such document)."""
    for fi, f in enumerate(files[:upto_file + 1]):
        for line, _, _, d in _spans(f, Document):
            if fi == upto_file and line >= upto_line:
                return None
            if getattr(d, field_) == value:
                return d, f
    return None


def _check_gold(bench: MiniScan, n: int, qid: str, source: Path) -> None:
    # the message of load()'s check, from the question and its gold documents read again
    q = next(q for i, q in enumerate(bench.questions) if i == n)
    actual = {d.url for d in bench.documents() if d.role == "gold" and d.question_id == qid}
    _check_gold_urls(qid, q.gold_urls, actual, source)


def _check_gold_urls(qid: str, gold_urls: list[str], actual: set[str], source: Any) -> None:
    """A question's ``gold_urls`` must list each gold document's url once: else an error saying
    which urls are missing on either side (the one check of :func:`load` and :func:`scan`)."""
    listed = set(gold_urls)
    if listed != actual or len(gold_urls) != len(listed):
        parts = []
        if listed - actual:
            parts.append(f"listed but not a gold document's url: {sorted(listed - actual)}")
        if actual - listed:
            parts.append(f"gold documents not listed: {sorted(actual - listed)}")
        if len(gold_urls) != len(listed):
            parts.append("gold_urls has repeated entries")
        raise MiniBenchmarkError(
            f"{source}: question {qid!r}: gold_urls do not match its gold documents (" + "; ".join(parts) + ")"
        )
