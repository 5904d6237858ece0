"""Structured-evidence RAG (paper §4.3, D.6): extract per-document evidence, then contrast it.

Call 1 (template ``rag.structured.extract``) asks for a JSON array with one record per document:
``document_id``, ``key_evidence``, ``candidate_answer``, ``relation`` (``answers``,
``competing`` or ``irrelevant``) and ``reason``. :func:`parse_extraction` keeps the well-formed
records (one per document id in 1..n) and records what it dropped; a reply that is not a JSON
array of records is re-asked up to ``max_reasks`` times. Each kept record is then given the
document's displayed date and, where the condition shows it, its source URL (the paper's
"available timestamps and sources").

Call 2 (template ``rag.structured.contrast``) compares the candidates and replies
``#Contrast: ... #Answer: ...``; :func:`parse_contrast` takes the text after the last
``#Answer:`` as the final answer. A reply without it is re-asked ``format_reasks`` times; if it
is still missing, the answer is recorded as ``unparsed`` (no final answer, never a guess).
When the extraction stays unreadable, call 2 receives the raw extraction reply as its evidence
and the record says so (``extraction: "unparsed"``).
Two model calls per question (plus re-asks for unreadable replies).

``json_answer=True`` (``trek ctrl run --structured-json``; a deviation, off by default, on for the
embedded model in ``make runs``) asks call 2 for ``{"contrast": ..., "answer": ...}`` instead
(template ``rag.structured.contrast_json``), sent with its JSON schema to endpoints that constrain
replies to one (:func:`trek.llm.structured.achat_json`): a small model that never writes the
``#Answer:`` line then still gives a readable answer. The record says ``answer_format: "json"``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from trek.contexts import Context
from trek.llm.client import LLMClient
from trek.llm.structured import object_schema
from trek.rag.answer import MethodOutput, ask_json, ask_json_into, question_prompt
from trek.templates import register, template_version
from trek.types import Question

__all__ = [
    "VERSION",
    "EXTRACT_PROMPT",
    "CONTRAST_PROMPT",
    "CONTRAST_JSON_PROMPT",
    "CONTRAST_SCHEMA",
    "check_contrast_json",
    "RELATIONS",
    "check_extraction_shape",
    "parse_extraction",
    "evidence_text",
    "parse_contrast",
    "Structured",
]

VERSION = "rag.structured/1"
RELATIONS = ("answers", "competing", "irrelevant")

EXTRACT_PROMPT = register(
    "rag.structured.extract",
    """\
Go through every document below. For each one, pick the passage that helps most with the \
question and name the answer that passage supports. Say in a few words whether the document \
answers the question directly ("answers"), offers a conflicting or competing answer \
("competing"), or does not bear on the question ("irrelevant"). Do not answer the question.

Reply with JSON only: one compact array with an object per document, each with the fields \
document_id, key_evidence, candidate_answer, relation and reason.

Question: {question}
Time frame: {effective_year}

{docs_block}""",
)

# the two contrast prompts differ only in the reply format they ask for
_CONTRAST_TASK = """\
Below is evidence extracted from several documents. Compare the candidate answers and decide \
which one best answers the question as of {effective_year}. Say briefly why it is better \
supported than the other candidates.

"""
_CONTRAST_INPUT = """

Question: {question}

