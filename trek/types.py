"""Persisted records shared by every Trek stage.

Every record is a pydantic model. Runs are directories of JSONL files, one record per line,
keyed by an ``id`` (or ``question_id``). :func:`read_jsonl` validates every line and raises a
:class:`RecordError` that names the file, the line number and the offending field;
:func:`write_jsonl` writes through a temporary file and an atomic rename, so a reader never sees
a torn or half-written file.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import gzip
import json
import logging
import operator
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    model_validator,
)

from trek.errors import RecordError
from trek.outputs import atomic_write

_log = logging.getLogger("trek")

__all__ = [
    "Record",
    "Question",
    "Document",
    "SearchResult",
    "SearchCall",
    "TrajectoryStep",
    "Usage",
    "Citation",
    "TrajectorySource",
    "Coverage",
    "FULL_COVERAGE",
    "TRAJECTORY_SCHEMA_VERSION",
    "Trajectory",
    "Grade",
    "RunMeta",
    "RecordError",
    "read_jsonl",
    "iter_jsonl",
    "write_jsonl",
    "iter_json_lines",
    "describe_validation_error",
    "utcnow",
]


def utcnow() -> str:
    """Current UTC time as an ISO-8601 string with a trailing ``Z``.

    With ``$SOURCE_DATE_EPOCH`` set (seconds since 1970, the reproducible-builds convention) every
    record gets that time instead, so that a replayed run writes byte-identical files.
    """
    fixed = os.environ.get("SOURCE_DATE_EPOCH")
    if fixed:
        try:
            now = _dt.datetime.fromtimestamp(int(fixed), _dt.UTC)
        except ValueError:
            raise ValueError(f"SOURCE_DATE_EPOCH must be whole seconds since 1970, not {fixed!r}") from None
    else:
        now = _dt.datetime.now(_dt.UTC)
    return now.replace(microsecond=0).isoformat().replace("+00:00", "Z")


class Record(BaseModel):
    """Base class: unknown fields are rejected so that typos surface on load."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    def to_json(self) -> str:
        return self.model_dump_json(exclude_none=False)


DocumentRole = Literal[
    "gold", "outdated", "relevance", "republication", "fabrication", "retrieved", "other"
]


def _whole(value: Any) -> Any:
    if isinstance(value, (bool, str)):
        raise ValueError(f"expected a whole number, got {value!r}")
    return value


#: A count (tokens, calls): a non-negative whole number (not ``true``, not ``"12"``, not ``12.7``).
Count = Annotated[int, Field(ge=0), BeforeValidator(_whole)]
#: A year a question is read against: a plausible calendar year.
Year = Annotated[int, Field(ge=1000, le=2999), BeforeValidator(_whole)]


class Question(Record):
    """One benchmark question.

    ``effective_year`` is the year against which relative time words ("current", "latest")
    are read; ``None`` when the source has no year (InfoDeepSeek) or only a bound such as
    ``before 2022``, which is kept verbatim in ``effective_year_raw``. ``grader`` names the
    grader of :mod:`trek.graders` for this question when it is not the dataset's own (``generic``
    for question sets other than the three source benchmarks); not written when unset.
    """

    id: str = Field(min_length=1)
    dataset: str = Field(min_length=1)
    question: str = Field(min_length=1)
    answers: list[str] = Field(min_length=1)
    effective_year: Year | None = None
    effective_year_raw: str | None = None
    gold_urls: list[str] = Field(default_factory=list)
    false_premise: bool = False
    split: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    grader: str | None = Field(default=None, exclude_if=lambda v: v is None)


class Document(Record):
    """A frozen page: a gold document, a distractor, or a retrieved page snapshot."""

    id: str = Field(min_length=1)
    url: str = Field(min_length=1)
    title: str = ""
    date: _dt.date | None = None
    text: str
    question_id: str | None = None
    role: DocumentRole = "other"
    supports_answer: str | None = None
    source: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class SearchResult(Record):
    url: str
    title: str = ""
    snippet: str = ""
    date: str | None = None


