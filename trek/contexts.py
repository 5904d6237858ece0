"""Frozen Ctrl contexts: the ``contexts.jsonl`` record, its one reader, and the one renderer.

A context is the text one model is shown for one (question, condition) (paper D.4). ``trek ctrl
build`` writes one :class:`Context` per line; the baselines, estimates and reports read them back
with :func:`read_contexts` (errors name the file, the line and the field). Each
:class:`ContextDocument` carries what the model sees of the document (its text, the displayed
date, the source URL when shown) and where it came from (id, role, supported answer, the original
date or URL when an ablation shows another), so a method that shows some of the documents
renders them again with :func:`render_documents` rather than cutting up ``rendered``.

Rendering (:class:`Renderer`): each document as its 1-based index, its displayed date when
known, its source URL where the condition shows URLs, and its text; documents separated by a
blank line. The three pieces are named templates (``ctrl.render.document``, ``ctrl.render.date``,
``ctrl.render.url``) that a prompts folder can override.

Files written before the documents carried their text (``trek ctrl build`` before contexts
format 2) still load: the reader takes each text out of ``rendered`` by rendering the document's
header and date/URL lines with the templates in force, and checks that the documents render back
to ``rendered`` exactly (else the error names ``documents[i].text``; rebuild, or pass the
``--prompts`` folder the build used).
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import Field, ValidationError

from trek.templates import register, template, template_version
from trek.types import DocumentRole, Record, RecordError, describe_validation_error, iter_json_lines

__all__ = [
    "ContextFile",
    "ContextsOf",
    "VERSION",
    "FORMAT",
    "DOCUMENT_TEMPLATE",
    "DATE_LINE",
    "URL_LINE",
    "SEPARATOR",
    "Shown",
    "Renderer",
    "render_documents",
    "ContextDocument",
    "Context",
    "read_contexts",
    "sha256_of",
]

VERSION = "ctrl.render/1"
#: Contexts format: 2 since documents carry their ``text`` (format 1 files load, see the module doc).
FORMAT = 2
DOCUMENT_TEMPLATE = register("ctrl.render.document", "[Document {index}]\n{meta}{text}")
DATE_LINE = register("ctrl.render.date", "Date: {date}\n")
URL_LINE = register("ctrl.render.url", "Source URL: {url}\n")
SEPARATOR = "\n\n"
_HOLE = "\x00text\x00"  # stands for the text while the document template is filled in


class Displayed(Protocol):
    """What the renderer reads of a document: the date and URL shown (``None``: not shown) and text."""

    @property
    def date(self) -> str | None: ...
    @property
    def url(self) -> str | None: ...
    @property
    def text(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class Shown:
    """One document as displayed: the date and URL shown (None when unknown or hidden) and text."""

    date: str | None
    url: str | None
    text: str


class Renderer:
    """Renders documents with the templates in force when it was created (read once)."""

    def __init__(self) -> None:
        self.document = template("ctrl.render.document", DOCUMENT_TEMPLATE)
        self.date_line = template("ctrl.render.date", DATE_LINE)
        self.url_line = template("ctrl.render.url", URL_LINE)

    @staticmethod
    def versions() -> dict[str, str]:
        return {
            "ctrl.render.document": template_version("ctrl.render.document", DOCUMENT_TEMPLATE, VERSION),
            "ctrl.render.date": template_version("ctrl.render.date", DATE_LINE, VERSION),
            "ctrl.render.url": template_version("ctrl.render.url", URL_LINE, VERSION),
        }

    def _meta(self, d: Displayed) -> str:
        meta = ""
        if d.date is not None:
            meta += self.date_line.format(date=d.date)
        if d.url is not None:
            meta += self.url_line.format(url=d.url)
        return meta

    def frame(self, index: int, d: Displayed) -> tuple[str, str] | None:
        """The text before and after document ``index``'s text (``None`` when the document
        template does not hold ``{text}`` exactly once)."""
        around = self.document.format(index=index, meta=self._meta(d), text=_HOLE).split(_HOLE)
        return (around[0], around[1]) if len(around) == 2 else None

    def pieces(self, docs: Sequence[Displayed]) -> list[str]:
        """:meth:`render`'s text in pieces whose concatenation is that text: per document the
        text before its text (header, date and URL lines), then its text with what follows it
        (the separator included). The second piece recurs wherever the document is shown, so
        token counts reuse one count per document (:func:`trek.tokens.count_joined`)."""
        out: list[str] = []
        last = len(docs)
        for i, d in enumerate(docs, start=1):
            text = (d.text or "").strip()
            sep = SEPARATOR if i < last else ""
            around = self.frame(i, d)
            if around is None:
                out.append(self.document.format(index=i, meta=self._meta(d), text=text) + sep)
            else:
                out += [around[0], text + around[1] + sep]
        return out

    def render(self, docs: Sequence[Displayed]) -> str:
        """The context text of ``docs``, numbered 1..n in the order given."""
        return "".join(self.pieces(docs))


def render_documents(docs: Iterable[Displayed]) -> str:
    """``docs`` rendered as a context (numbered 1..n in the order given) with the templates in force."""
    return Renderer().render(list(docs))


class ContextDocument(Record):
    """A document as placed in a context: ``url`` is the URL shown (null when hidden), ``date``
    the date shown, ``text`` the text shown (null only in a format-1 file before reading)."""

    doc_id: str
    role: DocumentRole
    url: str | None
    date: str | None
    synthetic: bool
    answer: str | None = None
    original_url: str | None = None  # set when an ablation shows another URL
    original_date: str | None = None  # set when an ablation shows another date
    text: str | None = None


class Context(Record):
    """One ``contexts.jsonl`` line: the documents of one (question, condition) in context order,
    ``rendered`` (the exact text given to models), its ``sha256`` and its o200k_base ``tokens``
    (null when built with ``--no-tokens``)."""

    question_id: str
    dataset: str
    condition: str
    documents: list[ContextDocument] = Field(default_factory=list)
    n_distractors: int
    rendered: str
    sha256: str
    tokens: int | None = None


def sha256_of(text: str) -> str:
    """The ``sha256`` of a rendered context (hex digest of its UTF-8 bytes)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _texts_from_rendered(ctx: Context, renderer: Renderer) -> list[str] | None:
    """The documents' texts taken out of ``rendered`` (format 1); ``None`` when it does not fit."""
    r, pos, texts = ctx.rendered, 0, []
    docs = ctx.documents
    frames = [renderer.frame(i, d) for i, d in enumerate(docs, start=1)]
    if any(f is None for f in frames):
        return None
    for i, (head, tail) in enumerate(frames):  # type: ignore[misc]
        if i and not r.startswith(SEPARATOR, pos):
            return None
        pos += len(SEPARATOR) if i else 0
        if not r.startswith(head, pos):
            return None
        pos += len(head)
        if i + 1 < len(docs):
            end = r.find(tail + SEPARATOR + frames[i + 1][0], pos)  # type: ignore[index]
        else:
            end = len(r) - len(tail) if r.endswith(tail) else -1
        if end < pos:
            return None
        texts.append(r[pos:end])
        pos = end + len(tail)
    return texts if pos == len(r) else None


