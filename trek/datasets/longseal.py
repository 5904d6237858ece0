"""LongSeal loader (the ``longseal`` configuration of SealQA).

Same columns as SealQA plus ``golds`` and the distractor pools ``12_docs``, ``20_docs`` and
``30_docs``; each is a list of ``{date, text, title, url}`` (``date`` often null). Gold documents
get role ``gold``, every other document role ``outdated``. Document ids are
``<question_id>:gold:<i>`` and ``<question_id>:<k>_docs:<i>``. A document that appears in several
pools (the smaller pools are usually part of the larger ones) is kept once, under the id of the
first pool it was seen in (gold first, then pools by size); ``metadata['pools']`` lists every pool
that held it and ``metadata['positions']`` its position in each.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from trek.datasets.common import (
    LongSealResult,
    RowIssue,
    check_url,
    parse_date,
    text_list,
)
from trek.datasets.sealqa import REQUIRED_COLUMNS as SEAL_COLUMNS
from trek.datasets.sealqa import read_parquet_rows, sealqa_rows
from trek.types import Document, Question

__all__ = ["load_longseal", "REQUIRED_COLUMNS"]

DATASET = "sealqa"
REQUIRED_COLUMNS = (*SEAL_COLUMNS, "golds")
GOLD_POOL = "gold"
_POOL_COLUMN = re.compile(r"^(\d+)_docs$")


def _pool_columns(columns: list[str]) -> list[str]:
    pools = [c for c in columns if _POOL_COLUMN.match(c)]
    return sorted(pools, key=lambda c: int(_POOL_COLUMN.match(c).group(1)))  # type: ignore[union-attr]


def _doc_fields(doc: Any, where: str) -> tuple[str, str, str, Any]:
    if not isinstance(doc, dict):
        raise RowIssue(where, f"expected an object with date/text/title/url, got {type(doc).__name__}")
    url = check_url(doc.get("url"), f"{where}.url")
    text = doc.get("text")
    if not isinstance(text, str):
        raise RowIssue(
            f"{where}.text", "missing" if text is None else f"expected text, got {type(text).__name__}"
        )
    title = doc.get("title")
    if title is not None and not isinstance(title, str):
        raise RowIssue(f"{where}.title", f"expected text, got {type(title).__name__}")
    return url, (title or "").strip(), text, doc.get("date")


def _documents(row: dict[str, Any], question: Question, pools: list[str]) -> list[Document]:
    docs: list[Document] = []
    by_key: dict[tuple[str, str, str, str], Document] = {}
    supported = question.answers[0]
    for pool, column in [(GOLD_POOL, "golds"), *[(c, c) for c in pools]]:
        for i, raw in enumerate(text_list(row.get(column), column)):
            where = f"{column}[{i}]"
            url, title, text, date_raw = _doc_fields(raw, where)
            date = parse_date(date_raw, f"{where}.date")
            key = (url, title, text, "" if date_raw is None else str(date_raw))
            existing = by_key.get(key)
            if existing is not None:
                existing.metadata["pools"].append(pool)
                existing.metadata["positions"][pool] = i
                continue
            metadata: dict[str, Any] = {"pools": [pool], "positions": {pool: i}}
            if isinstance(date_raw, str) and date is not None and date.isoformat() != date_raw.strip():
                metadata["date_raw"] = date_raw
            is_gold = pool == GOLD_POOL
            doc = Document(
                id=f"{question.id}:{pool}:{i}",
                url=url,
                title=title,
                date=date,
                text=text,
                question_id=question.id,
                role="gold" if is_gold else "outdated",
                supports_answer=supported if is_gold else None,
                source="longseal",
                metadata=metadata,
            )
            by_key[key] = doc
            docs.append(doc)
    return docs


def load_longseal(path: str | os.PathLike[str], *, strict: bool = True) -> LongSealResult:
    """Read a LongSeal parquet file into questions and their documents.

    Questions are built exactly as by :func:`trek.datasets.sealqa.load_sealqa` (same ids), with
    ``metadata['subset'] = 'longseal'``. Returns ``(questions, documents, report)``. A bad
    document (malformed URL, unreadable date, missing text) makes its whole question fail.
    """
    p = Path(path)
    columns, rows = read_parquet_rows(p, REQUIRED_COLUMNS)
    pools = _pool_columns(columns)
    kept, report = sealqa_rows(
        p, rows, subset="longseal", strict=strict, extra=lambda row, q: _documents(row, q, pools)
    )
    documents: list[Document] = []
    for q, docs in kept:
        q.metadata["documents"] = {
            "gold": sum(1 for d in docs if d.role == "gold"),
            "outdated": sum(1 for d in docs if d.role == "outdated"),
        }
        documents.extend(docs)
    return LongSealResult([q for q, _ in kept], documents, report)
