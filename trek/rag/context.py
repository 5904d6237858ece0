"""Frozen Ctrl contexts as the baselines see them: reading ``contexts.jsonl`` and its documents.

A ``contexts.jsonl`` line (written by ``trek ctrl build``) holds ``question_id``, ``condition``,
``documents`` (each ``doc_id``, ``role``, ``url`` (null when hidden), ``date`` (the displayed
date), ``synthetic``), ``rendered`` (the exact text given to models) and ``sha256`` of
``rendered``. Further fields (``dataset``, token counts, ablation provenance) are kept but not
needed here.

Direct generation shows ``rendered`` verbatim. Rerank and Filter show a subset of the documents:
:func:`split_rendered` cuts ``rendered`` at its ``[Document N]`` headers, and :func:`render_subset`
puts the chosen blocks back together, numbered 1..k, each block (date, URL when shown, text)
unchanged. A context whose headers do not number its documents 1..n is rejected with a message
naming the question and condition.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from trek.types import Question, RecordError, iter_json_lines

__all__ = [
    "CtxDocument",
    "CtxRecord",
    "read_context_records",
    "split_rendered",
    "render_subset",
    "load_ctrl_questions",
    "HEADER",
]

#: The header that opens every rendered document (``trek.ctrl.render``'s default template).
HEADER = "[Document {index}]"
_HEADER_RE = re.compile(r"^\[Document (\d+)\]\n", re.MULTILINE)
_SEPARATOR = "\n\n"


class CtxDocument(BaseModel):
    """One document as placed in a context (unknown extra fields are ignored)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    doc_id: str
    role: str
    url: str | None = None
    date: str | None = None
    synthetic: bool = False


class CtxRecord(BaseModel):
    """One ``contexts.jsonl`` line (unknown extra fields are ignored)."""

    model_config = ConfigDict(extra="ignore")

    question_id: str
    condition: str
    documents: list[CtxDocument] = Field(default_factory=list)
    rendered: str
    sha256: str

    def blocks(self) -> list[str]:
        """The rendered block of each document, in context order (see :func:`split_rendered`)."""
        try:
            return split_rendered(self.rendered, len(self.documents))
        except ValueError as e:
            raise ValueError(f"context {self.question_id} {self.condition}: {e}") from None


def read_context_records(path: str | os.PathLike[str]) -> list[CtxRecord]:
    """Every line of ``contexts.jsonl``; a bad line, a ``sha256`` that does not match
    ``rendered`` or a repeated (question, condition) raises :class:`RecordError`."""
    out: list[CtxRecord] = []
    seen: set[tuple[str, str]] = set()
    for line, obj in iter_json_lines(path):
        try:
            rec = CtxRecord.model_validate(obj)
        except ValueError as e:
            raise RecordError(path, line, f"not a context record ({str(e).splitlines()[0]})") from None
        if hashlib.sha256(rec.rendered.encode("utf-8")).hexdigest() != rec.sha256:
            raise RecordError(path, line, f"field 'sha256' does not match 'rendered' ({rec.question_id} {rec.condition})")
        key = (rec.question_id, rec.condition)
        if key in seen:
            raise RecordError(path, line, f"repeated context for {rec.question_id} {rec.condition}")
        seen.add(key)
        out.append(rec)
    return out


def split_rendered(rendered: str, n: int) -> list[str]:
    """Cut a rendered context into its ``n`` document blocks (header excluded, text unchanged).

    Raises ``ValueError`` when the headers found are not exactly ``[Document 1]`` .. ``[Document n]``
    at the start of lines, in order (e.g. rendered with an overridden document template).
    """
    if n == 0:
        return []
    starts = []
    expected = 1
    for m in _HEADER_RE.finditer(rendered):
        if int(m.group(1)) == expected and (m.start() == 0 or rendered[m.start() - 2 : m.start()] == _SEPARATOR):
            starts.append(m)
            expected += 1
            if expected > n:
                break
    if len(starts) != n or starts[0].start() != 0:
        raise ValueError(
            f"expected {n} documents headed [Document 1]..[Document {n}] in 'rendered', found {len(starts)}"
        )
    out = []
    for i, m in enumerate(starts):
        end = starts[i + 1].start() - len(_SEPARATOR) if i + 1 < len(starts) else len(rendered)
        out.append(rendered[m.end():end])
    return out


def render_subset(blocks: Sequence[str]) -> str:
    """Blocks renumbered 1..k in the order given, in the layout of the Ctrl renderer."""
    return _SEPARATOR.join(f"{HEADER.format(index=i)}\n{b}" for i, b in enumerate(blocks, start=1))


def _question_of(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["question"] if isinstance(obj.get("question"), dict) else obj


def load_ctrl_questions(path: str | os.PathLike[str]) -> dict[str, Question]:
    """Questions by id from a ``questions.jsonl`` (Question records) or a ``pools.jsonl``
    (one ``{"question": {...}, ...}`` per line)."""
    out: dict[str, Question] = {}
    for line, obj in iter_json_lines(path):
        try:
            q = Question.model_validate(_question_of(obj))
        except ValueError as e:
            raise RecordError(path, line, f"not a question or pool ({str(e).splitlines()[0]})") from None
        out[q.id] = q
    return out


def questions_beside(contexts: str | os.PathLike[str], names: Iterable[str] = ("questions.jsonl", "pools.jsonl")) -> Path | None:
    """The first of ``names`` found in the folder of ``contexts`` (``None`` when none is there)."""
    folder = Path(contexts).parent
    for name in names:
        if (folder / name).exists():
            return folder / name
    return None