def _check_rendering(path: str | os.PathLike[str], line: int, ctx: Context, renderer: Renderer) -> None:
    missing = [i for i, d in enumerate(ctx.documents) if d.text is None]
    if missing:
        texts = _texts_from_rendered(ctx, renderer)
        if texts is None:
            raise RecordError(path, line, f"field 'documents[{missing[0]}].text' is missing and cannot be taken "
                              f"from 'rendered' ({ctx.question_id} {ctx.condition}): rebuild the contexts, or "
                              "use the prompts folder (--prompts) they were built with")
        for d, t in zip(ctx.documents, texts, strict=True):
            d.text = t
    if renderer.render(ctx.documents) != ctx.rendered:
        raise RecordError(path, line, f"field 'rendered' is not the documents rendered with the ctrl.render "
                          f"templates in force ({ctx.question_id} {ctx.condition}): use the prompts folder "
                          "(--prompts) the contexts were built with")


def read_contexts(path: str | os.PathLike[str], *, check_rendering: bool = False) -> list[Context]:
    """Every line of ``contexts.jsonl``, validated: a line that is not a context, a ``sha256``
    that does not match ``rendered`` or a repeated (question, condition) raises
    :class:`~trek.types.RecordError` naming the file, the line and the field.

    Documents without ``text`` (format 1) get it from ``rendered`` (module doc). With
    ``check_rendering`` (methods that render some of the documents again), every context must
    also be exactly its documents rendered with the templates in force.
    """
    out: list[Context] = []
    seen: set[tuple[str, str]] = set()
    renderer: Renderer | None = None
    for line, obj in iter_json_lines(path):
        ctx, renderer = _checked(path, line, obj, seen, renderer, check_rendering)
        out.append(ctx)
    return out


