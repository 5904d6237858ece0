"""SealQA loader (parquet files of the ``seal_0`` and ``seal_hard`` configurations).

Columns: ``question, answer, urls, freshness, question_types, effective_year, search_results,
topic, canary``. URLs may carry a trailing ``\\r`` (stripped) and ``#:~:text=`` fragments (kept).
A question is a false-premise one when ``question_types`` contains ``false-premise``. The value
of the ``canary`` column is deliberately never copied anywhere.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from trek.datasets.common import (
    DatasetError,
    LoadReport,
    LoadResult,
    RowIssue,
    answer_list,
    clean_urls,
    make_question,
    nonempty_text,
    parse_effective_year,
    question_hash,
    require_columns,
    text_list,
)
from trek.types import Question

__all__ = ["load_sealqa", "read_parquet_rows", "sealqa_question", "sealqa_rows", "subset_from_name", "REQUIRED_COLUMNS"]

T = TypeVar("T")

DATASET = "sealqa"
REQUIRED_COLUMNS = ("question", "answer", "urls", "freshness", "question_types", "effective_year")
FALSE_PREMISE_TYPE = "false-premise"


def subset_from_name(path: Path) -> str | None:
    """Guess the SealQA configuration from a file name (``seal_hard``, ``seal_0``, ``longseal``)."""
    name = path.name.lower().replace("-", "_")
    if "longseal" in name or "long_seal" in name:
        return "longseal"
    if "hard" in name:
        return "seal_hard"
    if "seal0" in name or "seal_0" in name:
        return "seal_0"
    return None


def read_parquet_rows(path: Path, required: tuple[str, ...]) -> tuple[list[str], list[dict[str, Any]]]:
    """Column names and rows (as Python dicts) of a parquet file, checking required columns."""
    import pyarrow.parquet as pq

    if not path.is_file():
        raise DatasetError("file does not exist", path=path)
    try:
        table = pq.read_table(path)
    except Exception as e:  # pyarrow raises several unrelated types for bad files
        raise DatasetError(f"not readable as parquet ({e})", path=path) from None
    columns = list(table.column_names)
    require_columns(columns, required, path=path, where="the parquet schema")
    return columns, table.to_pylist()


def sealqa_question(row: dict[str, Any], *, index: int, subset: str | None) -> Question:
    """Turn one SealQA row into a Question (raises RowIssue on a bad field)."""
    question = nonempty_text(row.get("question"), "question")
    qid = f"{DATASET}:{question_hash(question)}"
    answers = answer_list(row.get("answer"), "answer")
    urls, url_warnings = clean_urls(text_list(row.get("urls"), "urls"), "urls")
    year = parse_effective_year(row.get("effective_year"))
    qtypes = [str(t).strip() for t in text_list(row.get("question_types"), "question_types")]
    freshness = row.get("freshness")
    if freshness is not None and not isinstance(freshness, str):
        raise RowIssue("freshness", f"expected text, got {type(freshness).__name__}")
    metadata: dict[str, Any] = {
        "freshness": (freshness or "").strip(),
        "question_types": qtypes,
        "row": index,
    }
    if subset:
        metadata["subset"] = subset
    # Only these known columns reach metadata; ``canary`` in particular is left out on purpose.
    for name in ("topic", "search_results"):
        value = row.get(name)
        if isinstance(value, str):
            metadata[name] = value.strip()
    return make_question(
        DATASET, qid, question, answers, urls=urls, url_warnings=url_warnings, year=year, metadata=metadata,
        false_premise=FALSE_PREMISE_TYPE in qtypes, split="test",
    )


def sealqa_rows(
    path: Path,
    rows: list[dict[str, Any]],
    *,
    subset: str | None,
    strict: bool,
    extra: Callable[[dict[str, Any], Question], T] = lambda row, q: None,
) -> tuple[list[tuple[Question, T]], LoadReport]:
    """Each row's question with ``extra(row, question)``, and the report. A row that raises
    RowIssue, or repeats an earlier question, fails the load (``strict``) or is skipped."""
    report = LoadReport(dataset=DATASET, path=str(path), row_kind="row")
    kept: list[tuple[Question, T]] = []
    seen: dict[str, int] = {}
    for index, row in enumerate(rows):
        report.rows_read += 1
        try:
            q = sealqa_question(row, index=index, subset=subset)
            if q.id in seen:
                raise RowIssue("question", f"duplicate question (same text as row {seen[q.id]})")
            more = extra(row, q)
        except RowIssue as issue:
            text = row.get("question")
            qid = f"{DATASET}:{question_hash(text)}" if isinstance(text, str) and text.strip() else None
            report.issue(issue, row=index, qid=qid, strict=strict)
            continue
        seen[q.id] = index
        kept.append((q, more))
        report.rows_kept += 1
    return kept, report


def load_sealqa(
    path: str | os.PathLike[str], *, strict: bool = True, subset: str | None = None
) -> LoadResult:
    """Read a SealQA parquet file into questions with ids ``sealqa:<sha256(question)[:12]>``.

    ``subset`` (``seal_hard``/``seal_0``) is recorded in ``metadata['subset']``; by default it is
    guessed from the file name. ``split`` is ``test``, the only split SealQA publishes.
    """
    p = Path(path)
    _columns, rows = read_parquet_rows(p, REQUIRED_COLUMNS)
    kept, report = sealqa_rows(p, rows, subset=subset or subset_from_name(p), strict=strict)
    return LoadResult([q for q, _ in kept], report)