class SearchCall(Record):
    """One search issued by a system: the query, the backend, and the ranked results.

    ``round`` is the model turn that issued it (1-based; 0 for a search the system made before
    any model turn, as in search-then-read; ``None`` in records made before it was kept).
    ``cached`` tells whether the results came from the search cache (``None``: not known, e.g. a
    provider's native search). ``action`` is set for native OpenAI search only: the index of the
    ``web_search_call`` action the query belongs to. One action can run several queries and the
    API reports its sources per action, so every query of an action carries the action's
    sources.
    """

    query: str
    backend: str
    results: list[SearchResult] = Field(default_factory=list)
    error: str | None = None
    round: int | None = None
    cached: bool | None = None
    action: int | None = None


class Usage(Record):
    """Token usage of one or more model calls, and its price when the model's price is known."""

    prompt_tokens: Count = 0
    completion_tokens: Count = 0
    reasoning_tokens: Count = 0
    cached_tokens: Count = 0
    calls: Count = 0
    cached_calls: Count = 0
    cost_usd: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = 0.0

    def _combine(self, other: Usage, op: Callable[[Any, Any], Any]) -> Usage:
        """Every count of both, combined by ``op``; the cost too when both have one."""
        both = self.cost_usd is not None and other.cost_usd is not None
        # built unchecked: a difference of two readings may be checked for a negative count by its caller
        return Usage.model_construct(**{f: op(getattr(self, f), getattr(other, f)) for f in Usage.model_fields
                                        if f != "cost_usd"}, cost_usd=op(self.cost_usd, other.cost_usd) if both else None)

    def __add__(self, other: Usage) -> Usage:
        return self._combine(other, operator.add)

    def __sub__(self, other: Usage) -> Usage:
        """What was spent between two readings of a running total (``now - before``)."""
        return self._combine(other, operator.sub)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


StepKind = Literal["search", "open", "tool", "answer"]


class TrajectoryStep(Record):
    """One call of a trajectory, in the order it was made, as the model saw it.

    * ``kind``: ``search`` (a web search), ``open`` (a page read: the agent's ``open_url``, a
      page search-then-read put in the prompt, a native ``open_page``/``find_in_page``),
      ``tool`` (any other tool call an imported trace shows: a weather tool, a calculator) or
      ``answer`` (the model's final reply).
    * ``round``: the model turn that issued the call, 1-based; 0 for calls the system made
      before the first model turn (search-then-read's search and pages).
    * ``tool``: the tool or action as named on the wire (``web_search``, ``open_url``,
      ``open_page``, ``find_in_page``; ``None`` for system-made calls and answers).
    * ``call_id``: the tool call's id in ``messages`` (agentic system).
    * ``query`` (search, find_in_page pattern) and ``url`` (open).
    * ``result_urls``: the URLs a search returned, in rank order.
    * ``search_index``: the position of this search in the trajectory's ``search_calls``.
    * ``cached``: the search, page or model reply came from a cache (``None``: not known).
    * ``page_status``: ``ok``, ``missing`` (not stored, not fetched) or ``failed`` (the live
      fetch was refused); ``page_source``: ``corpus``, ``fetch`` or ``none``.
    * ``shown_chars``: length of the text the model was shown for this call (for ``answer``:
      the length of the reply).
    * ``error``: what went wrong with this call, if anything.
    """

    kind: StepKind
    round: int
    tool: str | None = None
    call_id: str | None = None
    query: str | None = None
    url: str | None = None
    result_urls: list[str] = Field(default_factory=list)
    search_index: int | None = None
    cached: bool | None = None
    page_status: str | None = None
    page_source: str | None = None
    shown_chars: int | None = None
    error: str | None = None


TrajectoryStatus = Literal["ok", "pending", "failed", "no_answer"]

#: The version of the trajectory schema (``Trajectory`` and the records in it) this Trek writes
#: and reads. Bumped only by a change that an older reader would misread; adding an optional
#: field is not such a change.
TRAJECTORY_SCHEMA_VERSION = 1


def _unset(value: Any) -> bool:
    """True for a field left at its "not stated" default (``None`` or empty): such fields are
    not written, so runs recorded before they existed keep their exact bytes."""
    return value is None or value == [] or value == {}


class Citation(Record):
    """One source the final answer cites: its URL (or document id), title, and the cited text
    when the log gives it (Anthropic's ``cited_text``, inspect_ai's ``cited_text``)."""

    url: str = Field(min_length=1)
    title: str = ""
    cited_text: str | None = None


