"""The ``contexts.jsonl`` record: one frozen context per (question, condition).

Written by :func:`trek.ctrl.build.build`; read back and validated by :func:`read_contexts`
(errors name the file, the line and the field).
"""

from __future__ import annotations

import os

from pydantic import Field

from trek.types import DocumentRole, Record, RecordError, read_jsonl

__all__ = ["ContextDocument", "Context", "read_contexts"]


class ContextDocument(Record):
    """A document as placed in a context. ``url`` is null when hidden; ``date`` is the displayed date."""

    doc_id: str
    role: DocumentRole
    url: str | None
    date: str | None
    synthetic: bool
    answer: str | None = None
    original_url: str | None = None  # set when an ablation shows another URL
    original_date: str | None = None  # set when an ablation shows another date


class Context(Record):
    question_id: str
    dataset: str
    condition: str
    documents: list[ContextDocument] = Field(default_factory=list)
    n_distractors: int
    rendered: str
    sha256: str
    tokens: int | None = None


def read_contexts(path: str | os.PathLike[str]) -> list[Context]:
    """Read ``contexts.jsonl``; checks that every ``sha256`` matches its ``rendered`` text."""
    import hashlib

    out = read_jsonl(path, Context)
    for i, c in enumerate(out, start=1):
        if hashlib.sha256(c.rendered.encode("utf-8")).hexdigest() != c.sha256:
            raise RecordError(path, i, f"field 'sha256' does not match 'rendered' ({c.question_id} {c.condition})")
    return out
