"""Shared pieces of the dataset loaders: errors, load reports and field parsers.

Every loader reads one source file and turns each of its rows into a :class:`~trek.types.Question`.
A row that cannot be read raises :class:`DatasetError` (``strict=True``, the default) or is skipped
and written down in the :class:`LoadReport` (``strict=False``). Rows are never dropped silently:
``rows_read == rows_kept + len(skipped) + rows_filtered_out`` always holds.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from trek.paths import env_path
from trek.types import Document, Question

__all__ = [
    "DATA_DIR_ENV",
    "DatasetError",
    "MissingDataError",
    "RowIssue",
    "SkippedRow",
    "LoadReport",
    "LoadResult",
    "LongSealResult",
    "default_data_dir",
    "parse_effective_year",
    "parse_bool",
    "parse_date",
    "check_url",
    "clean_urls",
    "question_hash",
    "make_question",
    "nonempty_text",
    "answer_list",
    "text_list",
    "require_columns",
    "SourceLayout",
    "LAYOUT",
]

#: Environment variable naming the folder that holds the source files.
DATA_DIR_ENV = "TREK_DATA_DIR"


def default_data_dir() -> Path:
    """``$TREK_DATA_DIR`` when set, else ``./datasets`` under the current directory."""
    return env_path(DATA_DIR_ENV, Path.cwd() / "datasets")


class DatasetError(ValueError):
    """A source file (or one of its rows) cannot be read.

    The message names the file, where in it the problem is (``line`` for CSV, ``index`` for JSON,
    ``row`` for parquet), the question id when known, and the offending field.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | os.PathLike[str] | None = None,
        row: int | None = None,
        row_kind: str = "row",
        qid: str | None = None,
        field: str | None = None,
    ):
        self.path = str(path) if path is not None else None
        self.row = row
        self.row_kind = row_kind
        self.qid = qid
        self.field = field
        self.reason = message
        where: list[str] = []
        if self.path is not None:
            where.append(self.path)
        if row is not None:
            where.append(f"{row_kind} {row}")
        if qid is not None:
            where.append(f"id {qid}")
        if field is not None:
            where.append(f"field '{field}'")
        prefix = ", ".join(where)
        super().__init__(f"{prefix}: {message}" if prefix else message)


class MissingDataError(FileNotFoundError):
    """One or more source files are not where the loader looks for them."""


class RowIssue(Exception):
    """Raised inside a loader for a bad field; turned into a DatasetError or a skipped row."""

    def __init__(self, field: str, reason: str):
        super().__init__(f"field '{field}': {reason}")
        self.field = field
        self.reason = reason


@dataclass(frozen=True)
class SkippedRow:
    """A row left out by a non-strict load, and why."""

    row: int | None
    id: str | None
    field: str | None
    reason: str

    def describe(self) -> str:
        return f"field '{self.field}': {self.reason}" if self.field else self.reason


@dataclass
class LoadReport:
    """What a loader did with one file.

    ``row_kind`` says how ``row`` numbers are counted: ``line`` (1-based physical line of a CSV
    record), ``index`` (0-based position in a JSON array) or ``row`` (0-based parquet row).
    ``rows_filtered_out`` is only set by a benchmark filter (see :mod:`trek.datasets.wild`).
    """

    dataset: str
    path: str
    row_kind: str = "row"
    rows_read: int = 0
    rows_kept: int = 0
    skipped: list[SkippedRow] = field(default_factory=list)
    rows_filtered_out: int = 0
    filter: str | None = None

    def issue(self, issue: RowIssue, *, row: int | None, qid: str | None, strict: bool) -> None:
        """Raise ``issue`` as a DatasetError (strict) or record the row as skipped."""
        if strict:
            raise DatasetError(
                issue.reason, path=self.path, row=row, row_kind=self.row_kind, qid=qid, field=issue.field
            ) from None
        self.skipped.append(SkippedRow(row=row, id=qid, field=issue.field, reason=issue.reason))

    def skip_reasons(self) -> dict[str, int]:
        """How many rows were skipped for each reason."""
        out: dict[str, int] = {}
        for s in self.skipped:
            out[s.describe()] = out.get(s.describe(), 0) + 1
        return out

    def is_consistent(self) -> bool:
        return self.rows_read == self.rows_kept + len(self.skipped) + self.rows_filtered_out


class LoadResult(NamedTuple):
    """Questions read from one file, plus the report; unpacks as ``questions, report``."""

    questions: list[Question]
    report: LoadReport


class LongSealResult(NamedTuple):
    """LongSeal questions, their documents, and the report."""

    questions: list[Question]
    documents: list[Document]
    report: LoadReport


# --------------------------------------------------------------------------------------------
# Field parsers. Each raises RowIssue with the field name so the caller can place the error.

