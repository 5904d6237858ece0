"""What every importer shares: reading input records, matching them to questions, turning one
parsed record into a :class:`~trek.types.Trajectory` with honest coverage, and writing the run
directory all at once.

An importer module parses one provider record into a :class:`Parsed` (searches, opened pages,
citations, the answer, usage, what the log hides, and the page text it carries). The rest is
here, the same for every format:

* :func:`read_records` reads ``.json`` (one record or an array of records) and ``.jsonl`` (one
  record a line, ``.jsonl.gz`` too); a record is a bare provider object or a wrapper
  ``{"question_id": ..., "record": {...}}``. Broken input raises :class:`ImportFailure` naming
  the file and the line or record;
* :func:`match_questions` pairs records with questions: wrapped records by id, bare records in
  the order of the questions file;
* :func:`trajectory` builds the record: ``retrieved_urls`` (search results, opened pages, cited
  pages, in order, exact duplicates dropped), an ``answer`` step, ``source``, and ``coverage``
  (queries and results as the parser saw them; page text and URL identity worked out from the
  pages and URLs themselves);
* :func:`write_run` writes ``questions.jsonl``, ``answers.jsonl``, ``run.json`` and
  ``pages.sqlite`` into a temporary folder beside the target and renames it into place at the
  end, so a failed import leaves no run directory (or the previous one untouched).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from trek import jsonio
from trek.imports.fields import link_kind
from trek.outputs import staged_folder
from trek.pages import Page, PageStore, normalize_url
from trek.types import (
    TRAJECTORY_SCHEMA_VERSION,
    Citation,
    Coverage,
    Question,
    RecordError,
    RunMeta,
    SearchCall,
    Trajectory,
    TrajectorySource,
    TrajectoryStep,
    Usage,
    iter_json_lines,
    utcnow,
    write_jsonl,
)
from trek.urls import unique_urls


def iso_time_ns(value: Any) -> int:
    """An ISO 8601 time (``Z`` or an offset; none is UTC) as Unix nanoseconds; 0 when it is not one."""
    if not isinstance(value, str) or not value.strip():
        return 0
    try:
        t = _dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return 0
    if t.tzinfo is None:
        t = t.replace(tzinfo=_dt.UTC)
    delta = t - _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


__all__ = [
    "iso_time_ns",
    "ImportFailure",
    "InputRecord",
    "PageText",
    "Parsed",
    "read_records",
    "iter_records",
    "iter_matched",
    "match_questions",
    "match_traces",
    "trajectory",
    "page_rows",
    "PageSpool",
    "write_run",
    "url_identity",
    "as_dict",
    "text_of",
    "REDIRECT_HOSTS",
]

PageKind = Literal["full", "snippet", "encrypted"]
#: Order of what a log can hold of a page, best first (``none``: nothing at all).
_PAGE_RANK = {"full": 0, "snippet": 1, "encrypted": 2, "none": 3}

#: Hosts whose links are redirects to the real page (Gemini / Vertex AI grounding).
REDIRECT_HOSTS = ("vertexaisearch.cloud.google.com",)
_URL = re.compile(r"^[a-z][a-z0-9+.\-]*://[^/\s]+", re.IGNORECASE)


class ImportFailure(ValueError):
    """An input file cannot be imported; the message names the file and the record."""


@dataclass
class InputRecord:
    """One record of an input file: where it is, its data and the question id of its wrapper."""

    file: Path
    position: int
    data: Any
    question_id: str | None = None
    unit: str = "record"
    #: Texts of a trace where its question may be (its input, its root span's input, the first
    #: model call's user messages): a trace naming no question id is matched by them.
    texts: tuple[str, ...] = ()
    #: What the trace is called in messages (``trace 4bf9...``).
    label: str | None = None

    @property
    def where(self) -> str:
        return f"{self.file}, {self.unit} {self.position}"

    def fail(self, message: str) -> ImportFailure:
        return ImportFailure(f"{self.where}: {message}")


@dataclass
class PageText:
    """What a log holds of one page: ``full`` text the agent was shown (a tool's output), a
    ``snippet`` (cited text, a search snippet) or ``encrypted`` content (unreadable)."""

    url: str
    kind: PageKind
    text: str = ""
    title: str = ""
    date: str | None = None


@dataclass
class Parsed:
    """One record as an importer read it (see the module docstring). ``seen_urls``: pages the
    log shows the agent met without tying them to a search (Gemini's grounding chunks)."""

    answer: str | None = None
    model: str | None = None
    record_id: str | None = None
    status: str = "ok"
    error: str | None = None
    searches: list[SearchCall] = field(default_factory=list)
    steps: list[TrajectoryStep] = field(default_factory=list)
    opened: list[str] = field(default_factory=list)
    citations: list[Citation] = field(default_factory=list)
    seen_urls: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    queries: Literal["all", "some", "none"] = "all"
    results: Literal["all", "cited_only", "none"] = "all"
    url_identity: Literal["urls", "document_ids", "redirects"] | None = None
    #: False for formats that never carry page text (coverage ``page_text`` is then ``none``).
    has_page_text: bool = True
    #: The model turn of the final answer (default: the last step's).
    answer_round: int | None = None
    notes: list[str] = field(default_factory=list)
    pages: list[PageText] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)


# -- reading ---------------------------------------------------------------------------------------
def load_json(path: Path) -> Any:
    """The JSON value of ``path`` (``ImportFailure`` naming the file and position when broken),
    read through the bounded reader (:mod:`trek.jsonio`: nesting, size, decompression ratio)."""
    try:
        return jsonio.load_json(path)
    except RecordError as e:
        raise ImportFailure(str(e)) from None


def _is_wrapper(obj: Any) -> bool:
    return isinstance(obj, dict) and "record" in obj and "question_id" in obj


def _unwrap(rec: InputRecord) -> InputRecord:
    if not _is_wrapper(rec.data):
        return rec
    extra = sorted(set(rec.data) - {"question_id", "record"})
    if extra:
        raise rec.fail(f"a wrapper holds only 'question_id' and 'record', not {extra}")
    qid = rec.data["question_id"]
    if not isinstance(qid, (str, int)) or isinstance(qid, bool) or str(qid) == "":
        raise rec.fail(f"field 'question_id': expected a non-empty string, got {qid!r}")
    return InputRecord(rec.file, rec.position, rec.data["record"], str(qid), rec.unit)


def read_records(path: str | os.PathLike[str], *, is_item: Any = None) -> list[InputRecord]:
    """The records of one input file (see the module docstring), all at once (see
    :func:`iter_records` for one at a time).

    A ``.json`` file holding an array is an array of records, except when ``is_item`` says
    every element is an item of a single record (e.g. the output items of one Responses reply,
    as the Agents SDK lists them): then the whole array is one record.
    """
    return list(iter_records(path, is_item=is_item))


def iter_records(path: str | os.PathLike[str], *, is_item: Any = None) -> Iterator[InputRecord]:
    """:func:`read_records` one record at a time: a JSONL file is read line by line, so memory
    does not grow with the file (a ``.json`` file is one document and is read whole)."""
    p = Path(path)
    try:
        jsonio.check_regular(p)
    except RecordError as e:
        raise ImportFailure(str(e)) from None
    name = p.name.lower()
    n = 0
    if name.endswith((".jsonl", ".jsonl.gz", ".ndjson")):
        try:
            for line, obj in iter_json_lines(p):
                n += 1
                yield _unwrap(InputRecord(p, line, obj, unit="line"))
        except RecordError as e:
            raise ImportFailure(str(e)) from None
    else:
        data = load_json(p)
        if isinstance(data, list) and not (data and is_item is not None and all(is_item(x) for x in data)):
            for i, obj in enumerate(data, start=1):
                n += 1
                yield _unwrap(InputRecord(p, i, obj))
        else:
            n = 1
            yield _unwrap(InputRecord(p, 1, data))
    if not n:
        raise ImportFailure(f"{p}: holds no record")


# -- matching --------------------------------------------------------------------------------------
#: How a record names its question, for the messages of :func:`match_questions`.
_WRAP = "wrap them as {\"question_id\": ..., \"record\": ...}"
_NAME_IN_TRACE = "name the question in each trace (a question_id attribute, metadata or tag; see --question-key)"


def match_questions(
    records: Sequence[InputRecord], questions: Mapping[str, Question], questions_file: str | os.PathLike[str] | None,
    *, traces: bool = False,
) -> list[tuple[Question, InputRecord]]:
    """Pair every record with its question: a wrapper's ``question_id`` names it; bare records
    are taken in the order of the questions file, one record per question. ``traces``: the
    records are traces, which name their question themselves (the messages say so)."""
    return list(iter_matched(records, questions, questions_file, traces=traces))


def iter_matched(
    records: Iterable[InputRecord], questions: Mapping[str, Question], questions_file: str | os.PathLike[str] | None,
    *, traces: bool = False,
) -> Iterator[tuple[Question, InputRecord]]:
    """:func:`match_questions` one pair at a time, for records read one at a time: the first
    record decides whether the records are wrapped or bare; what is kept is the ids seen (wrapped)
    or the position in the questions file (bare), never the records."""
    qfile = questions_file or "the questions file"
    how = _NAME_IN_TRACE if traces else _WRAP
    what = "a trace naming no question among traces naming one" if traces else "a bare record among wrapped ones"
    order = iter(questions.values())
    seen: dict[str, str] = {}
    first: InputRecord | None = None
    bare_files: set[str] = set()
    n_bare = 0
    it = iter(records)
    for r in it:
        if first is None:
            first = r
        if (r.question_id is None) != (first.question_id is None):
            wrapped, plain = (first, r) if r.question_id is None else (r, first)
            raise plain.fail(f"{what} (e.g. {wrapped.where}): {how}, or none")
        if r.question_id is None:
            n_bare += 1
            bare_files.add(str(r.file))
            q = next(order, None)
            if q is None:  # more records than questions: count them all for the message
                for rest in it:
                    n_bare += 1
                    bare_files.add(str(rest.file))
                break
            yield q, r
            continue
        q = questions.get(r.question_id)
        if q is None:
            raise r.fail(f"field 'question_id': {r.question_id!r} is not a question of {qfile}")
        if r.question_id in seen:
            raise r.fail(f"question {r.question_id!r} already has a record ({seen[r.question_id]})")
        seen[r.question_id] = r.where
        yield q, r
    if n_bare and n_bare != len(questions):
        raise ImportFailure(
            f"{n_bare} {'trace' if traces else 'record'}(s) in {', '.join(sorted(bare_files))} "
            f"but {len(questions)} question(s) in {qfile}: {'traces' if traces else 'bare records'} naming no "
            f"question are matched to the questions in order, one each; {how} to import some questions only")


def _norm_text(text: str) -> str:
    return " ".join(text.casefold().split())


def match_traces(
    records: Sequence[InputRecord], questions: Mapping[str, Question], questions_file: str | os.PathLike[str] | None,
    *, in_order: bool = False,
) -> list[tuple[Question, InputRecord]]:
    """Pair every trace with its question, never by position unless asked:

    * a trace naming its question id (``--question-key``) is matched by it;
    * else by its question text: the question whose text (case and spacing aside) is the trace's
      input, or is contained in it (its root span's input, its first model call's user message);
    * ``in_order`` (``--in-order``): traces naming no id are taken in the order of the questions
      file instead, one per question (their count must then be that of the questions).

    Refused with a clear :class:`ImportFailure`: a trace whose id is not a question, a trace whose
    text matches no question or several, two traces of one question. A source may hold traces of
    only some of the questions. The pairs are in the order of the questions file."""
    qfile = questions_file or "the questions file"
    by_text: dict[str, list[Question]] = {}
    for q in questions.values():
        by_text.setdefault(_norm_text(q.question), []).append(q)
    taken: dict[str, InputRecord] = {}
    bare = [r for r in records if r.question_id is None]
    if in_order and bare:
        named = [r for r in records if r.question_id is not None]
        if named:
            raise bare[0].fail(f"a trace naming no question among traces naming one (e.g. {named[0].where}) with "
                               "--in-order: name the question in each trace, or in none")
        if len(bare) != len(questions):
            raise ImportFailure(f"{len(bare)} trace(s) but {len(questions)} question(s) in {qfile}: --in-order "
                                "matches one trace to each question in order")
        return list(zip(questions.values(), bare, strict=True))

    def what(r: InputRecord) -> str:
        return f"{r.where}" + (f" ({r.label})" if r.label else "")

    for r in records:
        if r.question_id is not None:
            q = questions.get(r.question_id)
            if q is None:
                raise r.fail(f"field 'question_id': {r.question_id!r} is not a question of {qfile}")
            how = "names"
        else:
            texts = [_norm_text(t) for t in r.texts if isinstance(t, str) and t.strip()]
            exact = {q.id: q for t in texts for q in by_text.get(t, [])}
            found = exact or {q.id: q for t in texts for key, qs in by_text.items() if key and key in t for q in qs}
            if not found:
                raise ImportFailure(f"{what(r)}: names no question id and holds the text of no question of {qfile}: "
                                    "name the question in each trace (a question_id attribute, metadata or tag; see "
                                    "--question-key), or pass --in-order to match the traces to the questions in order")
            if len(found) > 1:
                ids = ", ".join(sorted(found)[:5])
                raise ImportFailure(f"{what(r)}: names no question id and holds the text of several questions of "
                                    f"{qfile} ({ids}): name the question in the trace (see --question-key)")
            (q,) = found.values()
            how = "asks"
        if q.id in taken:
            raise ImportFailure(f"{what(r)} and {what(taken[q.id])} both {'name' if how == 'names' else 'ask'} "
                                f"question {q.id!r} ({q.question[:60]!r}): one trace per question; name the question "
                                "in each trace (see --question-key)")
        taken[q.id] = r
    return [(q, taken[q.id]) for q in questions.values() if q.id in taken]


# -- building the trajectory -----------------------------------------------------------------------
def url_identity(urls: Iterable[str]) -> Literal["urls", "document_ids", "redirects"]:
    """``redirects`` when any URL is a known redirect link, ``document_ids`` when any is not a
    URL at all, else ``urls``."""
    kinds = set()
    for u in urls:
        if not _URL.match(u):
            kinds.add("document_ids")
        elif any(normalize_url(u).startswith(h + "/") or normalize_url(u) == h for h in REDIRECT_HOSTS):
            kinds.add("redirects")
    if "redirects" in kinds:
        return "redirects"
    return "document_ids" if kinds else "urls"


def _page_text(urls: Sequence[str], pages: Sequence[PageText]) -> str:
    """The least that ``pages`` hold for every URL of ``urls`` (``full`` when there is none)."""
    best: dict[str, int] = {}
    for p in pages:
        k = normalize_url(p.url)
        best[k] = min(best.get(k, 3), _PAGE_RANK[p.kind])
    worst = max((best.get(normalize_url(u), 3) for u in urls), default=0)
    return next(k for k, v in _PAGE_RANK.items() if v == worst)


def spaces_encoded(url: str) -> str:
    """An http(s) URL with the spaces inside it percent-encoded (``%20``) and the blanks around it
    removed: a log may write a page's address as its title bar shows it (Gemini's grounding URIs
    do), and a space is never part of a URL on the wire. Anything else is returned as it is."""
    if isinstance(url, str) and " " in url:
        t = url.strip()
        if re.match(r"(?i)https?://", t):
            return t.replace(" ", "%20")
    return url


def _drop_bad_links(parsed: Parsed) -> None:
    """Leave out of ``parsed`` every link that is neither an http(s) URL nor a document id
    (``javascript:``, ``file:``, a ``..`` path, an overlong one: see :func:`trek.imports.fields.link_kind`),
    with a coverage note counting each such link once; such a value is never a retrieved URL, a
    link or a page key. Spaces in an http(s) URL are percent-encoded first (:func:`spaces_encoded`)."""
    bad: list[str] = []

    def fix(u: str | None) -> str | None:
        """The link as kept, or None when it is left out."""
        if u is None:
            return None
        u = spaces_encoded(u)
        if link_kind(u) != "bad":
            return u
        if u not in bad:
            bad.append(u)
        return None

    def fixed(urls: Iterable[str]) -> list[str]:
        return [v for v in (fix(u) for u in urls) if v is not None]

    parsed.steps = [s.model_copy(update={"url": fix(s.url), "result_urls": fixed(s.result_urls)})
                    for s in parsed.steps]
    parsed.searches = [c.model_copy(update={"results": [r.model_copy(update={"url": v}) for r in c.results
                                                        if (v := fix(r.url)) is not None]})
                       for c in parsed.searches]
    parsed.opened = fixed(parsed.opened)
    parsed.seen_urls = fixed(parsed.seen_urls)
    parsed.citations = [c.model_copy(update={"url": v}) for c in parsed.citations if (v := fix(c.url)) is not None]
    parsed.pages = [p if p.url == spaces_encoded(p.url) else dataclasses.replace(p, url=spaces_encoded(p.url))
                    for p in parsed.pages if link_kind(spaces_encoded(p.url)) == "http"]
    if bad:
        example = bad[0] if len(bad[0]) <= 60 else bad[0][:57] + "..."
        parsed.note(f"left out {len(bad)} link(s) that are neither http(s) URLs nor document ids (e.g. {example!r})")


def trajectory(question: Question, rec: InputRecord, parsed: Parsed, fmt: str, model: str | None) -> Trajectory:
    """The :class:`Trajectory` of one parsed record (see the module docstring)."""
    _drop_bad_links(parsed)
    steps = list(parsed.steps)
    urls: list[str] = []
    for s in steps:
        urls.extend(s.result_urls)
        if s.kind == "open" and s.url:
            urls.append(s.url)
    urls.extend(r.url for c in parsed.searches for r in c.results)
    urls.extend(parsed.seen_urls)
    urls.extend(c.url for c in parsed.citations)
    retrieved = unique_urls(urls)
    opened = unique_urls(parsed.opened)
    if parsed.answer is not None:
        last = max((s.round for s in steps), default=1)
        steps.append(TrajectoryStep(kind="answer", round=parsed.answer_round or max(last, 1),
                                    shown_chars=len(parsed.answer)))
    coverage = Coverage(
        queries=parsed.queries,
        results=parsed.results,
        page_text=_page_text(retrieved, parsed.pages) if parsed.has_page_text else "none",  # type: ignore[arg-type]
        url_identity=parsed.url_identity or url_identity(retrieved),
        notes=list(parsed.notes),
    )
    name = model or parsed.model or "unknown"
    answer = parsed.answer.strip() if parsed.answer is not None else None
    status = parsed.status
    if status == "ok" and answer is None:
        status = "no_answer"
    return Trajectory(
        question_id=question.id,
        model=name,
        system={"system": "imported", "format": fmt},
        search_calls=parsed.searches,
        retrieved_urls=retrieved,
        opened_urls=opened,
        final_answer=answer if status == "ok" else None,
        status=status,  # type: ignore[arg-type]
        error=parsed.error,
        usage=parsed.usage,
        details=parsed.details,
        steps=steps,
        schema_version=TRAJECTORY_SCHEMA_VERSION,
        citations=parsed.citations,
        source=TrajectorySource(format=fmt, file=str(rec.file), record=rec.position, record_id=parsed.record_id,
                                model=parsed.model),
        coverage=coverage,
    )


# -- pages -----------------------------------------------------------------------------------------
#: Placeholder reason of a page the log holds only encrypted.
ENCRYPTED_REASON = "the imported log holds this page's text only encrypted"
_SNIPPET_JOIN = "\n\n[...]\n\n"


def page_rows(pages: Iterable[PageText]) -> list[Page]:
    """The page store rows of a log's pages: per URL identity the best the log holds (full text
    over snippets over encrypted content); several snippets of one page are joined, each once."""
    best: dict[str, list[PageText]] = {}
    for p in pages:
        if not p.url or link_kind(p.url) != "http" or (p.kind != "encrypted" and not p.text.strip()):
            continue
        k = normalize_url(p.url)
        have = best.get(k)
        if have is None or _PAGE_RANK[p.kind] < _PAGE_RANK[have[0].kind]:
            best[k] = [p]
        elif p.kind == have[0].kind == "snippet" and all(p.text.strip() != h.text.strip() for h in have):
            have.append(p)
    rows = []
    for k, group in best.items():
        first = group[0]
        title = next((g.title for g in group if g.title), "")
        date = next((g.date for g in group if g.date), None)
        if first.kind == "encrypted":
            rows.append(Page(url=first.url, key=k, title=title, date=date, text="", status="encrypted",
                             source="log", error=ENCRYPTED_REASON))
        else:
            text = _SNIPPET_JOIN.join(g.text.strip() for g in group) if first.kind == "snippet" else first.text
            rows.append(Page(url=first.url, key=k, title=title, date=date, text=text, status="ok",
                             source="snippet" if first.kind == "snippet" else "log"))
    return rows


class PageSpool:
    """:func:`page_rows` for pages met one trajectory at a time, kept on disk (a temporary SQLite
    file) instead of in memory: an import's memory does not grow with the page text its log holds.
    :meth:`add` the pages as they come; :meth:`rows` gives the same rows :func:`page_rows` gives
    for all of them, in the order their URLs first came; :meth:`close` removes the file."""

    def __init__(self) -> None:
        import sqlite3
        import tempfile

        fd, name = tempfile.mkstemp(prefix="trek-import-pages-", suffix=".sqlite")
        os.close(fd)
        self.path = Path(name)
        self.db = sqlite3.connect(name)
        self.db.execute("PRAGMA journal_mode=OFF")
        self.db.execute("PRAGMA synchronous=OFF")
        self.db.execute("CREATE TABLE page (n INTEGER PRIMARY KEY, key TEXT UNIQUE, url TEXT, kind TEXT, title TEXT, "
                        "date TEXT)")
        self.db.execute("CREATE TABLE part (key TEXT, text TEXT)")
        self.db.execute("CREATE INDEX part_key ON part(key)")

    def add(self, pages: Iterable[PageText]) -> None:
        for p in pages:
            if not p.url or link_kind(p.url) != "http" or (p.kind != "encrypted" and not p.text.strip()):
                continue
            k = normalize_url(p.url)
            row = self.db.execute("SELECT kind, title, date FROM page WHERE key = ?", (k,)).fetchone()
            if row is None:
                self.db.execute("INSERT INTO page (key, url, kind, title, date) VALUES (?, ?, ?, ?, ?)",
                                (k, p.url, p.kind, p.title, p.date))
                self.db.execute("INSERT INTO part VALUES (?, ?)", (k, p.text))
            elif _PAGE_RANK[p.kind] < _PAGE_RANK[row[0]]:  # a better kind of text replaces what was kept
                self.db.execute("UPDATE page SET url = ?, kind = ?, title = ?, date = ? WHERE key = ?",
                                (p.url, p.kind, p.title, p.date, k))
                self.db.execute("DELETE FROM part WHERE key = ?", (k,))
                self.db.execute("INSERT INTO part VALUES (?, ?)", (k, p.text))
            elif p.kind == row[0] == "snippet":
                texts = [t for (t,) in self.db.execute("SELECT text FROM part WHERE key = ?", (k,))]
                if all(p.text.strip() != t.strip() for t in texts):
                    self.db.execute("INSERT INTO part VALUES (?, ?)", (k, p.text))
                    if not row[1] and p.title:
                        self.db.execute("UPDATE page SET title = ? WHERE key = ?", (p.title, k))
                    if not row[2] and p.date:
                        self.db.execute("UPDATE page SET date = ? WHERE key = ?", (p.date, k))

    def rows(self) -> Iterator[Page]:
        for k, url, kind, title, date in self.db.execute("SELECT key, url, kind, title, date FROM page ORDER BY n"):
            texts = [PageText(url=url, kind=kind, text=t, title=title or "", date=date)
                     for (t,) in self.db.execute("SELECT text FROM part WHERE key = ? ORDER BY rowid", (k,))]
            yield from page_rows(texts)

    def close(self) -> None:
        self.db.close()
        self.path.unlink(missing_ok=True)


# -- writing ---------------------------------------------------------------------------------------
@contextlib.contextmanager
def holding_out(out: str | os.PathLike[str]) -> Iterator[Path]:
    """Hold the write lock of the run folder ``out`` (:func:`trek.runs.run_lock`) for the block,
    so an import never writes or replaces a run another command is writing (``trek grade`` on
    the run ``--replace`` would swap away): that is a :class:`~trek.runs.RunLockedError` at once.
    A folder the lock had to create is removed again when the block leaves nothing else in it."""
    from trek.runs import LOCK, run_lock

    p = Path(out)
    if p.exists() and not p.is_dir():
        raise ImportFailure(f"{p}: exists and is not a folder")
    created = not p.exists()
    try:
        with run_lock(p):
            yield p
    finally:
        if created:
            with contextlib.suppress(OSError):
                if {c.name for c in p.iterdir()} <= {LOCK}:
                    (p / LOCK).unlink(missing_ok=True)
                    p.rmdir()


@contextlib.contextmanager
def _staging(out: Path, replace: bool) -> Iterator[Path]:
    """A temporary folder beside ``out`` that becomes ``out`` when the block succeeds, under
    ``out``'s write lock (:func:`holding_out`)."""
    from trek.runs import LOCK

    with holding_out(out):
        if any(c.name != LOCK for c in out.iterdir()) and not replace:
            raise ImportFailure(f"{out}: the run directory already exists; choose another --out or pass --replace")
        _clean_stale(out)
        with staged_folder(out, tag="import") as tmp:
            yield tmp


def _clean_stale(out: Path) -> None:
    """Remove what an import into ``out`` killed before its end left beside it (its hidden
    staging folder, a replaced run not yet removed): with ``out``'s lock held no other import
    into ``out`` is under way, so each one is stale."""
    import shutil

    for pattern in (f".{out.name}.import-*", f".{out.name}.old-*"):
        for stale in out.parent.glob(pattern):
            if stale.is_dir() and not stale.is_symlink():
                shutil.rmtree(stale, ignore_errors=True)


def write_run(
    out: str | os.PathLike[str],
    questions: Sequence[Question],
    trajectories: Iterable[Trajectory],
    pages: Iterable[Page],
    config: dict[str, Any],
    *,
    replace: bool = False,
    documents: Sequence[Any] | Callable[[], Sequence[Any]] = (),
    records: dict[str, Sequence[Any]] | Callable[[], dict[str, Sequence[Any]]] | None = None,
) -> Path:
    """Write the run directory ``out`` at once (see the module docstring). ``trajectories`` and
    then ``pages`` are consumed one at a time, in that order (each may be a generator, the pages
    one worked out from what the trajectories' parse found), so an import's memory does not grow
    with the log. ``documents``: a frozen corpus stored after the log's pages (a corpus page
    replaces the log's text of its URL); ``records``: more run files by name (the grades and
    trace records a log carries). Either may be a function, called once the trajectories are
    written (what they hold is found while the log is parsed)."""
    from trek import __version__, runs

    target = Path(out)
    found: set[str] = set()

    def noting_models() -> Iterator[Trajectory]:
        for t in trajectories:
            if t.model and t.model != "unknown":
                found.add(t.model)
            yield t

    with _staging(target, replace) as tmp:
        write_jsonl(tmp / runs.QUESTIONS, questions)
        write_jsonl(tmp / runs.ANSWERS, noting_models())
        models = sorted(found)
        store = PageStore(tmp / runs.PAGES)
        try:
            for p in pages:
                store.put(p)
            docs = documents() if callable(documents) else documents
            if docs:
                store.add_documents(docs)
        finally:
            store.close()
        more = records() if callable(records) else records
        for name, rows in (more or {}).items():
            if rows:
                write_jsonl(tmp / name, rows)
        now = utcnow()
        runs.write_meta(tmp, RunMeta(run_id=target.name, kind="import", model=models[0] if len(models) == 1 else None,
                                     config={**config, "system": {"system": "imported", "format": config["format"]},
                                             "models": models, "schema_version": TRAJECTORY_SCHEMA_VERSION},
                                     trek_version=__version__, created_at=now, updated_at=now))
    return target


# -- small readers shared by the formats -----------------------------------------------------------
def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def text_of(value: Any) -> str:
    """Text of a provider content value: a string, or the ``text`` of its parts."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(text_of(v) for v in value)
    if isinstance(value, dict):
        t = value.get("text")
        return t if isinstance(t, str) else ""
    return ""


def get(obj: Any, *names: str) -> Any:
    """The first of ``names`` that ``obj`` has (provider SDKs dump camelCase or snake_case)."""
    if isinstance(obj, dict):
        for n in names:
            if n in obj:
                return obj[n]
    return None