Extracted evidence:
{extracted_evidence}"""

CONTRAST_PROMPT = register(
    "rag.structured.contrast",
    _CONTRAST_TASK + "Reply in exactly this form:\n#Contrast: <a short comparison>\n#Answer: <the short final answer>"
    + _CONTRAST_INPUT,
)

CONTRAST_JSON_PROMPT = register(
    "rag.structured.contrast_json",
    _CONTRAST_TASK + 'Reply with JSON only: {{"contrast": "<a short comparison>", "answer": "<the short final answer>"}}'
    + _CONTRAST_INPUT,
)

#: The reply shape of the JSON contrast call.
CONTRAST_SCHEMA = object_schema({"contrast": "text", "answer": {"type": "string", "minLength": 1, "maxLength": 80}})

FORMAT_REASK = (
    "Your reply did not end with a line starting with #Answer:. Reply again in exactly this form:\n"
    "#Contrast: <a short comparison>\n#Answer: <the short final answer>"
)

_ANSWER = re.compile(r"#\s*Answer\s*:", re.IGNORECASE)
_CONTRAST = re.compile(r"#\s*Contrast\s*:", re.IGNORECASE)
_FIELDS = ("key_evidence", "candidate_answer", "relation", "reason")


def extraction_schema(n: int) -> dict[str, Any]:
    """The reply shape for a context of ``n`` documents (sent to endpoints that enforce schemas):
    ``{"documents": [...]}`` with at most one record per document."""
    def short(chars: int) -> dict[str, Any]:
        return {"type": "string", "maxLength": chars}

    record = object_schema({"document_id": {"type": "integer", "minimum": 1, "maximum": n},
                            "key_evidence": short(80), "candidate_answer": short(40),
                            "relation": {"type": "string", "enum": list(RELATIONS)}, "reason": short(40)})
    return object_schema({"documents": {"type": "array", "items": record, "maxItems": n}})


def check_extraction_shape(value: Any) -> list[Any]:
    """The list of records of an extraction reply: a JSON array, or an object holding exactly one
    array (e.g. ``{"documents": [...]}``). Other shapes raise ``ValueError`` (a re-ask)."""
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        lists = [v for v in value.values() if isinstance(v, list)]
        if len(lists) == 1:
            return lists[0]
        if "document_id" in value:
            return [value]
    raise ValueError("expected a JSON array of records with document_id, key_evidence, candidate_answer, "
                     "relation and reason")


def _text(v: Any) -> str:
    if v is None:
        return ""
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)


def parse_extraction(items: list[Any], n: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Well-formed records (sorted by document id) and the dropped items with a reason.

    A record needs an integer ``document_id`` in 1..n not seen before; missing text fields become
    ``""``; ``relation`` is lower-cased and anything outside :data:`RELATIONS` becomes ``"other"``
    (the original kept as ``relation_raw``).
    """
    kept: dict[int, dict[str, Any]] = {}
    dropped: list[dict[str, Any]] = []
    for item in items:
        if not isinstance(item, dict):
            dropped.append({"item": item, "reason": "not an object"})
            continue
        raw_id = item.get("document_id")
        try:
            i = int(raw_id) if not isinstance(raw_id, bool) else None
        except (TypeError, ValueError):
            i = None
        if i is None or (isinstance(raw_id, float) and not raw_id.is_integer()):
            dropped.append({"item": item, "reason": "no integer document_id"})
            continue
        if not 1 <= i <= n:
            dropped.append({"item": item, "reason": f"document_id {i} out of range 1..{n}"})
            continue
        if i in kept:
            dropped.append({"item": item, "reason": f"document_id {i} repeated"})
            continue
        rec: dict[str, Any] = {"document_id": i, **{f: _text(item.get(f)).strip() for f in _FIELDS}}
        rel = rec["relation"].lower()
        if rel not in RELATIONS:
            rec["relation_raw"] = rec["relation"]
            rel = "other"
        rec["relation"] = rel
        kept[i] = rec
    return [kept[i] for i in sorted(kept)], dropped


def evidence_text(records: list[dict[str, Any]], ctx: Context) -> str:
    """One JSON object per line: each record with its document's displayed date and, when the
    condition shows it, source URL."""
    lines = []
    for r in records:
        doc = ctx.documents[r["document_id"] - 1]
        row = {"document_id": r["document_id"], "date": doc.date, "source_url": doc.url,
               **{f: r[f] for f in _FIELDS}}
        if doc.url is None:
            row.pop("source_url")
        lines.append(json.dumps(row, ensure_ascii=False))
    return "\n".join(lines) if lines else "(no evidence could be extracted)"


def parse_contrast(text: str | None) -> tuple[str | None, str]:
    """``(contrast, answer)`` from a ``#Contrast: ... #Answer: ...`` reply.

    The answer is the text after the last ``#Answer:`` (markdown emphasis and surrounding quotes
    stripped); the contrast is the text between ``#Contrast:`` and that marker (``None`` when
    absent). Raises ``ValueError`` when there is no ``#Answer:`` or nothing after it.
    """
    s = text or ""
    marks = list(_ANSWER.finditer(s))
    if not marks:
        raise ValueError("no #Answer: in the reply")
    last = marks[-1]
    answer = s[last.end():].strip().strip("*_`").strip().strip('"').strip()
    if not answer:
        raise ValueError("nothing after #Answer:")
    head = s[: last.start()]
    c = list(_CONTRAST.finditer(head))
    contrast = head[c[-1].end():].strip() if c else None
    return contrast, answer