class TrajectorySource(Record):
    """Where an imported trajectory came from.

    ``format``: the importer (``openai-responses``, ``anthropic-messages``, ``inspect-ai``,
    ``chat-completions``, ``gemini``, or ``trek`` for a file written by hand in this schema);
    ``file``: the input file as given; ``record``: the record's 1-based position in that file
    (JSONL line, array position, inspect sample number); ``record_id``: the record's own id
    when it has one (response id, inspect sample id and epoch); ``model``: the model the log
    names.
    """

    format: str = Field(min_length=1)
    file: str
    record: int | None = None
    record_id: str | None = None
    model: str | None = None


QueryCoverage = Literal["all", "some", "none"]
ResultCoverage = Literal["all", "cited_only", "none"]
PageTextCoverage = Literal["full", "snippet", "encrypted", "none"]
UrlIdentity = Literal["urls", "document_ids", "redirects"]


class Coverage(Record):
    """What the log of a trajectory lets one observe (the rest happened, or not, unseen).

    * ``queries``: ``all`` (every search's query is recorded), ``some`` (some searches have no
      query, e.g. a search action logged without one), ``none`` (the format never shows
      queries: Chat Completions with ``web_search_options``).
    * ``results``: ``all`` (every search's ranked results are recorded), ``cited_only`` (only
      the pages the answer cites are known: Responses without ``action.sources``, Chat
      Completions, Gemini grounding chunks), ``none`` (no result is known).
    * ``page_text``: the least that the log (and the run's page store) holds for every
      retrieved page: ``full`` text, a ``snippet`` (cited text, a search snippet),
      ``encrypted`` (Anthropic's ``encrypted_content``: present but unreadable), ``none``.
    * ``url_identity``: what the result URLs are: ``urls`` (the pages' own URLs, so URL
      identity matching works), ``document_ids`` (ids that are not URLs), ``redirects``
      (redirect links such as Gemini's grounding URIs, not the pages' URLs).
    * ``notes``: why, in words (shown to a reader of the record).

    A trajectory without ``coverage`` (every run Trek's own runner wrote) is read as
    :data:`FULL_COVERAGE`: all queries, all results, full page text, real URLs.
    """

    queries: QueryCoverage = "all"
    results: ResultCoverage = "all"
    page_text: PageTextCoverage = "full"
    url_identity: UrlIdentity = "urls"
    notes: list[str] = Field(default_factory=list)


#: The coverage of a trajectory that states none (Trek's own runs): everything observed.
FULL_COVERAGE = Coverage()


