"""The questions a Ctrl grid answers: read from the ``questions.jsonl`` or ``pools.jsonl`` beside
the contexts. The contexts themselves are :class:`trek.contexts.Context` records, read with
:func:`trek.contexts.read_contexts`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from trek.runs import POOLS, QUESTIONS
from trek.types import Question, RecordError, iter_json_lines

__all__ = ["load_ctrl_questions", "questions_beside"]


def _question_of(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["question"] if isinstance(obj.get("question"), dict) else obj


def load_ctrl_questions(path: str | os.PathLike[str]) -> dict[str, Question]:
    """Questions by id from a ``questions.jsonl`` (Question records) or a ``pools.jsonl``
    (one ``{"question": {...}, ...}`` per line). A question of a dataset without a grader of its
    own (``custom``, as `trek import` writes) is graded by the generic judge
    (:func:`trek.graders.with_own_grader`)."""
    from trek.graders import with_own_grader

    out: dict[str, Question] = {}
    for line, obj in iter_json_lines(path):
        try:
            q = with_own_grader(Question.model_validate(_question_of(obj)))
        except ValueError as e:
            raise RecordError(path, line, f"not a question or pool ({str(e).splitlines()[0]})") from None
        out[q.id] = q
    return out


def questions_beside(contexts: str | os.PathLike[str], names: Iterable[str] = (QUESTIONS, POOLS)) -> Path | None:
    """The first of ``names`` found in the folder of ``contexts`` (``None`` when none is there)."""
    folder = Path(contexts).parent
    for name in names:
        if (folder / name).exists():
            return folder / name
    return None
