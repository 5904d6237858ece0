"""Question files of your own: JSONL or CSV, with a column mapping.

:func:`load_questions` reads ``.jsonl`` (one object a line) or ``.csv`` (a header row) into
:class:`~trek.types.Question` records. ``mapping`` says which column holds which field
(``{"id": "qid", "question": "text", "answers": "gold"}``, from ``--map
id=qid,question=text,answers=gold``); fields not mapped are read from the column of their own
name when there is one. Fields: ``id`` and ``question`` (required), ``answers`` (required: a
JSON list, or a string whose answers are separated by ``|``), ``gold_urls`` (same forms),
``effective_year``, ``dataset``, ``false_premise``. Other columns go to ``metadata``. A JSONL
line that is already a whole Question record is read as one.

The dataset is the ``dataset`` column, else ``dataset`` (the argument, default ``custom``);
questions of a dataset without a grader of its own get ``grader="generic"``. Every problem
raises :class:`~trek.types.RecordError` naming the file, the line and the field.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from trek import jsonio
from trek.imports.fields import FieldError, ident, texts
from trek.types import Question, RecordError, describe_validation_error, iter_json_lines

__all__ = ["FIELDS", "parse_mapping", "load_questions"]

#: The Question fields a column can be mapped to.
FIELDS = ("id", "question", "answers", "gold_urls", "effective_year", "dataset", "false_premise")
_LISTS = ("answers", "gold_urls")


def parse_mapping(text: str | None) -> dict[str, str]:
    """``"id=qid,question=text"`` -> ``{"id": "qid", "question": "text"}``; ``ValueError`` naming
    the bad item (unknown field, missing ``=``, a field given twice)."""
    out: dict[str, str] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        key, sep, col = (s.strip() for s in item.partition("="))
        if not sep or not key or not col:
            raise ValueError(f"--map {item.strip()!r}: expected FIELD=COLUMN (e.g. --map id=qid,answers=gold)")
        if key not in FIELDS:
            raise ValueError(f"--map {item.strip()!r}: {key!r} is not a question field ({', '.join(FIELDS)})")
        if key in out:
            raise ValueError(f"--map: {key!r} is given more than once")
        out[key] = col
    return out


def _rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    if path.suffix.lower() == ".csv":
        try:
            fh = path.open(newline="", encoding="utf-8-sig")
        except OSError as e:
            raise RecordError(path, None, f"cannot be read ({e.strerror})") from None
        with fh:
            reader = csv.DictReader(fh)
            if not reader.fieldnames:
                raise RecordError(path, None, "no header row")
            try:
                for row in reader:
                    if None in row:
                        raise RecordError(path, reader.line_num, "more cells than header columns")
                    if any((v or "").strip() for v in row.values()):
                        yield reader.line_num, dict(row)
            except (csv.Error, UnicodeDecodeError) as e:
                raise RecordError(path, reader.line_num, f"not valid CSV ({e})") from None
    else:
        yield from iter_json_lines(path)


def _list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, list):
        return texts(value, "list")
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise ValueError(f"expected a list of strings or a text, got {type(value).__name__}")
    text = str(value).strip()
    if text.startswith("["):
        try:
            parsed = jsonio.loads(text, "a list cell")
        except RecordError:
            parsed = None
        if isinstance(parsed, list):
            return _list(parsed)
    return [a.strip() for a in text.split("|") if a.strip()]


def _year(value: Any) -> int | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"expected a year, got {value!r}"[:80])
    try:
        return int(str(value).strip())  # the range is the Question model's
    except ValueError:
        raise ValueError(f"expected a year, got {value!r}"[:80]) from None


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value or "").strip().lower()
    if text in ("", "0", "false", "no", "n"):
        return False
    if text in ("1", "true", "yes", "y"):
        return True
    raise ValueError(f"expected true/false, got {value!r}")


def load_questions(
    path: str | os.PathLike[str], mapping: Mapping[str, str] | None = None, *, dataset: str = "custom"
) -> list[Question]:
    """The questions of ``path`` (see the module docstring); a repeated id is an error."""
    from trek.graders import with_own_grader

    p = Path(path)
    if not p.exists():
        raise RecordError(p, None, "file does not exist")
    mapping = dict(mapping or {})
    out: list[Question] = []
    seen: dict[str, int] = {}
    for line, row in _rows(p):
        if not mapping and set(row) >= {"id", "dataset", "question", "answers"} and isinstance(row.get("answers"), list):
            try:
                q = Question.model_validate(row)
            except ValidationError as e:
                raise RecordError(p, line, f"Question: {describe_validation_error(e)}") from None
        else:
            cols = {f: mapping.get(f, f) for f in FIELDS}
            for f in ("id", "question", "answers"):
                if cols[f] not in row:
                    raise RecordError(p, line, f"field '{f}': no column {cols[f]!r} (columns: {', '.join(row)}; "
                                               f"name it with --map {f}=COLUMN)")
            used = {c for f, c in cols.items() if c in row}
            fields: dict[str, Any] = {"metadata": {k: v for k, v in row.items() if k not in used}}
            for f, c in cols.items():
                if c not in row:
                    continue
                v = row[c]
                try:
                    if f in _LISTS:
                        v = _list(v)
                    elif f == "effective_year":
                        v = _year(v)
                    elif f == "false_premise":
                        v = _flag(v)
                    elif f == "id":
                        v = (ident(v, f) or "").strip() if v is not None and v != "" else ""
                    elif f in ("question", "dataset"):
                        if v is not None and not isinstance(v, str):
                            raise ValueError(f"expected a text, got {type(v).__name__}")
                        v = (v or "").strip()
                except FieldError as e:
                    raise RecordError(p, line, f"field '{f}' (column {c!r}): {str(e).split(': ', 1)[-1]}") from None
                except ValueError as e:
                    raise RecordError(p, line, f"field '{f}' (column {c!r}): {e}") from None
                fields[f] = v
            fields.setdefault("dataset", dataset)
            fields["dataset"] = fields["dataset"] or dataset
            try:
                q = Question(**fields)
            except ValidationError as e:
                raise RecordError(p, line, f"Question: {describe_validation_error(e)}") from None
        q = with_own_grader(q)
        if q.id in seen:
            raise RecordError(p, line, f"field 'id': duplicate question id {q.id!r} (first on line {seen[q.id]})")
        seen[q.id] = line
        out.append(q)
    if not out:
        raise RecordError(p, None, "holds no question")
    return out