class Trajectory(Record):
    """Everything one system did for one question.

    ``status``:

    * ``ok``: the model gave a final reply (``final_answer``);
    * ``pending``: a model or search call failed after its retries; no answer, tried again on
      the next run;
    * ``failed``: a call was rejected for this question alone (a 400 such as an over-long
      context, a search query the backend refused, an internal error); no answer, ``error``
      says why; the run went on with the other questions;
    * ``no_answer``: the model still called a tool after the forced final round, so it gave no
      final answer (``final_answer`` is ``None``). A final outcome, graded as an empty response.

    ``retrieved_urls`` lists every URL returned by any search call and every URL opened, in the
    order of ``steps``, exact duplicates removed keeping the first occurrence (paper C.1).
    ``steps`` records each call in order (see :class:`TrajectoryStep`). ``usage`` is the model
    usage of the question including the model-mediated search it caused; ``search_usage`` is
    that search part alone (a proxy model's or OpenAI search backend's calls).
    ``details`` holds a method's intermediate outputs (e.g. a Ctrl baseline's relevance scores,
    kept document ids or extracted evidence records). ``input_key`` digests everything that
    decided the trajectory (question, model, system, prompt version; for Ctrl the context); a
    finished trajectory is reused on a re-run only while it still matches (:mod:`trek.stage`).

    Fields of the documented trajectory schema that Trek's own runner does not set (written only
    when set, so older files keep their bytes and still load):

    * ``schema_version``: :data:`TRAJECTORY_SCHEMA_VERSION` when written by an importer or a
      user; absent means version 1;
    * ``citations``: the sources the final answer cites (:class:`Citation`);
    * ``source``: where an imported trajectory came from (:class:`TrajectorySource`);
    * ``coverage``: what its log lets one observe (:class:`Coverage`); absent means
      :data:`FULL_COVERAGE` (read it through :attr:`observed`).
    """

    question_id: str
    model: str
    system: dict[str, Any] = Field(default_factory=dict)
    search_calls: list[SearchCall] = Field(default_factory=list)
    retrieved_urls: list[str] = Field(default_factory=list)
    opened_urls: list[str] = Field(default_factory=list)
    final_answer: str | None = None
    status: TrajectoryStatus = "ok"
    error: str | None = None
    usage: Usage = Field(default_factory=Usage)
    messages: list[dict[str, Any]] = Field(default_factory=list)
    prompt_version: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)
    created_at: str = Field(default_factory=utcnow)
    steps: list[TrajectoryStep] = Field(default_factory=list)
    search_usage: Usage = Field(default_factory=Usage)
    input_key: str | None = None
    schema_version: Annotated[int, Field(ge=1), BeforeValidator(_whole)] | None = Field(default=None, exclude_if=_unset)
    citations: list[Citation] = Field(default_factory=list, exclude_if=_unset)
    source: TrajectorySource | None = Field(default=None, exclude_if=_unset)
    coverage: Coverage | None = Field(default=None, exclude_if=_unset)

    @model_validator(mode="after")
    def _known_version(self) -> Trajectory:
        if self.schema_version is not None and self.schema_version > TRAJECTORY_SCHEMA_VERSION:
            raise ValueError(f"schema_version {self.schema_version} is newer than this Trek reads "
                             f"({TRAJECTORY_SCHEMA_VERSION}); update Trek")
        return self

    @property
    def observed(self) -> Coverage:
        """The trajectory's coverage: ``coverage``, or :data:`FULL_COVERAGE` when it states none."""
        return self.coverage if self.coverage is not None else FULL_COVERAGE


GradeOutcome = Literal["correct", "incorrect", "not_attempted", "undecided", "unparsed", "pending", "failed"]


class Grade(Record):
    """The verdict of a dataset's grader on one response.

    ``outcome`` ``unparsed`` means the judge's reply could not be read after the allowed
    re-asks; it is reported as its own category and never counted as correct. ``undecided``: the
    judge (the exact judge, which abstains rather than guess) could not support a verdict;
    ``error`` says which rule could not decide and why (the decision in ``judge_raw`` in full). It is neither correct nor
    incorrect, and a cascade (``--judges exact,MODEL``) hands it to the next judge. ``pending``: the
    judge call failed (retried on the next run); ``failed``: grading this answer raised an
    internal error (``error`` says which; retried on the next run). ``input_key`` digests
    everything that decided the grade (see :func:`trek.grading.grade_input_key`); a grade is
    reused only while it still matches. (Files written before the field was renamed call it
    ``inputs_key``; they are read the same.)
    """

    @model_validator(mode="before")
    @classmethod
    def _legacy_key_name(cls, data: Any) -> Any:
        if isinstance(data, dict) and "inputs_key" in data and "input_key" not in data:
            data = dict(data)
            data["input_key"] = data.pop("inputs_key")
        return data


    question_id: str
    dataset: str
    response: str | None
    outcome: GradeOutcome
    method: Literal["exact", "judge", "none"] = "judge"
    grader: str
    grader_version: str
    judge_model: str | None = None
    judge_settings: dict[str, Any] = Field(default_factory=dict)
    judge_raw: list[str] = Field(default_factory=list)
    input_key: str | None = None
    error: str | None = None
    usage: Usage = Field(default_factory=Usage)
    created_at: str = Field(default_factory=utcnow)

    @property
    def correct(self) -> bool | None:
        """True/False for a decided grade, None for undecided, unparsed or pending ones."""
        if self.outcome == "correct":
            return True
        if self.outcome in ("incorrect", "not_attempted"):
            return False
        return None


class RunMeta(Record):
    """Metadata of a run directory (``run.json``). The API key is never stored."""

    run_id: str
    kind: str
    model: str | None = None
    endpoint: str | None = None
    prompt_versions: dict[str, str] = Field(default_factory=dict)
    config: dict[str, Any] = Field(default_factory=dict)
    trek_version: str | None = None
    created_at: str = Field(default_factory=utcnow)
    updated_at: str = Field(default_factory=utcnow)


