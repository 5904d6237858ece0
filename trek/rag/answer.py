"""The shared answer prompt of the Ctrl baselines (paper D.6) and what every method returns.

Direct generation uses this prompt on every document of a context; Rerank and Filter use it on
the documents they chose. The prompt is written in our own words and carries the fields the
paper lists: the effective year (relative time words read against it), the documents in no
particular order with their dates, the expectation of conflicting values, and the question.
It is the named template ``rag.answer`` (override with ``TREK_PROMPTS``/``--prompts``).
The instructions come first and everything that changes (documents, year, question) last, so an
endpoint that caches prompt prefixes (OpenAI's prompt caching, llama.cpp's state cache) reads the
instructions once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trek.answer_prompts import year_text
from trek.llm.client import LLMClient
from trek.llm.structured import StructuredResult, achat_json
from trek.templates import register, render, template_version
from trek.types import Question, Usage

__all__ = [
    "VERSION",
    "ANSWER_PROMPT",
    "MethodOutput",
    "as_of",
    "question_prompt",
    "answer_version",
    "ask",
    "ask_json",
    "ask_json_into",
    "aanswer",
]

VERSION = "rag.answer/2"

ANSWER_PROMPT = register(
    "rag.answer",
    """\
Answer the question at the end from the documents below and from nothing else. Reply with \
the final answer only, without any explanation.

Answer as of the effective year given with the question. Every relative time word in the \
question ("current", "currently", "now", "today", "this year", "last year", "recent", \
"latest", "most recent") refers to that year.

The documents are not in any particular order; each one shows its date when the date is \
known. This fact changes over time, so expect several documents to give different, \
conflicting values. Find the value that is the most recent one still valid in the effective \
year and that answers exactly what is asked:
- order the conflicting values by the dates of their documents and take the latest value \
that still holds in the effective year;
- drop a value once a later document on the same question replaces it, and drop documents \
that are about something other than what the question asks.

=== DOCUMENTS ===
{docs_block}
=== END OF DOCUMENTS ===

Effective year: {effective_year}
Question: {question}
Answer:""",
)


def as_of(q: Question) -> str:
    """The effective year as written into prompts: ``2024``, a bound such as ``before 2022``,
    or ``the present day`` for a question without any year (InfoDeepSeek)."""
    return year_text(q) or "the present day"


def question_prompt(name: str, template: str, q: Question, **values: str) -> str:
    """The prompt template ``name`` filled in with the question, its :func:`as_of` and ``values``."""
    return render(name, template, question=q.question, effective_year=as_of(q), **values)


def answer_version() -> str:
    return template_version("rag.answer", ANSWER_PROMPT, VERSION)


@dataclass
class MethodOutput:
    """What a baseline did for one question under one condition.

    ``status`` is ``pending`` when a model call failed after its retries (or was not issued
    because of the budget): there is then no answer. ``details`` holds the intermediate outputs
    (scores, kept ids, extracted records, parse outcomes); ``replies`` every model reply in order,
    as ``{"role": "assistant", "call": <step>, "content": <text>}``.
    """

    final_answer: str | None = None
    status: str = "ok"
    error: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    replies: list[dict[str, Any]] = field(default_factory=list)

    def pending(self, error: str | None) -> MethodOutput:
        self.status = "pending"
        self.final_answer = None
        self.error = error or "model call failed"
        return self

    def add(self, call: str, text: str | None, usage: Usage) -> None:
        self.usage = self.usage + usage.model_copy(update={"cost_usd": usage.cost_usd or 0.0})
        self.replies.append({"role": "assistant", "call": call, "content": text})


async def ask(client: LLMClient, prompt: str, call: str, out: MethodOutput, params: dict[str, Any]) -> str | None:
    """One user-message call; records usage and reply in ``out``. ``None`` (and ``out`` marked
    pending) when the call failed."""
    res = await client.achat([{"role": "user", "content": prompt}], **params)
    if not res.ok:
        out.pending(res.error)
        return None
    text = res.content or ""
    out.add(call, text, res.usage)
    return text


async def ask_json(client: LLMClient, q: Question, name: str, template: str, docs_block: str, params: dict[str, Any],
                   *, call: str, validate: Any, max_reasks: int,
                   schema: dict[str, Any] | None = None) -> tuple[MethodOutput, StructuredResult | None]:
    """The first call of Filter and Structured: template ``name`` on the question and ``docs_block``,
    asking for JSON with re-asks (:func:`ask_json_into`). Returns the method's output (every reply,
    the usage) and the result, ``ok``, ``unparsed`` or ``None`` (output pending)."""
    out = MethodOutput()
    res = await ask_json_into(out, client, question_prompt(name, template, q, docs_block=docs_block), params,
                              call=call, validate=validate, max_reasks=max_reasks, schema=schema)
    return out, None if res.status == "pending" else res


async def ask_json_into(out: MethodOutput, client: LLMClient, prompt: str, params: dict[str, Any], *, call: str,
                        validate: Any, max_reasks: int, schema: dict[str, Any] | None = None) -> StructuredResult:
    """``prompt`` as one user turn, asking for JSON with re-asks
    (:func:`trek.llm.structured.achat_json`; ``schema`` is sent to endpoints that enforce one).
    Every reply and the usage go to ``out``, which is marked pending when the call failed."""
    res = await achat_json(client, [{"role": "user", "content": prompt}], validate=validate, max_reasks=max_reasks,
                           schema=schema, **params)
    for text in res.raw_texts:
        out.replies.append({"role": "assistant", "call": call, "content": text})
    out.usage = out.usage + res.usage
    if res.status == "pending":
        out.pending(res.error)
    return res


async def aanswer(
    client: LLMClient, q: Question, docs_block: str, out: MethodOutput, params: dict[str, Any], call: str = "answer"
) -> MethodOutput:
    """The shared answer prompt on ``docs_block``; the reply, stripped, is the final answer."""
    prompt = question_prompt("rag.answer", ANSWER_PROMPT, q, docs_block=docs_block)
    text = await ask(client, prompt, call, out, params)
    if text is not None:
        out.final_answer = text.strip()
    return out
