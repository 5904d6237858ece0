"""A Ctrl run as TrekTrace's input: the pages its model saw are the documents of its contexts.

A Ctrl run (``run.json`` of kind ``ctrl`` naming its ``contexts`` file) answers every question
from one frozen context: the documents of ``contexts.jsonl`` for the run's condition, in order.
Its answers record no search, so TrekTrace reads the pages from the contexts instead:

* the **retrieved collection** of a question is its context's documents in context order, each
  under its identity URL (:func:`identity_url`): the URL shown, the original one where an
  ablation shows another, and for a document whose URL the condition hides, the URL its pool
  gives it (``pools.jsonl`` beside the contexts file);
* the **page store** holds each document's text as the context showed it (the cut passage, not
  the full page), so the probes show the model what it saw.

Only methods that show the model the whole context as built can be traced this way
(:data:`WHOLE_CONTEXT_METHODS`: ``direct``); a method that reranks or filters the documents
first records no trace of which ones it kept, and is refused with a message naming it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from trek import runs
from trek.pages import PageStore
from trek.types import Document, RecordError

__all__ = ["WHOLE_CONTEXT_METHODS", "CtrlPages", "ctrl_pages", "identity_url", "trace_store"]

#: Ctrl methods whose model reads the whole context, in order (what TrekTrace can replay).
WHOLE_CONTEXT_METHODS = ("direct",)


def identity_url(doc: object, pool_urls: dict[str, str]) -> str | None:
    """The URL a context document is known by: the original URL where one is recorded, else the
    one shown, else its pool's URL (``None``: none of them)."""
    return (getattr(doc, "original_url", None) or getattr(doc, "url", None)
            or pool_urls.get(getattr(doc, "doc_id", "")))


@dataclass
class CtrlPages:
    """The documents a Ctrl run's model saw, per question: ``collections`` (identity URLs in
    context order) and ``documents`` (each as a page with the text the context showed)."""

    run_dir: Path
    contexts: Path
    condition: str
    collections: dict[str, list[str]]
    documents: list[Document]

    def collection(self, question_id: str) -> list[str]:
        """The identity URLs of the question's context (raises :class:`RecordError` when it has none)."""
        found = self.collections.get(question_id)
        if found is None:
            raise RecordError(self.contexts, None, f"no context of question {question_id!r} for condition "
                              f"{self.condition!r} (the Ctrl run {self.run_dir} answered it)")
        return found


def ctrl_pages(run_dir: str | os.PathLike[str]) -> CtrlPages | None:
    """The pages of a Ctrl run (module doc); ``None`` for any other run. A Ctrl run whose
    contexts file cannot be found, or whose method is not in :data:`WHOLE_CONTEXT_METHODS`,
    raises :class:`ValueError` naming it."""
    from trek.annotations import _find, pool_urls
    from trek.contexts import read_contexts

    rd = Path(run_dir)
    meta = runs.read_meta(rd)
    if meta is None or meta.kind != "ctrl" or not meta.config.get("contexts"):
        return None
    named, method, condition = meta.config["contexts"], meta.config.get("method"), meta.config.get("condition")
    if method not in WHOLE_CONTEXT_METHODS:
        raise ValueError(f"{rd}: TrekTrace replays a Ctrl run from its contexts only for method(s) "
                         f"{', '.join(WHOLE_CONTEXT_METHODS)} (the model read the whole context); method {method!r} "
                         "chose among the documents and its answers do not record which")
    path = _find(str(named), rd)
    if path is None:
        raise ValueError(f"{rd / runs.META}: its contexts file {named!r} was found neither as given nor under "
                         "a parent of the run directory")
    urls = pool_urls(path)
    collections: dict[str, list[str]] = {}
    documents: dict[str, Document] = {}
    for ctx in read_contexts(path):
        if ctx.condition != condition:
            continue
        order = []
        for d in ctx.documents:
            url = identity_url(d, urls)
            if url is None:
                raise RecordError(path, None, f"question {ctx.question_id!r}, condition {condition!r}: document "
                                  f"{d.doc_id!r} has no URL (shown, original or in the pools beside the file)")
            order.append(url)
            documents.setdefault(url, Document(id=d.doc_id, url=url, title="", text=d.text or "",
                                               date=d.original_date or d.date, question_id=ctx.question_id,
                                               role=d.role, supports_answer=d.answer))
        collections[ctx.question_id] = list(dict.fromkeys(order))
    return CtrlPages(rd, path, str(condition), collections, list(documents.values()))


def trace_store(run_dir: str | os.PathLike[str], *, fetch: bool = False) -> PageStore:
    """The page store TrekTrace reads a run's pages from: for a Ctrl run, one in memory holding
    the documents as its contexts showed them; for any other run, the run's own page store."""
    found = ctrl_pages(run_dir)
    if found is None:
        return PageStore(runs.default_pages_path(run_dir), fetch=fetch)
    store = PageStore(None)
    store.add_documents(found.documents)
    return store