def check_contrast_json(value: Any) -> dict[str, str]:
    """The ``{"contrast", "answer"}`` reply of the JSON contrast call; ``ValueError`` (a re-ask)
    when the answer is missing or empty."""
    if not isinstance(value, dict):
        raise ValueError("expected a JSON object with contrast and answer")
    answer = value.get("answer")
    if not isinstance(answer, str) or not answer.strip():
        raise ValueError("'answer' must be a non-empty string")
    contrast = value.get("contrast")
    return {"contrast": contrast if isinstance(contrast, str) else _text(contrast), "answer": answer.strip()}


@dataclass
class Structured:
    """Per-document evidence records, then a contrastive answer."""

    max_reasks: int = 2
    format_reasks: int = 1
    json_answer: bool = False

    name = "structured"
    calls = 2

    def config(self) -> dict[str, Any]:
        out = {"method": self.name, "version": VERSION, "max_reasks": self.max_reasks,
               "format_reasks": self.format_reasks, "evidence_fields_added": ["date", "source_url"]}
        if self.json_answer:  # only when on, so runs made before the option keep their identity
            out["json_answer"] = True
        return out

    def versions(self) -> dict[str, str]:
        contrast = (("rag.structured.contrast_json", CONTRAST_JSON_PROMPT) if self.json_answer
                    else ("rag.structured.contrast", CONTRAST_PROMPT))
        return {
            "rag.structured.extract": template_version("rag.structured.extract", EXTRACT_PROMPT, VERSION),
            contrast[0]: template_version(contrast[0], contrast[1], VERSION),
        }

    async def arun(self, q: Question, ctx: Context, client: LLMClient, params: dict[str, Any]) -> MethodOutput:
        out, res = await ask_json(client, q, "rag.structured.extract", EXTRACT_PROMPT, ctx.rendered, params,
                                  call="extract", validate=check_extraction_shape, max_reasks=self.max_reasks,
                                  schema=extraction_schema(len(ctx.documents)))
        if res is None:
            return out
        if res.ok:
            records, dropped = parse_extraction(res.value, len(ctx.documents))
            evidence = evidence_text(records, ctx)
            out.details = {"extraction": "ok", "records": records, "dropped": dropped}
        else:
            evidence = res.raw_texts[-1] if res.raw_texts else ""
            out.details = {"extraction": "unparsed", "records": [], "extraction_error": res.error}
        out.details["extract_attempts"] = res.attempts
        if self.json_answer:
            return await self._json_contrast(q, client, params, evidence, out)
        convo = [{"role": "user",
                  "content": question_prompt("rag.structured.contrast", CONTRAST_PROMPT, q, extracted_evidence=evidence)}]
        for attempt in range(self.format_reasks + 1):
            r = await client.achat(convo, **params)
            if not r.ok:
                return out.pending(r.error)
            text = r.content or ""
            out.add("contrast", text, r.usage)
            try:
                contrast, answer = parse_contrast(text)
            except ValueError as e:
                out.details["answer"] = "unparsed"
                out.details["answer_error"] = str(e)
                convo = [*convo, {"role": "assistant", "content": text}, {"role": "user", "content": FORMAT_REASK}]
                continue
            out.details.update({"answer": "ok", "contrast": contrast, "contrast_attempts": attempt + 1})
            out.details.pop("answer_error", None)
            out.final_answer = answer
            return out
        out.details["contrast_attempts"] = self.format_reasks + 1
        return out

    async def _json_contrast(self, q: Question, client: LLMClient, params: dict[str, Any], evidence: str,
                             out: MethodOutput) -> MethodOutput:
        prompt = question_prompt("rag.structured.contrast_json", CONTRAST_JSON_PROMPT, q, extracted_evidence=evidence)
        res = await ask_json_into(out, client, prompt, params, call="contrast", validate=check_contrast_json,
                                  max_reasks=self.format_reasks, schema=CONTRAST_SCHEMA)
        out.details["answer_format"] = "json"
        out.details["contrast_attempts"] = res.attempts
        if res.status == "pending":
            return out
        if not res.ok:
            out.details["answer"] = "unparsed"
            out.details["answer_error"] = res.error
            return out
        out.details.update({"answer": "ok", "contrast": res.value["contrast"]})
        out.final_answer = res.value["answer"]
        return out