_YEAR = re.compile(r"^(\d{4})$")
_YEAR_BOUND = re.compile(r"^(before|after|since|until)\s+(\d{4})$", re.IGNORECASE)
_MIN_YEAR, _MAX_YEAR = 1800, 2200


def parse_effective_year(value: Any, field_name: str = "effective_year") -> tuple[int | None, str | None]:
    """Read a reference year.

    Returns ``(year, raw)``: ``raw`` is the value as written (stripped), ``year`` the integer when
    the value is a plain year. A bound such as ``before 2022`` keeps ``year`` at ``None``. Empty
    values give ``(None, None)``; anything else is an error.
    """
    if value is None:
        return None, None
    if isinstance(value, bool):
        raise RowIssue(field_name, f"not a year: {value!r}")
    if isinstance(value, int):
        raw = str(value)
    elif isinstance(value, float):
        if value != value:  # NaN
            return None, None
        if not value.is_integer():
            raise RowIssue(field_name, f"not a year: {value!r}")
        raw = str(int(value))
    elif isinstance(value, str):
        raw = value.strip()
    else:
        raise RowIssue(field_name, f"not a year: {value!r}")
    if not raw:
        return None, None
    m = _YEAR.match(raw)
    if m:
        year = int(m.group(1))
        if not _MIN_YEAR <= year <= _MAX_YEAR:
            raise RowIssue(field_name, f"year out of range: {raw!r}")
        return year, raw
    m = _YEAR_BOUND.match(raw)
    if m:
        if not _MIN_YEAR <= int(m.group(2)) <= _MAX_YEAR:
            raise RowIssue(field_name, f"year out of range: {raw!r}")
        return None, raw
    raise RowIssue(field_name, f"unreadable year {raw!r} (expected e.g. '2024' or 'before 2022')")


_TRUE = {"true", "yes", "1", "t", "y"}
_FALSE = {"false", "no", "0", "f", "n"}


def parse_bool(value: Any, field_name: str) -> bool:
    """A flag written as a JSON boolean, 0/1, or text TRUE/FALSE (any case)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        v = value.strip().lower()
        if v in _TRUE:
            return True
        if v in _FALSE:
            return False
    raise RowIssue(field_name, f"expected TRUE or FALSE, got {value!r}")


_DATE_FORMATS = (
    "%Y-%m-%d",
    "%Y/%m/%d",
    "%B %d, %Y",
    "%b %d, %Y",
    "%d %B %Y",
    "%d %b %Y",
    "%b. %d, %Y",
    "%m/%d/%Y",
)


def parse_date(value: Any, field_name: str) -> _dt.date | None:
    """A document date: a date/datetime value, ISO text (date or timestamp), or a common
    written form such as ``March 5, 2024``. ``None``/empty gives ``None``."""
    if value is None:
        return None
    if isinstance(value, _dt.datetime):
        return value.date()
    if isinstance(value, _dt.date):
        return value
    if isinstance(value, float) and value != value:
        return None
    if not isinstance(value, str):
        raise RowIssue(field_name, f"unreadable date {value!r}")
    raw = value.strip()
    if not raw:
        return None
    iso = raw[:-1] + "+00:00" if raw.endswith("Z") else raw
    try:
        return _dt.datetime.fromisoformat(iso).date()
    except ValueError:
        pass
    for fmt in _DATE_FORMATS:
        try:
            return _dt.datetime.strptime(raw, fmt).date()
        except ValueError:
            continue
    raise RowIssue(field_name, f"unreadable date {raw!r}")


def check_url(value: Any, field_name: str) -> str:
    """Strip surrounding whitespace (including a stray ``\\r``) and require an http(s) scheme
    and a host. Fragments such as ``#:~:text=`` are kept as they are."""
    if not isinstance(value, str):
        raise RowIssue(field_name, f"URL is not text: {value!r}")
    url = value.strip()
    if not url:
        raise RowIssue(field_name, "empty URL")
    try:
        parts = urlsplit(url)
    except ValueError as e:
        raise RowIssue(field_name, f"malformed URL {url!r} ({e})") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise RowIssue(field_name, f"malformed URL {url!r} (needs an http(s) scheme and a host)")
    return url


def clean_urls(values: list[Any], field_name: str) -> tuple[list[str], list[str]]:
    """Check a list of URLs; returns ``(urls, warnings)``.

    URLs are kept as given (order and any repeats), only stripped. A URL with whitespace inside
    it is kept too but reported in ``warnings`` (some sources glue two URLs together).
    """
    urls: list[str] = []
    warnings: list[str] = []
    for i, v in enumerate(values):
        url = check_url(v, f"{field_name}[{i}]")
        if re.search(r"\s", url):
            warnings.append(f"{field_name}[{i}] contains whitespace")
        urls.append(url)
    return urls, warnings


