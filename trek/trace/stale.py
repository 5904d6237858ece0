"""Stale-reference check (beyond the paper; off by default): do the gold pages, as fetched now,
still support the reference answer at the question's effective year?

The paper finds that most annotation errors come from knowledge that moved on (answers that
changed, gold pages that no longer support them). When enabled, the diagnostic judge reads the
gold pages and says whether they support the reference; a case it flags is listed first in the
review workbook. The flag never changes a label: deciding that a reference is wrong is the
reviewer's call (the workbook's "reference valid" column).

Template ``trace.stale_reference``; the reply is JSON read by :func:`validate`.
"""

from __future__ import annotations

from typing import Any

from trek.llm.structured import object_schema
from trek.templates import register
from trek.trace.common import JUDGE_CASE, REPLY_JSON, flag_and_reason
from trek.trace.parts import CaseRun, JudgeQuestion, TraceTest, trace_test

__all__ = ["VERSION", "TEMPLATE", "PROMPT", "SCHEMA", "validate", "STALE_REFERENCE", "StaleTest"]

VERSION = "trace-stale-1"
TEMPLATE = "trace.stale_reference"

PROMPT = """\
[TrekTrace: stale reference check]
A benchmark question comes with reference answer(s) and the gold pages its annotators cited. The \
pages below are those gold pages as they can be read today. Say whether they still support the \
reference answer for the question's effective year. Answer false when a page now states a \
different answer for that time, no longer contains the supporting fact, or is unavailable. Keep \
apart the time a claim was true and the time a page was published or updated.

""" + JUDGE_CASE + """
Gold pages:
{gold_pages}

""" + REPLY_JSON + """{{"supports_reference": true or false, "reason": "one or two sentences a person can check"}}"""


register(TEMPLATE, PROMPT)

#: The reply shape, sent to endpoints that enforce schemas.
SCHEMA = object_schema({"supports_reference": "boolean", "reason": "text"})


def validate(value: dict[str, Any]) -> dict[str, Any]:
    return flag_and_reason(value, "supports_reference")


STALE_REFERENCE = JudgeQuestion("stale_reference", "diagnostic", TEMPLATE, PROMPT, VERSION, SCHEMA, validate,
                                exact="stale")


@trace_test
class StaleTest(TraceTest):
    """Beyond the paper: do the gold pages still support the reference? (``check_stale`` only;
    never changes a label)."""

    name = "stale"
    version = "stale-1"
    needs = ("gold_pages",)
    questions = (STALE_REFERENCE,)
    reads = "stale_reference: True when the gold pages, read today, no longer support the reference"

    def enabled(self, config: Any) -> bool:
        return bool(config.check_stale)

    async def run(self, c: CaseRun) -> None:
        st = await c.ask(STALE_REFERENCE, c.judge_fields(gold_pages=c.pages(c.gold_pages)),
                         facts=(c.q,))
        if st.status == "ok":
            c.rec["stale_reference"] = not st.value["supports_reference"]
            c.rec["stale_reason"] = st.value["reason"] or None
        c.ran(self.name, c.rec.get("stale_reference"))