def _checked(path: Any, line: int, obj: Any, seen: set[tuple[str, str]], renderer: Renderer | None,
             check_rendering: bool) -> tuple[Context, Renderer | None]:
    """One line of a contexts file as a checked :class:`Context` (the checks of
    :func:`read_contexts`), and the renderer made for it when one was needed."""
    try:
        ctx = Context.model_validate(obj)
    except ValidationError as e:
        raise RecordError(path, line, f"Context: {describe_validation_error(e)}") from None
    if sha256_of(ctx.rendered) != ctx.sha256:
        raise RecordError(path, line, f"field 'sha256' does not match 'rendered' ({ctx.question_id} {ctx.condition})")
    key = (ctx.question_id, ctx.condition)
    if key in seen:
        raise RecordError(path, line, f"repeated context for {ctx.question_id} {ctx.condition}")
    seen.add(key)
    if check_rendering or any(d.text is None for d in ctx.documents):
        renderer = renderer or Renderer()
        _check_rendering(path, line, ctx, renderer)
    return ctx, renderer


class ContextFile:
    """``contexts.jsonl`` indexed, not loaded: one pass validates every line as
    :func:`read_contexts` does (same errors) and keeps per context only where its line is, its
    question id and its condition. Iterating it (every context in file order) or a condition's
    :meth:`of` reads each context again by offset, one at a time, so a grid over a large file
    holds no context beyond those in use. Documents without ``text`` (format 1) get it from
    ``rendered`` on every read."""

    def __init__(self, path: str | os.PathLike[str], *, check_rendering: bool = False):
        from array import array

        from trek.jsonio import iter_jsonl_spans

        self.path = os.fspath(path)
        self.offsets, self.lengths = array("q"), array("q")
        self.question_ids: list[str] = []
        self.conditions: dict[str, array[int]] = {}
        seen: set[tuple[str, str]] = set()
        renderer: Renderer | None = None
        for line, offset, length, obj in iter_jsonl_spans(path):
            ctx, renderer = _checked(path, line, obj, seen, renderer, check_rendering)
            del obj
            cond = self.conditions.setdefault(ctx.condition, array("q"))
            cond.append(len(self.offsets))
            self.offsets.append(offset)
            self.lengths.append(length)
            self.question_ids.append(sys.intern(ctx.question_id))  # one string per question, whatever the conditions
            del ctx

    def __len__(self) -> int:
        return len(self.offsets)

    def __iter__(self) -> Iterator[Context]:
        return self.read_many(range(len(self)))

    def read_many(self, numbers: Iterable[int]) -> Iterator[Context]:
        """Contexts ``numbers`` (file order numbers), read again one at a time."""
        from trek.jsonio import loads

        renderer: Renderer | None = None
        fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            for n in numbers:
                blob = os.pread(fd, self.lengths[n], self.offsets[n])
                if len(blob) != self.lengths[n]:
                    raise RecordError(self.path, None, f"changed while it was read (a line at byte {self.offsets[n]} "
                                      "is gone)")
                ctx = Context.model_validate(loads(blob.decode("utf-8"), self.path))
                if any(d.text is None for d in ctx.documents):
                    renderer = renderer or Renderer()
                    texts = _texts_from_rendered(ctx, renderer)
                    if texts is None:  # pragma: no cover - the index pass checked it
                        raise RecordError(self.path, None, f"{ctx.question_id} {ctx.condition}: changed while read")
                    for d, t in zip(ctx.documents, texts, strict=True):
                        d.text = t
                yield ctx
        finally:
            os.close(fd)

    def of(self, condition: str) -> ContextsOf:
        """The contexts of ``condition`` (file order), a re-readable source."""
        return ContextsOf(self, condition)


class ContextsOf:
    """The contexts of one condition of a :class:`ContextFile` (re-readable; ``len`` without reading)."""

    def __init__(self, file: ContextFile, condition: str):
        self.file, self.condition = file, condition

    def _numbers(self) -> Sequence[int]:
        return self.file.conditions.get(self.condition, ())  # type: ignore[return-value]

    def __len__(self) -> int:
        return len(self._numbers())

    def __iter__(self) -> Iterator[Context]:
        return self.file.read_many(self._numbers())

    def question_ids(self) -> list[str]:
        return [self.file.question_ids[n] for n in self._numbers()]


def open_contexts(path: str | os.PathLike[str], *, check_rendering: bool = False) -> ContextFile | list[Context]:
    """``contexts.jsonl`` for a grid: indexed (:class:`ContextFile`), or read whole
    (:func:`read_contexts`) when gzipped (a compressed file cannot be read by offset)."""
    if os.fspath(path).lower().endswith(".gz"):
        return read_contexts(path, check_rendering=check_rendering)
    return ContextFile(path, check_rendering=check_rendering)