def question_hash(text: str) -> str:
    """First 12 hex digits of the sha256 of the (stripped) question text."""
    return hashlib.sha256(text.strip().encode("utf-8")).hexdigest()[:12]


def make_question(
    dataset: str,
    qid: str,
    question: str,
    answers: list[str],
    *,
    urls: list[str],
    url_warnings: list[str] | None = None,
    year: tuple[int | None, str | None] = (None, None),
    metadata: dict[str, Any],
    **fields: Any,
) -> Question:
    """A loader's Question: ``year`` is :func:`parse_effective_year`'s pair, ``url_warnings`` (from
    :func:`clean_urls`) are kept in ``metadata['url_warnings']`` when there are any, and ``fields``
    set the rest (``false_premise``, ``split``)."""
    if url_warnings:
        metadata["url_warnings"] = url_warnings
    return Question(
        id=qid, dataset=dataset, question=question, answers=answers, effective_year=year[0],
        effective_year_raw=year[1], gold_urls=urls, metadata=metadata, **fields,
    )


def nonempty_text(value: Any, field_name: str) -> str:
    """A required text field: must be a non-blank string; returned stripped."""
    if value is None or (isinstance(value, float) and value != value):
        raise RowIssue(field_name, "missing")
    if not isinstance(value, str):
        raise RowIssue(field_name, f"expected text, got {type(value).__name__}")
    text = value.strip()
    if not text:
        raise RowIssue(field_name, "empty")
    return text


def answer_list(value: Any, field_name: str) -> list[str]:
    """One answer or a list of answers; blanks dropped, order and exact duplicates kept once."""
    items: list[Any]
    if value is None or (isinstance(value, float) and value != value):
        items = []
    elif isinstance(value, str):
        items = [value]
    elif isinstance(value, list | tuple):
        items = list(value)
    else:
        try:
            items = list(value)  # numpy arrays and the like
        except TypeError:
            raise RowIssue(
                field_name, f"expected text or a list of text, got {type(value).__name__}"
            ) from None
    out: list[str] = []
    for a in items:
        if not isinstance(a, str):
            raise RowIssue(field_name, f"answer is not text: {a!r}")
        a = a.strip()
        if a and a not in out:
            out.append(a)
    if not out:
        raise RowIssue(field_name, "no answer")
    return out


def text_list(value: Any, field_name: str) -> list[Any]:
    """A list-valued cell (list, tuple, numpy array); ``None`` gives an empty list."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple):
        return list(value)
    try:
        return list(value)
    except TypeError:
        raise RowIssue(field_name, f"expected a list, got {type(value).__name__}") from None


def require_columns(
    columns: list[str] | set[str], required: tuple[str, ...], *, path: Path, where: str
) -> None:
    """Raise a DatasetError naming every required column that is absent."""
    missing = [c for c in required if c not in columns]
    if missing:
        raise DatasetError(
            f"missing required column(s) {', '.join(repr(m) for m in missing)} in {where}",
            path=path,
            field=missing[0],
        )


# --------------------------------------------------------------------------------------------
# Where the source files live inside a data directory. The download command writes exactly
# these paths; the loaders of TrekBench-Wild also accept other names matching the patterns.
# Keys are the TrekBench-Wild datasets plus any other downloaded file (sealqa_seal_0).


@dataclass(frozen=True)
class SourceLayout:
    """Expected place of one source file under the data directory."""

    dataset: str
    relpath: str
    patterns: tuple[str, ...]
    description: str


LAYOUT: dict[str, SourceLayout] = {
    "freshqa": SourceLayout(
        "freshqa",
        "freshqa/FreshQA_v04072025.csv",
        ("freshqa/*.csv",),
        "FreshQA CSV export (Google Sheet of 2025-04-07)",
    ),
    "infodeepseek": SourceLayout(
        "infodeepseek",
        "infodeepseek/InfoDeepSeek_v1.json",
        ("infodeepseek/InfoDeepSeek*.json", "infodeepseek/*.json"),
        "InfoDeepSeek v1 JSON (data/InfoDeepSeek_v1.json of YunjiaXi/InfoDeepSeek)",
    ),
    "sealqa": SourceLayout(
        "sealqa",
        "sealqa/sealqa_seal_hard.parquet",
        ("sealqa/*seal_hard*.parquet", "sealqa/*seal-hard*.parquet"),
        "SealQA seal_hard parquet (seal-hard.parquet of the vtllms/sealqa dataset)",
    ),
    "sealqa_seal_0": SourceLayout(
        "sealqa",
        "sealqa/sealqa_seal0.parquet",
        ("sealqa/*seal0*.parquet", "sealqa/*seal-0*.parquet"),
        "SealQA seal_0 parquet (seal-0.parquet of vtllms/sealqa; not part of TrekBench-Wild)",
    ),
}
