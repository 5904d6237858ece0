"""InfoDeepSeek loader (one JSON array of question objects).

Trek uses the English fields: ``query_en`` for the question and ``answer_en`` for the answer
(text, or a list of acceptable answers). ``sources`` lists the gold URLs. The JSON boolean
flags (``time_sensitive``, ``freshness``, ``false_premise``, ``multi_hop``, …) and the list fields
(``domain``, ``advantage_language``) are kept in ``metadata``. The source has no reference year,
so ``effective_year`` stays ``None``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from trek.datasets.common import (
    DatasetError,
    LoadReport,
    LoadResult,
    RowIssue,
    answer_list,
    clean_urls,
    make_question,
    nonempty_text,
    parse_bool,
    text_list,
)
from trek.types import Question

__all__ = ["load_infodeepseek", "FLAG_FIELDS"]

DATASET = "infodeepseek"
#: Flags the Wild filter and the reports rely on; each must read as a boolean when present.
FLAG_FIELDS = (
    "determinacy",
    "difficulty_GPT",
    "difficulty_DS",
    "multi_hop",
    "long_tail",
    "time_sensitive",
    "freshness",
    "distracting_info",
    "false_premise",
    "verified",
)
_LIST_FIELDS = ("domain", "advantage_language")
_TEXT_FIELDS = ("query_zh", "answer_zh")


def _item_id(item: dict[str, Any], index: int) -> str:
    raw = item.get("id")
    if raw is None or isinstance(raw, bool):
        return str(index)
    if isinstance(raw, float) and raw.is_integer():
        raw = int(raw)
    text = str(raw).strip()
    return text or str(index)


def load_infodeepseek(path: str | os.PathLike[str], *, strict: bool = True) -> LoadResult:
    """Read an InfoDeepSeek JSON file into questions with ids ``infodeepseek:<id>``.

    The id is the item's own ``id`` field, or its position in the array when it has none.
    """
    p = Path(path)
    if not p.is_file():
        raise DatasetError("file does not exist", path=p)
    from trek import jsonio
    from trek.types import RecordError

    try:
        data = json.loads(jsonio.read_text(p, "dataset file"))  # bounded in size; never a pipe
    except RecordError as e:
        raise DatasetError(str(e).removeprefix(f"{p}: "), path=p) from None
    except RecursionError:
        raise DatasetError(f"nested deeper than {jsonio.MAX_DEPTH} arrays or objects: refused", path=p) from None
    except UnicodeDecodeError as e:
        raise DatasetError(f"not UTF-8 text ({e.reason} at byte {e.start})", path=p) from None
    except json.JSONDecodeError as e:
        raise DatasetError(f"not valid JSON ({e.msg} at line {e.lineno}, column {e.colno})", path=p) from None
    if not isinstance(data, list):
        raise DatasetError(f"expected a JSON array of questions, got {type(data).__name__}", path=p)

    report = LoadReport(dataset=DATASET, path=str(p), row_kind="index")
    questions: list[Question] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(data):
        report.rows_read += 1
        qid: str | None = None
        try:
            if not isinstance(item, dict):
                raise RowIssue("<item>", f"expected a JSON object, got {type(item).__name__}")
            qid = f"{DATASET}:{_item_id(item, index)}"
            if qid in seen:
                raise RowIssue("id", f"duplicate id (first seen at index {seen[qid]})")
            if "query_en" not in item:
                raise RowIssue("query_en", "missing")
            question = nonempty_text(item["query_en"], "query_en")
            if "answer_en" not in item:
                raise RowIssue("answer_en", "missing")
            answers = answer_list(item["answer_en"], "answer_en")
            urls, url_warnings = clean_urls(text_list(item.get("sources"), "sources"), "sources")
            flags = {name: parse_bool(item[name], name) for name in FLAG_FIELDS if name in item}
            # Any other boolean the file carries is a flag too.
            for name, value in item.items():
                if isinstance(value, bool) and name not in flags:
                    flags[name] = value
            metadata: dict[str, Any] = dict(flags)
            for name in _LIST_FIELDS:
                if name in item:
                    metadata[name] = [str(v) for v in text_list(item[name], name)]
            for name in _TEXT_FIELDS:
                if isinstance(item.get(name), str):
                    metadata[name] = item[name]
            metadata["index"] = index
        except RowIssue as issue:
            report.issue(issue, row=index, qid=qid, strict=strict)
            continue
        seen[qid] = index
        questions.append(
            make_question(
                DATASET, qid, question, answers, urls=urls, url_warnings=url_warnings, metadata=metadata,
                false_premise=bool(flags.get("false_premise", False)),
            )
        )
        report.rows_kept += 1
    return LoadResult(questions, report)
