"""Retrieval test, evidence side (paper appendix C.2): the diagnostic judge's two calls.

1. :data:`KEY_EVIDENCE_PROMPT` (template ``trace.key_evidence``): from the gold pages that were
   not retrieved under their own URL, state in one or two sentences the fact(s) that connect the
   question to the reference answer.
2. :data:`MATCH_PROMPT` (template ``trace.evidence_match``): do the retrieved pages, together,
   contain those same facts? Topical overlap is not enough. The judge returns the matching
   evidence and the retrieved URLs that carry it, copied from the input; it never answers the
   question itself.

Both receive the reference answers (judges may see them; the evaluated model never does). The
pages are given as text from the page store rather than browsed (see docs/deviations.md).
Each reply is JSON; :func:`validate_key_evidence` and :func:`validate_match` read it or raise
``ValueError`` (which triggers a re-ask, and finally an ``unknown`` judgment).
"""

from __future__ import annotations

from typing import Any

from trek.llm.structured import object_schema
from trek.pages import normalize_url
from trek.templates import register
from trek.trace.common import JUDGE_CASE, REPLY_JSON, as_bool, as_text, as_urls, fetch_pages
from trek.trace.inputs import url_matches
from trek.trace.parts import (
    GOLD_UNAVAILABLE,
    NO_GOLD_PAGE,
    NO_RESULTS_SEEN,
    NO_RETRIEVED_TEXT,
    CaseRun,
    JudgeQuestion,
    TraceTest,
    trace_test,
)
from trek.trace.records import UrlMatch

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
    "KEY_EVIDENCE",
    "MATCH",
    "RetrievalTest",
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


KEY_EVIDENCE = JudgeQuestion("key_evidence", "diagnostic", KEY_EVIDENCE_TEMPLATE, KEY_EVIDENCE_PROMPT, VERSION,
                             KEY_EVIDENCE_SCHEMA, validate_key_evidence, exact="key_evidence")
MATCH = JudgeQuestion("evidence_match", "diagnostic", MATCH_TEMPLATE, MATCH_PROMPT, VERSION, MATCH_SCHEMA,
                      validate_match, exact="evidence_match")


@trace_test
class RetrievalTest(TraceTest):
    """C.2, evidence side: URL identity first, then key evidence and evidence match."""

    name = "retrieval"
    version = "retrieval-1"
    needs = ("gold_urls", "gold_pages", "collection", "coverage")
    questions = (KEY_EVIDENCE, MATCH)
    reads = ("evidence_retrieved: True when every gold URL is in the retrieved collection, or the retrieved "
             "pages together carry the key evidence of the gold pages that are not")

    async def run(self, c: CaseRun) -> None:
        case, cov, rec = c.case, c.coverage, c.rec
        q = case.question
        if cov.url_identity == "urls":
            matches = url_matches(q.gold_urls, case.collection)
        else:  # redirect links or document ids are not the pages' URLs: the evidence judge decides
            matches = [UrlMatch(gold_url=g) for g in q.gold_urls]
            c.notes.append(f"URL identity not checked: the log's result URLs are "
                           f"{cov.url_identity.replace('_', ' ')}, not the pages' own URLs; the evidence test decides")
        rec["url_matches"] = matches
        e: bool | None
        if all(m.matched_url is not None for m in matches):
            e, rec["retrieval_basis"] = c.ran(self.name, True), "url-identity"
        elif not case.collection and cov.results == "all":
            e, rec["retrieval_basis"] = c.ran(self.name, False), "no-retrieved-pages"
            rec["evidence_reason"] = "No page was retrieved or opened."
        elif not case.collection:  # the log shows no result: that is not "nothing was retrieved"
            rec["retrieval_basis"] = "results-not-recorded"
            c.skip(self.name, NO_RESULTS_SEEN)
            e = None
        else:
            missing = [p for p, m in zip(c.gold_pages, matches, strict=True) if m.matched_url is None]
            e = await self._match(c, missing)
            if e is False and (cov.results == "cited_only" or cov.page_text == "snippet"):
                rec["evidence_lower_bound"] = True
                c.notes.append("evidence not found among " + ("the cited pages only" if cov.results == "cited_only"
                               else "page snippets only") + ": the retrieval test is a lower bound")
        rec["evidence_retrieved"] = e

    async def _match(self, c: CaseRun, missing: list[Any]) -> bool | None:
        """Key evidence from the gold pages not retrieved, then matched against the retrieved pages.

        ``None`` when a reply stays unreadable, none of those gold pages is available or no
        retrieved page has text (the test is then recorded as skipped). Equivalent URLs the judge
        names are kept only when they are in the retrieved collection (as written there)."""
        case, rec = c.case, c.rec
        q = case.question
        if not any(p.available for p in missing):
            rec["retrieval_basis"], rec["evidence_reason"] = "gold-unavailable", GOLD_UNAVAILABLE
            c.skip(self.name, NO_GOLD_PAGE)
            return None
        retrieved = await fetch_pages(c.config.store, case.collection)
        if not any(p.available for p in retrieved):
            rec["retrieval_basis"] = "retrieved-unavailable"
            rec["evidence_reason"] = "No retrieved page has text in the page store (or by fetching)."
            c.skip(self.name, NO_RETRIEVED_TEXT)
            return None
        ke = await c.ask(KEY_EVIDENCE, c.judge_fields(gold_pages=c.pages(missing)),
                         facts=(q, [p.url for p in missing]))
        if ke.status == "unknown":
            rec["retrieval_basis"] = "unknown"
            return c.ran(self.name, None)
        rec["key_evidence"] = ke.value["key_evidence"]
        fields = c.judge_fields(key_evidence=ke.value["key_evidence"], retrieved_pages=c.pages(retrieved))
        audit_ke = c.audit_values.get("key_evidence")  # the audit judge matches the evidence it extracted itself
        em = await c.ask(MATCH, fields, facts=(q, case.collection),
                         audit_fields={**fields, "key_evidence": audit_ke["key_evidence"]} if audit_ke else {})
        if em.status == "unknown":
            rec["retrieval_basis"] = "unknown"
            return c.ran(self.name, None)
        by_key = {normalize_url(u): u for u in reversed(case.collection)}
        rec["retrieval_basis"] = "evidence-match"
        rec["retrieved_key_evidence"] = em.value["retrieved_key_evidence"] or None
        rec["equivalent_urls"] = list(dict.fromkeys(by_key[k] for k in map(normalize_url, em.value["equivalent_urls"])
                                                    if k in by_key))
        rec["evidence_reason"] = em.value["reason"] or None
        return c.ran(self.name, bool(em.value["evidence_match"]))
