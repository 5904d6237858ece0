"""The questions a Ctrl grid answers: read from the ``questions.jsonl`` or ``pools.jsonl`` beside
the contexts. The contexts themselves are :class:`trek.contexts.Context` records, read with
:func:`trek.contexts.read_contexts`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from trek.runs import POOLS, QUESTIONS
from trek.types import Question, RecordError, iter_json_lines

__all__ = ["CtrlQuestions", "load_ctrl_questions", "open_ctrl_questions", "questions_beside"]


def _question_of(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["question"] if isinstance(obj.get("question"), dict) else obj


def _read_question(path: str | os.PathLike[str], line: int | None, obj: Any) -> Question:
    from trek.graders import with_own_grader

    try:
        return with_own_grader(Question.model_validate(_question_of(obj)))
    except ValueError as e:
        raise RecordError(path, line, f"not a question or pool ({str(e).splitlines()[0]})") from None


def load_ctrl_questions(path: str | os.PathLike[str]) -> dict[str, Question]:
    """Questions by id from a ``questions.jsonl`` (Question records) or a ``pools.jsonl``
    (one ``{"question": {...}, ...}`` per line). A question of a dataset without a grader of its
    own (``custom``, as `trek import` writes) is graded by the generic judge
    (:func:`trek.graders.with_own_grader`)."""
    out: dict[str, Question] = {}
    for line, obj in iter_json_lines(path):
        q = _read_question(path, line, obj)
        out[q.id] = q
    return out


class CtrlQuestions(Mapping[str, Question]):
    """The questions of :func:`load_ctrl_questions` indexed, not loaded: one pass validates every
    line as it does (same errors; a later line for the same id wins) and keeps per question id
    only where its line is, so a grid over many questions (a ``pools.jsonl`` line holds the
    question's whole pool) holds no question beyond the one in use. ``questions[qid]`` reads the
    line again by offset and validates it."""

    def __init__(self, path: str | os.PathLike[str]):
        from array import array

        from trek.jsonio import iter_jsonl_spans

        self.path = os.fspath(path)
        self.numbers: dict[str, int] = {}
        self.offsets, self.lengths = array("q"), array("q")
        for line, offset, length, obj in iter_jsonl_spans(path):
            qid = sys.intern(_read_question(path, line, obj).id)  # shared with the contexts' index and the plan
            del obj
            n = self.numbers.get(qid)
            if n is None:
                self.numbers[qid] = len(self.offsets)
                self.offsets.append(offset)
                self.lengths.append(length)
            else:  # a later line for the same id wins, as in load_ctrl_questions
                self.offsets[n], self.lengths[n] = offset, length

    def __getitem__(self, qid: str) -> Question:
        from trek.jsonio import loads

        n = self.numbers[qid]
        fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            blob = os.pread(fd, self.lengths[n], self.offsets[n])
        finally:
            os.close(fd)
        if len(blob) != self.lengths[n]:
            raise RecordError(self.path, None, f"changed while it was read (a line at byte {self.offsets[n]} is gone)")
        return _read_question(self.path, None, loads(blob.decode("utf-8"), self.path))

    def __contains__(self, qid: object) -> bool:
        return qid in self.numbers

    def __iter__(self) -> Iterator[str]:
        return iter(self.numbers)

    def __len__(self) -> int:
        return len(self.numbers)


def open_ctrl_questions(path: str | os.PathLike[str]) -> Mapping[str, Question]:
    """The questions of a grid: indexed (:class:`CtrlQuestions`), or read whole
    (:func:`load_ctrl_questions`) when gzipped (a compressed file cannot be read by offset)."""
    if os.fspath(path).lower().endswith(".gz"):
        return load_ctrl_questions(path)
    return CtrlQuestions(path)


def questions_beside(contexts: str | os.PathLike[str], names: Iterable[str] = (QUESTIONS, POOLS)) -> Path | None:
    """The first of ``names`` found in the folder of ``contexts`` (``None`` when none is there)."""
    folder = Path(contexts).parent
    for name in names:
        if (folder / name).exists():
            return folder / name
    return None
