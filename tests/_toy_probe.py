"""A toy TrekTrace probe, declared through the public registration API only (one module): the
analysis judge says whether the system's wrong answer names a year. No label reads it."""

from __future__ import annotations

from trek.llm.structured import object_schema
from trek.templates import register
from trek.trace.common import REPLY_JSON, flag_and_reason
from trek.trace.parts import CaseRun, JudgeQuestion, TraceTest, trace_test

TEMPLATE = "trace.toy_names_year"
PROMPT = register(TEMPLATE, "[Toy probe: names a year]\nQuestion: {question}\nAnswer: {prediction}\n\n"
                  + REPLY_JSON + '{{"names_year": true or false, "reason": "short"}}')
NAMES_YEAR = JudgeQuestion("names_year", "analysis", TEMPLATE, PROMPT, "toy-prompt-1",
                           object_schema({"names_year": "boolean", "reason": "text"}),
                           lambda v: flag_and_reason(v, "names_year"))


@trace_test
class NamesYear(TraceTest):
    name = "names_year"
    version = "toy-1"
    needs = ("prediction",)
    questions = (NAMES_YEAR,)
    reads = "names_year: True when the wrong answer names a year"

    async def run(self, c: CaseRun) -> None:
        st = await c.ask(NAMES_YEAR, {"question": c.q.question, "prediction": c.case.prediction or "(no answer)"})
        c.ran(self.name, st.value.get("names_year") if st.status == "ok" else None)
