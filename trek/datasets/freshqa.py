"""FreshQA loader (CSV export of the published Google Sheet).

The export may open with a few preamble lines (a warning and an empty row) before the header;
the header is the first row that holds all the required column names. Line endings may be LF or
CRLF. ``source`` cells hold one URL per line; ``answer_0`` … ``answer_9`` hold the acceptable
answers, unused ones empty. ``effective_year`` is a year or a bound such as ``before 2022``.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

from trek.datasets.common import (
    DatasetError,
    LoadReport,
    LoadResult,
    RowIssue,
    check_url,
    make_question,
    nonempty_text,
    parse_bool,
    parse_effective_year,
)
from trek.types import Question

__all__ = ["load_freshqa", "REQUIRED_COLUMNS", "ANSWER_COLUMNS"]

DATASET = "freshqa"
REQUIRED_COLUMNS = (
    "id",
    "split",
    "question",
    "effective_year",
    "false_premise",
    "num_hops",
    "fact_type",
    "source",
    "answer_0",
)
ANSWER_COLUMNS = tuple(f"answer_{i}" for i in range(10))
#: ``source`` cells that mean "no URL" rather than a malformed URL.
_NO_URL = {"n/a", "na", "none", "-", "--"}
#: How far down the file the header may be.
_HEADER_SEARCH_ROWS = 50


def _read_rows(path: Path) -> list[tuple[int, list[str]]]:
    """All CSV records with the physical line number on which each starts."""
    rows: list[tuple[int, list[str]]] = []
    try:
        with path.open("r", encoding="utf-8-sig", newline="") as fh:
            reader = csv.reader(fh)
            start = 1
            for record in reader:
                rows.append((start, record))
                start = reader.line_num + 1
    except UnicodeDecodeError as e:
        raise DatasetError(f"not UTF-8 text ({e.reason} at byte {e.start})", path=path) from None
    except csv.Error as e:
        raise DatasetError(f"not readable as CSV ({e})", path=path) from None
    return rows


def _find_header(path: Path, rows: list[tuple[int, list[str]]]) -> tuple[int, dict[str, int]]:
    best: tuple[int, set[str]] | None = None
    for pos, (_line, record) in enumerate(rows[:_HEADER_SEARCH_ROWS]):
        names = {c.strip() for c in record}
        if all(c in names for c in REQUIRED_COLUMNS):
            index: dict[str, int] = {}
            for i, c in enumerate(record):
                index.setdefault(c.strip(), i)
            return pos, index
        hits = names & set(REQUIRED_COLUMNS)
        if best is None or len(hits) > len(best[1]):
            best = (pos, hits)
    if best is None or not best[1]:
        raise DatasetError(
            f"no header row found in the first {_HEADER_SEARCH_ROWS} rows "
            f"(expected columns {', '.join(REQUIRED_COLUMNS)})",
            path=path,
            field=REQUIRED_COLUMNS[0],
        )
    pos, hits = best
    missing = [c for c in REQUIRED_COLUMNS if c not in hits]
    raise DatasetError(
        f"header row is missing required column(s) {', '.join(repr(m) for m in missing)}",
        path=path,
        row=rows[pos][0],
        row_kind="line",
        field=missing[0],
    )


def _split_sources(cell: str) -> tuple[list[str], str | None]:
    """URLs of a ``source`` cell, one per line; returns ``(urls, placeholder)``."""
    lines = [ln.strip() for ln in cell.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    lines = [ln for ln in lines if ln]
    if len(lines) == 1 and lines[0].lower() in _NO_URL:
        return [], lines[0]
    urls: list[str] = []
    for i, ln in enumerate(lines):
        urls.append(check_url(ln, "source" if len(lines) == 1 else f"source[{i}]"))
    return urls, None


def load_freshqa(path: str | os.PathLike[str], *, strict: bool = True) -> LoadResult:
    """Read a FreshQA CSV export into questions with ids ``freshqa:<id>``.

    ``metadata`` keeps ``next_review``, ``num_hops``, ``fact_type``, ``note`` and the CSV ``line``
    on which the row starts. With ``strict=False`` bad rows are skipped and listed in the report.
    """
    p = Path(path)
    if not p.is_file():
        raise DatasetError("file does not exist", path=p)
    rows = _read_rows(p)
    header_pos, col = _find_header(p, rows)
    report = LoadReport(dataset=DATASET, path=str(p), row_kind="line")
    questions: list[Question] = []
    seen: dict[str, int] = {}

    def cell(record: list[str], name: str) -> str:
        i = col.get(name)
        if i is None or i >= len(record):
            return ""
        return record[i]

    for line, record in rows[header_pos + 1 :]:
        if not any(c.strip() for c in record):
            continue  # blank spacer row, not a record
        report.rows_read += 1
        raw_id = cell(record, "id").strip()
        qid = f"{DATASET}:{raw_id}" if raw_id else None
        try:
            if not raw_id:
                raise RowIssue("id", "empty")
            if qid in seen:
                raise RowIssue("id", f"duplicate id (first seen on line {seen[qid]})")
            question = nonempty_text(cell(record, "question"), "question")
            answers: list[str] = []
            for name in ANSWER_COLUMNS:
                a = cell(record, name).strip()
                if a and a not in answers:
                    answers.append(a)
            if not answers:
                raise RowIssue("answer_0..answer_9", "no answer")
            year = parse_effective_year(cell(record, "effective_year"))
            false_premise = parse_bool(cell(record, "false_premise"), "false_premise")
            urls, placeholder = _split_sources(cell(record, "source"))
        except RowIssue as issue:
            report.issue(issue, row=line, qid=qid, strict=strict)
            continue
        assert qid is not None
        seen[qid] = line
        metadata: dict[str, object] = {
            "next_review": cell(record, "next_review").strip() or None,
            "num_hops": cell(record, "num_hops").strip(),
            "fact_type": cell(record, "fact_type").strip(),
            "line": line,
        }
        note = cell(record, "note").strip()
        if note:
            metadata["note"] = note
        if placeholder is not None:
            metadata["source_placeholder"] = placeholder
        questions.append(
            make_question(
                DATASET, qid, question, answers, urls=urls, year=year, metadata=metadata,
                false_premise=false_premise, split=cell(record, "split").strip() or None,
            )
        )
        report.rows_kept += 1
    return LoadResult(questions, report)