R = TypeVar("R", bound=BaseModel)


def describe_validation_error(err: ValidationError) -> str:
    parts = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e.get("loc", ())) or "<record>"
        parts.append(f"field '{loc}': {e.get('msg', 'invalid')}")
    return "; ".join(parts)


def iter_json_lines(path: str | os.PathLike[str], *, torn_tail: bool = False,
                    pipes: bool = False, warn_torn: bool = True) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line number, object)`` for every non-blank line of a JSONL file.

    This is the one JSONL read loop of Trek: a missing file, a line that is not JSON or not a
    JSON object (``NaN`` and binary bytes included) raises :class:`RecordError` naming the file
    and line. It is :func:`trek.jsonio.iter_jsonl`: lines are read one at a time, bounded in
    length, nesting and (for a name ending in ``.gz``) decompression ratio; a named pipe or a
    device is refused (``pipes``: a pipe is read, for an input streamed on purpose).

    ``torn_tail``: the file is a record journal that a killed writer may have left with a
    partial last line (no newline at its end and not valid JSON); that line is dropped with a
    warning on the ``trek`` logger instead of raising (``warn_torn=False``: without the warning,
    when the stage executor reads the same file next and warns). Anywhere else a broken line
    still raises.
    """
    from trek.jsonio import iter_jsonl as bounded  # the bounded reader (nesting, size, pipes)

    yield from bounded(path, pipes=pipes, torn_tail=torn_tail, warn_torn=warn_torn)


@functools.cache
def subset_model(model: type[BaseModel], fields: tuple[str, ...]) -> type[BaseModel]:
    """A model of ``model``'s ``fields`` alone (same types, defaults and constraints; other keys
    ignored): a reader that needs a few fields of large records validates only those."""
    unknown = [f for f in fields if f not in model.model_fields]
    if unknown:
        raise TypeError(f"{model.__name__} has no field(s) {unknown}")
    defs: dict[str, Any] = {f: (model.model_fields[f].annotation, model.model_fields[f]) for f in fields}
    return create_model(f"{model.__name__}Subset", __config__=ConfigDict(extra="ignore"), **defs)


def iter_jsonl(path: str | os.PathLike[str], model: type[R], *, torn_tail: bool = False) -> Iterator[R]:
    """Yield validated records from a JSONL file; blank lines are allowed and skipped
    (``torn_tail``: see :func:`iter_json_lines`)."""
    for lineno, obj in iter_json_lines(path, torn_tail=torn_tail):
        try:
            yield model.model_validate(obj)
        except ValidationError as e:
            raise RecordError(path, lineno, f"{model.__name__}: {describe_validation_error(e)}") from None


def read_jsonl(path: str | os.PathLike[str], model: type[R]) -> list[R]:
    """Read and validate a whole JSONL file of ``model`` records."""
    return list(iter_jsonl(path, model))


def _dump(rec: BaseModel | dict[str, Any]) -> str:
    if isinstance(rec, BaseModel):
        return rec.model_dump_json()
    return json.dumps(rec, ensure_ascii=False, separators=(",", ":"), default=str)


def write_jsonl(path: str | os.PathLike[str], records: Iterable[BaseModel | dict[str, Any] | bytes]) -> Path:
    """Write records atomically through :func:`trek.outputs.atomic_write` (a temporary file in the
    same folder, fsync, then a rename; never over a device, a pipe or a folder; a failed write
    raises :class:`~trek.outputs.OutputError` and leaves the previous file).

    A name ending in ``.gz`` is gzip-compressed with no time stamp or name in its header, so the
    same records always give the same bytes. A ``bytes`` item is one JSON line written as it is.
    """
    p = Path(path)

    def write(raw: IO[bytes]) -> None:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) if p.suffix == ".gz" else \
                contextlib.nullcontext(raw) as fh:
            for rec in records:
                if isinstance(rec, bytes):  # a line as it already is in a record file (compaction)
                    fh.write(rec if rec.endswith(b"\n") else rec + b"\n")
                else:
                    fh.write(_dump(rec).encode("utf-8") + b"\n")

    return atomic_write(p, write)
