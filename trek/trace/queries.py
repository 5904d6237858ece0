"""Retrieval test, query side (paper appendix C.2): were the recorded queries adequate?

Asked of the analysis judge only when the answer-bearing evidence was not shown to be retrieved.
Adequate queries aim at the entity, the time and the fact the question needs (and split a
multi-hop question into the steps it requires); a wrong entity or date, a missing hop, or no
query aimed at the answer makes them inadequate. Adequate gives Retrieval, anything else
Pre-retrieval (:func:`~trek.trace.labels.assign_labels`). This is a plausibility reading of the
queries, not a new search. A trajectory without any query is inadequate without a call.

Template ``trace.query_adequacy``; the reply is JSON read by :func:`validate`.
"""

from __future__ import annotations

from typing import Any

from trek.llm.structured import object_schema
from trek.templates import register
from trek.trace.common import JUDGE_CASE, REPLY_JSON, flag_and_reason
from trek.trace.parts import NO_QUERIES_SEEN, SOME_QUERIES_SEEN, CaseRun, JudgeQuestion, TraceTest, trace_test

__all__ = ["VERSION", "TEMPLATE", "PROMPT", "SCHEMA", "validate", "NO_QUERIES_REASON", "QUERY_ADEQUACY", "QueryTest"]

VERSION = "trace-queries-1"
TEMPLATE = "trace.query_adequacy"
NO_QUERIES_REASON = "No search query was recorded, so no query targeted the evidence."

PROMPT = """\
[TrekTrace: query adequacy]
A search-augmented system answered the question below wrongly, and the pages it retrieved do \
not contain the evidence it needed. Judge only its search queries: taken together, do they \
reasonably aim at what the question needs, namely the right entity, the right time and the \
right fact, with a separate query for each step a multi-hop question requires? Queries that name \
a wrong entity or date, skip a necessary step, or never aim at the answer are not adequate. \
This is about the queries as written, not about what a search engine would return.

""" + JUDGE_CASE + """Gold page URL(s): {gold_urls}
The system's wrong answer: {prediction}

Search queries, in the order issued:
{queries}

""" + REPLY_JSON + """{{"query_adequate": true or false, "reason": "two or three short sentences a person can check"}}"""


register(TEMPLATE, PROMPT)

#: The reply shape, sent to endpoints that enforce schemas.
SCHEMA = object_schema({"query_adequate": "boolean", "reason": "text"})


def validate(value: dict[str, Any]) -> dict[str, Any]:
    return flag_and_reason(value, "query_adequate")


QUERY_ADEQUACY = JudgeQuestion("query_adequacy", "analysis", TEMPLATE, PROMPT, VERSION, SCHEMA, validate,
                               exact="query_adequacy")


@trace_test
class QueryTest(TraceTest):
    """C.2, query side: were the recorded queries adequate (asked when the evidence was not shown
    retrieved; the schedule gates it)."""

    name = "queries"
    version = "queries-1"
    needs = ("queries", "coverage", "prediction", "gold_urls")
    questions = (QUERY_ADEQUACY,)
    reads = "query_adequate: True when the recorded queries aim at the entity, time and fact the question needs"

    async def run(self, c: CaseRun) -> None:
        case, cov, rec = c.case, c.coverage, c.rec
        q = case.question
        qa: bool | None = None
        if cov.queries == "none" or (cov.queries == "some" and not case.queries):
            c.skip(self.name, NO_QUERIES_SEEN)
        elif not case.queries:
            qa, rec["query_reason"] = c.ran(self.name, False), NO_QUERIES_REASON
        else:
            fields = c.judge_fields(gold_urls="\n".join(q.gold_urls), prediction=case.prediction or "(no answer)",
                                    queries="\n".join(f"{i}. {s}" for i, s in enumerate(case.queries, 1)))
            st = await c.ask(QUERY_ADEQUACY, fields, facts=(q, case.queries))
            if st.status == "ok":
                qa, rec["query_reason"] = st.value["query_adequate"], st.value["reason"] or None
            if qa is False and cov.queries == "some":  # the unseen queries may have aimed right
                c.skip(self.name, SOME_QUERIES_SEEN)
            else:
                c.ran(self.name, qa)
        rec["query_adequate"] = qa
