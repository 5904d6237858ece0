"""One inspect sample (a live ``TaskState`` or a sample of a log) as Trek sees it.

The scorers parse a sample exactly as ``trek import inspect-ai`` does: the state is written in
the shape of a log sample (the same pydantic dumps inspect writes to its logs) and handed to
:mod:`trek.imports.inspect_ai`, so the question, the trajectory (search calls, results, opened
pages, answer, citations, coverage) and the page text are the importer's. The page store of a
sample is built by :func:`sample_store` from the same rows ``trek import inspect-ai`` writes to a
run's ``pages.sqlite``: the log's page text, then the corpus the sample names (``corpus: mini``:
TrekBench-Mini's hand-written pages, which replace a snippet of the same URL), so both paths show
the judges the same pages. Nothing here imports inspect_ai.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trek.imports import inspect_ai as importer
from trek.imports.common import InputRecord, Parsed, page_rows, trajectory
from trek.pages import PageStore
from trek.types import Document, Question, Trajectory

__all__ = ["SampleView", "sample_dict", "view_of", "corpus_documents", "sample_store", "MINI_CORPUS"]

#: The ``corpus`` metadata value of samples answered over TrekBench-Mini's pages.
MINI_CORPUS = "mini"


def _dump(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if dump is not None:
        return dump(mode="json", exclude_none=True)
    if isinstance(value, list):
        return [_dump(v) for v in value]
    return value


def sample_dict(state: Any, target: Any = None) -> dict[str, Any]:
    """A ``TaskState`` (and its ``Target``) in the shape of a sample of an inspect log."""
    answers = list(getattr(target, "target", None) or []) if target is not None else []
    return {
        "id": state.sample_id,
        "epoch": getattr(state, "epoch", 1) or 1,
        "input": _dump(state.input),
        "target": answers,
        "metadata": dict(state.metadata or {}),
        "messages": [_dump(m) for m in state.messages],
        "output": _dump(state.output) if state.output is not None else {},
    }


@dataclass
class SampleView:
    """What Trek reads from one sample: its question, parse and trajectory."""

    question: Question
    parsed: Parsed
    trajectory: Trajectory
    record: InputRecord


def view_of(sample: dict[str, Any], task: str | None, model: str | None, where: str = "inspect sample") -> SampleView:
    """The importer's reading of one log-shaped sample (raises
    :class:`~trek.imports.common.ImportFailure` with the importer's message for a sample it cannot read)."""
    spec = {"task": task, "model": model}
    rec = InputRecord(Path(where), 1, {"sample": sample, "eval": spec, "member": where}, str(sample["id"]),
                      unit="sample")
    q = importer.question(rec, None)
    parsed = importer.parse(rec)
    return SampleView(q, parsed, trajectory(q, rec, parsed, importer.NAME, None), rec)


def corpus_documents(metadata: dict[str, Any] | None) -> list[Document]:
    """The corpus a sample names in its metadata (``corpus: mini``); none otherwise."""
    if (metadata or {}).get("corpus") != MINI_CORPUS:
        return []
    return list(_mini().corpus)


_MINI: Any = None


def _mini() -> Any:
    global _MINI
    if _MINI is None:
        from trek.datasets import load_benchmark

        _MINI = load_benchmark("mini", None)
    return _MINI


def sample_store(view: SampleView, base: PageStore | None = None, *, fetch: bool = False) -> PageStore:
    """An in-memory page store holding what ``trek import inspect-ai`` stores for this sample (its
    page text, then its corpus), over ``base`` (a page store given with ``pages=``): a page the
    sample does not hold is read from ``base``; ``fetch`` fetches the rest live."""
    store = _LayeredStore(base, fetch=fetch)
    for p in page_rows(view.parsed.pages):
        store.put(p)
    docs = corpus_documents(view.record.data["sample"].get("metadata"))
    if docs:
        store.add_documents(docs)
    return store


class _LayeredStore(PageStore):
    """A memory store in front of another store (read-only below)."""

    def __init__(self, base: PageStore | None, *, fetch: bool):
        super().__init__(None, fetch=fetch)
        self.base = base

    def lookup(self, url: str) -> Any:
        page = super().lookup(url)
        if page is None and self.base is not None:
            page = self.base.lookup(url)
        return page
