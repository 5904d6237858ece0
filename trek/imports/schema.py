"""The documented trajectory schema: a JSON Schema generated from Trek's records, shipped in the
package, and :func:`validate_run`, which checks a run directory against it (``trek validate``).

The schema (:data:`SCHEMA_FILE`, ``trek schema`` prints it) describes one line of
``answers.jsonl`` (a ``Trajectory``); its ``$defs`` also hold ``Question`` (a line of
``questions.jsonl``) and ``RunMeta`` (``run.json``), listed under ``x-trek-files``. It is
generated from the pydantic models (:func:`schema`), so a record passes the schema exactly when
the model accepts it; a test keeps the shipped file equal to the generated one.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.json_schema import models_json_schema

from trek import jsonio
from trek.runs import ANSWERS, AUDIT, GRADES, META, PAGES, QUESTIONS, TRACE
from trek.types import (
    TRAJECTORY_SCHEMA_VERSION,
    Grade,
    Question,
    RecordError,
    RunMeta,
    Trajectory,
    iter_json_lines,
)

__all__ = ["SCHEMA_FILE", "schema", "schema_text", "Problem", "validate_run"]

#: The shipped JSON Schema of the trajectory schema.
SCHEMA_FILE = Path(__file__).with_name("trajectory.schema.json")

def schema() -> dict[str, Any]:
    """The JSON Schema document of the trajectory schema (see the module docstring)."""
    _, defs = models_json_schema([(m, "validation") for m in (Trajectory, Question, RunMeta)],
                                 ref_template="#/$defs/{model}")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"Trek trajectory schema, version {TRAJECTORY_SCHEMA_VERSION}",
        "description": (
            f"One line of {ANSWERS} in a Trek run directory: what one system did for one question. "
            f"{QUESTIONS} holds Question lines and {META} a RunMeta object (see x-trek-files). "
            "A trajectory without coverage is read as fully observed (all queries, all results, full page "
            "text, real URLs)."),
        "x-trek-schema-version": TRAJECTORY_SCHEMA_VERSION,
        "x-trek-files": {ANSWERS: "#/$defs/Trajectory", QUESTIONS: "#/$defs/Question", META: "#/$defs/RunMeta"},
        "$ref": "#/$defs/Trajectory",
        "$defs": defs["$defs"],
    }


def schema_text() -> str:
    """:func:`schema` as the shipped file's text (sorted keys, two-space indent, final newline)."""
    return json.dumps(schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


@dataclass(frozen=True)
class Problem:
    """One thing wrong in a run directory: the file, the line (``None`` for the whole file), the
    field (``None`` for the whole record) and what is wrong."""

    file: str
    line: int | None
    field: str | None
    message: str

    def __str__(self) -> str:
        where = self.file + (f", line {self.line}" if self.line is not None else "")
        return f"{where}: " + (f"field '{self.field}': " if self.field else "") + self.message


def _errors(path: Path, line: int | None, model: type[BaseModel], obj: Any) -> tuple[Any, list[Problem]]:
    try:
        return model.model_validate(obj), []
    except ValidationError as e:
        out = []
        for err in e.errors():
            loc = ".".join(str(p) for p in err.get("loc", ())) or None
            out.append(Problem(str(path), line, loc, err.get("msg", "invalid")))
        return None, out


class _Capped:
    """The first ``limit`` problems of one file and a count of the rest (so a file of 100,000
    bad lines costs ``limit`` problems of memory, not 100,000)."""

    def __init__(self, limit: int) -> None:
        self.limit, self.kept, self.more = limit, [], 0

    def add(self, problems: list[Problem] | Problem) -> None:
        for p in problems if isinstance(problems, list) else [problems]:
            if len(self.kept) < self.limit:
                self.kept.append(p)
            else:
                self.more += 1

    def out(self) -> list[Problem]:
        if not self.more:
            return self.kept
        last = self.kept[-1]
        return [*self.kept, Problem(last.file, None, None, f"... and {self.more} more problem(s) in this file")]


def _records(path: Path, model: type[BaseModel], problems: _Capped) -> Iterator[tuple[int, Any]]:
    """The valid records of ``path`` one at a time; the invalid ones go to ``problems``."""
    try:
        for line, obj in iter_json_lines(path):
            rec, errs = _errors(path, line, model, obj)
            problems.add(errs)
            if rec is not None:
                yield line, rec
    except RecordError as e:
        problems.add(Problem(str(path), e.line, None, str(e).split(": ", 1)[-1]))


def _coverage_checks(path: Path, line: int, t: Trajectory) -> list[Problem]:
    """Records whose contents contradict their own stated coverage."""
    out = []
    cov = t.coverage
    if cov is None:
        return out
    if cov.queries == "all" and any(not c.query.strip() for c in t.search_calls):
        out.append(Problem(str(path), line, "coverage.queries", "is 'all' but a search call has no query ('some')"))
    if cov.queries == "none" and any(c.query.strip() for c in t.search_calls):
        out.append(Problem(str(path), line, "coverage.queries", "is 'none' but search calls carry queries"))
    if cov.results == "none" and any(c.results for c in t.search_calls):
        out.append(Problem(str(path), line, "coverage.results", "is 'none' but search calls list results"))
    return out


def validate_run(run_dir: str | os.PathLike[str], *, limit: int = 50) -> list[Problem]:
    """Every problem of a run directory's files (empty when it is valid).

    ``questions.jsonl`` and ``answers.jsonl`` must exist; each line must be a valid record
    (every field error of every line is listed); question ids are unique; every answer's
    ``question_id`` is a question of the run; a trajectory's contents must not contradict its
    stated coverage; one answer per question. ``run.json`` must exist and be a valid RunMeta;
    ``grades.jsonl``, ``audit-grading.jsonl``, ``trace.jsonl`` (one record per question each) and
    ``pages.sqlite`` are checked when present. A file that is a pipe or a device is a problem
    (never read, so validating never hangs).
    At most ``limit`` problems are listed per file (with a count of the rest).
    """
    rd = Path(run_dir)
    if not rd.is_dir():
        return [Problem(str(rd), None, None, "run directory does not exist")]
    problems: list[Problem] = []
    # one pass per file, no record kept: question ids (with their line) are all that is held
    # (listed in this order: each file's unreadable records, then the question set's repeated
    # ids, then what the answers get wrong about the questions)
    qids: dict[str, int] = {}
    path = rd / QUESTIONS
    repeated = _Capped(limit)
    if not path.exists():
        problems.append(Problem(str(path), None, None, "file does not exist"))
    else:
        got = _Capped(limit)
        for line, q in _records(path, Question, got):
            if q.id in qids:
                repeated.add(Problem(str(path), line, "id", f"duplicate question id {q.id!r} (first on line {qids[q.id]})"))
            qids.setdefault(q.id, line)
        problems += got.out()
    path = rd / ANSWERS
    if not path.exists():
        problems.append(Problem(str(path), None, None, "file does not exist"))
        problems += repeated.out()
    else:
        got, extra = _Capped(limit), _Capped(limit)
        answered: dict[str, int] = {}
        for line, t in _records(path, Trajectory, got):
            if t.question_id in answered:
                extra.add(Problem(str(path), line, "question_id",
                                  f"{t.question_id!r} is answered twice (first on line {answered[t.question_id]}); "
                                  "a finished run holds one answer per question (a stage that was stopped leaves "
                                  "its journal so until the same command runs again)"))
            answered.setdefault(t.question_id, line)
            if (rd / QUESTIONS).exists() and t.question_id not in qids:
                extra.add(Problem(str(path), line, "question_id", f"{t.question_id!r} is not a question of {QUESTIONS}"))
            extra.add(_coverage_checks(path, line, t))
        del answered
        problems += got.out() + repeated.out() + extra.out()
    meta = rd / META
    if not meta.exists():
        problems.append(Problem(str(meta), None, None, "file does not exist (every Trek run has one: write it with "
                                "trek import, or see the schema's RunMeta)"))
    else:
        try:
            obj = jsonio.load_json(meta)
        except RecordError as e:
            problems.append(Problem(str(meta), e.line, None, str(e).split(": ", 1)[-1]))
        else:
            problems += _errors(meta, None, RunMeta, obj)[1]
    for name, model in _graded_files().items():
        path = rd / name
        if not path.exists() and not path.is_symlink():
            continue
        got = _Capped(limit)
        seen: dict[str, int] = {}
        for line, g in _records(path, model, got):
            qid = g.question_id
            if qids and qid not in qids:
                got.add(Problem(str(path), line, "question_id", f"{qid!r} is not a question of {QUESTIONS}"))
            if qid in seen:
                got.add(Problem(str(path), line, "question_id", f"{qid!r} appears twice (first on line {seen[qid]})"))
            seen.setdefault(qid, line)
        problems += got.out()
    pages = rd / PAGES
    if pages.exists():
        try:
            jsonio.check_regular(pages, "SQLite file")
        except RecordError as e:
            problems.append(Problem(str(pages), None, None, str(e).split(": ", 1)[-1]))
            return problems
        error = _page_store_error(pages)
        if error:
            problems.append(Problem(str(pages), None, None, f"not a Trek page store ({error})"))
    return problems


def _page_store_error(pages: Path) -> str | None:
    """Why ``pages`` cannot be read as a page store, or None. Read only; a store in a folder
    nobody may write to (a read-only copy of a run) cannot get the ``-shm`` file a WAL database
    wants even for reading, so it is read as immutable then (nothing else writes it there)."""
    from urllib.parse import quote

    error = None
    for mode in ("mode=ro", "immutable=1"):
        try:
            conn = sqlite3.connect(f"file:{quote(str(pages))}?{mode}", uri=True)
            try:
                conn.execute("SELECT key, url, text, status, source FROM pages LIMIT 1").fetchall()
            finally:
                conn.close()
            return None
        except sqlite3.Error as e:
            error = error or str(e)
            if "unable to open" not in str(e) and "readonly" not in str(e).lower():
                return error  # a damaged or foreign file: no point in reading it another way
    return error


def _graded_files() -> dict[str, type[BaseModel]]:
    """The run files checked when present: grades, the audit judge's grades and the trace."""
    from trek.trace.records import TraceRecord

    return {GRADES: Grade, AUDIT: Grade, TRACE: TraceRecord}
