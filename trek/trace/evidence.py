"""Retrieval test, evidence side (paper appendix C.2): the diagnostic judge's two calls.

1. :data:`KEY_EVIDENCE_PROMPT` (template ``trace.key_evidence``): from the gold pages that were
   not retrieved under their own URL, state in one or two sentences the fact(s) that connect the
   question to the reference answer.
2. :data:`MATCH_PROMPT` (template ``trace.evidence_match``): do the retrieved pages, together,
   contain those same facts? Topical overlap is not enough. The judge returns the matching
   evidence and the retrieved URLs that carry it, copied from the input; it never answers the
   question itself.

Both receive the reference answers (judges may see them; the evaluated model never does). The
pages are given as text from the page store rather than browsed (see the README's deviations).
Each reply is JSON; :func:`validate_key_evidence` and :func:`validate_match` read it or raise
``ValueError`` (which triggers a re-ask, and finally an ``unknown`` judgment).
"""

from __future__ import annotations

from typing import Any

from trek.llm.structured import object_schema
from trek.templates import register
from trek.trace.common import JUDGE_CASE, REPLY_JSON, as_bool, as_text, as_urls

__all__ = [
    "VERSION",
    "KEY_EVIDENCE_TEMPLATE",
    "MATCH_TEMPLATE",
    "KEY_EVIDENCE_PROMPT",
    "MATCH_PROMPT",
    "KEY_EVIDENCE_SCHEMA",
    "MATCH_SCHEMA",
    "validate_key_evidence",
    "validate_match",
]

VERSION = "trace-evidence-1"
KEY_EVIDENCE_TEMPLATE = "trace.key_evidence"
MATCH_TEMPLATE = "trace.evidence_match"

KEY_EVIDENCE_PROMPT = """\
[TrekTrace: key evidence]
A benchmark question has reference answer(s) and gold pages that are known to support them. \
Read only the gold pages below and write down the smallest piece of concrete evidence that \
links the question to the reference answer: one or two short sentences, in your own words or \
quoted. Do not list requirements, do not judge whether the reference is right, and do not use \
anything you know from elsewhere.

""" + JUDGE_CASE + """
Gold pages:
{gold_pages}

""" + REPLY_JSON + """{{"key_evidence": "the answer-bearing fact(s)", "gold_evidence_urls": ["gold URL(s) it comes from, copied exactly"]}}"""

MATCH_PROMPT = """\
[TrekTrace: evidence match]
Below is a short statement of the evidence that answers a benchmark question, taken from its \
gold pages, and the collection of pages a search system actually retrieved. Decide whether the \
retrieved pages contain the same fact(s). Several retrieved pages may supply the evidence \
together. A page that is only about the same topic, or that states the fact for another time, \
entity or condition, does not count. Use only the retrieved pages shown here. Do not answer the \
question yourself.

""" + JUDGE_CASE + """Gold key evidence: {key_evidence}

Retrieved pages:
{retrieved_pages}

""" + REPLY_JSON + """{{"evidence_match": true or false, "retrieved_key_evidence": "the matching fact(s) as the retrieved pages state them, or empty", \
"equivalent_urls": ["every retrieved URL that carries them, copied exactly from the list above"], \
"reason": "one or two sentences a person can check"}}"""


register(KEY_EVIDENCE_TEMPLATE, KEY_EVIDENCE_PROMPT)
register(MATCH_TEMPLATE, MATCH_PROMPT)

#: The reply shapes, sent to endpoints that enforce schemas.
KEY_EVIDENCE_SCHEMA = object_schema({"key_evidence": "text", "gold_evidence_urls": "strings"})
MATCH_SCHEMA = object_schema({"evidence_match": "boolean", "retrieved_key_evidence": "text",
                              "equivalent_urls": "strings", "reason": "text"})


def validate_key_evidence(value: dict[str, Any]) -> dict[str, Any]:
    return {
        "key_evidence": as_text(value.get("key_evidence"), "key_evidence", required=True),
        "gold_evidence_urls": as_urls(value.get("gold_evidence_urls"), "gold_evidence_urls"),
    }


def validate_match(value: dict[str, Any]) -> dict[str, Any]:
    if "evidence_match" not in value:
        raise ValueError("field 'evidence_match' is missing")
    return {
        "evidence_match": as_bool(value["evidence_match"], "evidence_match"),
        "retrieved_key_evidence": as_text(value.get("retrieved_key_evidence"), "retrieved_key_evidence"),
        "equivalent_urls": as_urls(value.get("equivalent_urls"), "equivalent_urls"),
        "reason": as_text(value.get("reason"), "reason"),
    }
