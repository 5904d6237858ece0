"""Filtering-based RAG (paper §4.3, D.6): the model picks the documents to keep, then answers.

Call 1 (template ``rag.filter``) asks for the one-based ids of the documents to keep, as
``{"keep_document_ids": [...]}``: documents that are relevant, satisfy every requirement of the
question, are trustworthy, and are the latest valid version of what they report. Call 2 is the
shared answer prompt on the kept documents, in context order, renumbered.

:func:`parse_keep_ids` reads the ids: integers (or integer strings) in 1..n are kept once; ids
out of range, repeated or not integers are dropped and recorded. A reply that is not the asked
JSON shape is re-asked up to ``max_reasks`` times (:func:`trek.llm.structured.achat_json`).
An empty selection, or a reply still unreadable after the re-asks, is recorded
(``selection: "empty"`` / ``"unparsed"``) and answered with the fallback ``empty_fallback``:
``"all"`` (every document, i.e. Direct; the default) or ``"none"`` (an empty document list).
Two model calls per question (plus re-asks for unreadable replies).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trek.contexts import Context, render_documents
from trek.llm.client import LLMClient
from trek.llm.structured import object_schema
from trek.rag.answer import MethodOutput, aanswer, answer_version, ask_json
from trek.templates import register, template_version
from trek.types import Question

__all__ = ["VERSION", "FILTER_PROMPT", "parse_keep_ids", "check_keep_shape", "Filter"]

VERSION = "rag.filter/2"

FILTER_PROMPT = register(
    "rag.filter",
    """\
Another model will answer the question given after the documents, as of its effective year, \
using only the documents you keep. Decide which documents to keep. Do not answer the question \
yourself.

Keep a document only if its content directly meets the whole information need of the question. \
Leave out documents that are off topic, that miss any requirement stated in the question, or \
whose content you do not trust. When several documents report the same information, keep the \
latest version that is valid for the requested time and leave out the versions it replaces. \
Keep as many or as few documents as needed; there is no minimum and no maximum.

Reply with JSON only, listing the one-based ids of every document to keep, for example \
{{"keep_document_ids": [1, 4, 7]}}

{docs_block}

Effective year: {effective_year}
Question: {question}""",
)


#: The reply shape, sent to endpoints that enforce schemas.
SCHEMA = object_schema({"keep_document_ids": "integers"})


def check_keep_shape(value: Any) -> list[Any]:
    """The raw id list of a filter reply: ``{"keep_document_ids": [...]}`` or a bare list.
    Raises ``ValueError`` for any other shape (which triggers a re-ask)."""
    if isinstance(value, dict):
        ids = value.get("keep_document_ids")
        if not isinstance(ids, list):
            raise ValueError('expected {"keep_document_ids": [ids]}')
        return ids
    if isinstance(value, list):
        return value
    raise ValueError('expected {"keep_document_ids": [ids]}')


def _as_int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str) and v.strip().lstrip("+").isdigit():
        return int(v.strip())
    return None


def parse_keep_ids(ids: list[Any], n: int) -> tuple[list[int], dict[str, list[Any]]]:
    """Valid one-based ids in ascending order, and what was dropped:
    ``{"out_of_range": [...], "duplicate": [...], "not_an_id": [...]}`` (lists in reply order)."""
    kept: set[int] = set()
    dropped: dict[str, list[Any]] = {"out_of_range": [], "duplicate": [], "not_an_id": []}
    for v in ids:
        i = _as_int(v)
        if i is None:
            dropped["not_an_id"].append(v)
        elif not 1 <= i <= n:
            dropped["out_of_range"].append(i)
        elif i in kept:
            dropped["duplicate"].append(i)
        else:
            kept.add(i)
    return sorted(kept), dropped


@dataclass
class Filter:
    """Model-selected documents, then the shared answer prompt."""

    empty_fallback: str = "all"
    max_reasks: int = 2

    name = "filter"
    calls = 2

    def __post_init__(self) -> None:
        if self.empty_fallback not in ("all", "none"):
            raise ValueError("empty_fallback must be 'all' or 'none'")

    def config(self) -> dict[str, Any]:
        return {"method": self.name, "version": VERSION, "empty_fallback": self.empty_fallback,
                "max_reasks": self.max_reasks}

    def versions(self) -> dict[str, str]:
        return {"rag.filter": template_version("rag.filter", FILTER_PROMPT, VERSION), "rag.answer": answer_version()}

    async def arun(self, q: Question, ctx: Context, client: LLMClient, params: dict[str, Any]) -> MethodOutput:
        docs = ctx.documents
        out, res = await ask_json(client, q, "rag.filter", FILTER_PROMPT, ctx.rendered, params, call="filter",
                                  validate=check_keep_shape, max_reasks=self.max_reasks, schema=SCHEMA)
        if res is None:
            return out
        if res.ok:
            kept, dropped = parse_keep_ids(res.value, len(docs))
            selection = "kept" if kept else "empty"
        else:
            kept, dropped, selection = [], {}, "unparsed"
        out.details = {
            "selection": selection,
            "kept_ids": kept,
            "kept_doc_ids": [docs[i - 1].doc_id for i in kept],
            "dropped_ids": {k: v for k, v in dropped.items() if v},
            "filter_attempts": res.attempts,
        }
        if selection != "kept":
            out.details["fallback"] = self.empty_fallback
            if res.error:
                out.details["filter_error"] = res.error
            kept = list(range(1, len(docs) + 1)) if self.empty_fallback == "all" else []
        docs_block = ctx.rendered if len(kept) == len(docs) else render_documents(docs[i - 1] for i in kept)
        return await aanswer(client, q, docs_block, out, params)
