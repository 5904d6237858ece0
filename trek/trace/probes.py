"""Post-retrieval counterfactuals (paper appendix C.3): the evaluated model answers again.

* Gold-only (template ``trace.gold_only``): the question, its effective year and the gold pages
  only, to be treated as the authoritative context.
* Gold-plus-noise (template ``trace.gold_plus_noise``): the question, its effective year and the
  original retrieved collection followed by the gold pages not already in it, without saying
  which page is which. Run only when the gold-only answer was graded correct.

Neither prompt contains the reference answers. Both resolve relative time words against the
effective year, like the benchmark's own answer prompts. Pages are given as text from the page
store (head-truncated, placeholders for unavailable pages). The reply is JSON read by
:func:`validate`; its answer is then graded by the analysis judge (:mod:`trek.trace.verdict`).
"""

from __future__ import annotations

from typing import Any

from trek.llm.structured import TEXT_MAX, object_schema
from trek.templates import register
from trek.trace.common import REPLY_JSON, as_text, as_urls, fetch_pages
from trek.trace.inputs import noise_context
from trek.trace.parts import (
    GOLD_UNAVAILABLE,
    NO_GOLD_PAGE,
    PROBE_UNREADABLE,
    UNREADABLE,
    CaseRun,
    JudgeQuestion,
    TraceTest,
    trace_test,
)
from trek.trace.verdict import VERDICT

__all__ = ["VERSION", "GOLD_ONLY_TEMPLATE", "NOISE_TEMPLATE", "GOLD_ONLY_PROMPT", "NOISE_PROMPT", "SCHEMA", "USED_URLS_MAX",
           "validate", "GOLD_ONLY", "NOISE", "probe", "GoldOnlyProbe", "NoiseProbe"]

VERSION = "trace-probes-2"  # 2: the reply schema bounds used_urls
GOLD_ONLY_TEMPLATE = "trace.gold_only"
NOISE_TEMPLATE = "trace.gold_plus_noise"

_CASE_AND_PAGES = "Question: {question}\nEffective year: {effective_year}\n\nPages:\n{pages}\n\n"

_TIME_RULES = """\
Read relative time words against the effective year: "last year" is the effective year itself; \
"current", "currently", "now", "this year", "latest", "most recent" and "to date" mean as of the \
end of the effective year. Without an effective year, read the question as written."""

GOLD_ONLY_PROMPT = """\
[TrekTrace: gold-only probe]
Answer the question using only the pages below. They are the authoritative source for this \
question: rely on them, not on anything you remember and not on other sources. Read every \
relevant page and do whatever the question needs (pick the right entity, combine facts across \
pages, filter, count, compute dates, compare) to reach one concrete answer.
""" + _TIME_RULES + """

""" + _CASE_AND_PAGES + REPLY_JSON + """{{"answer": "your concrete answer", "used_urls": ["URL(s) of the pages the answer rests on"], \
"reasoning": "one or two sentences naming the supporting fact"}}"""

NOISE_PROMPT = """\
[TrekTrace: gold-plus-noise probe]
Answer the question using only the pages below; they are all the context you may use. Some may \
be relevant and current, others irrelevant, outdated or contradicting each other: decide which \
evidence is valid for the question and its time, and answer from that. Do not use anything you \
remember or any source not listed.
""" + _TIME_RULES + """

""" + _CASE_AND_PAGES + REPLY_JSON + """{{"answer": "your concrete answer", "used_urls": ["URL(s) of the pages the answer rests on"], \
"reasoning": "one or two sentences naming the decisive evidence"}}"""


register(GOLD_ONLY_TEMPLATE, GOLD_ONLY_PROMPT)
register(NOISE_TEMPLATE, NOISE_PROMPT)

#: At most this many URLs in a probe reply. The list is bounded so that a model whose reply is
#: constrained to the schema closes its JSON within its token limit: SmolLM2-135M otherwise lists
#: sentences as "URLs" until its tokens run out, and the probe is lost.
USED_URLS_MAX = 3
#: The reply shape of both probes, sent to endpoints that enforce schemas.
SCHEMA = object_schema({"answer": "text",
                        "used_urls": {"type": "array", "items": {"type": "string", "maxLength": TEXT_MAX},
                                      "maxItems": USED_URLS_MAX},
                        "reasoning": "text"})


def validate(value: dict[str, Any]) -> dict[str, Any]:
    return {
        "answer": as_text(value.get("answer"), "answer", required=True),
        "used_urls": as_urls(value.get("used_urls"), "used_urls"),
        "reasoning": as_text(value.get("reasoning"), "reasoning"),
    }


GOLD_ONLY = JudgeQuestion("gold_only", "evaluated", GOLD_ONLY_TEMPLATE, GOLD_ONLY_PROMPT, VERSION, SCHEMA, validate)
NOISE = JudgeQuestion("noise", "evaluated", NOISE_TEMPLATE, NOISE_PROMPT, VERSION, SCHEMA, validate)


async def probe(c: CaseRun, question: JudgeQuestion, pages: list[Any]) -> tuple[bool | None, str]:
    """Ask the evaluated model ``question`` from ``pages`` (no reference answers), then have the
    analysis judge grade its answer (step ``<name>_grade``). Returns the grade (``None`` when a
    reply stayed unreadable) and what was unreadable. Writes ``<name>_answer``, ``_reasoning`` and
    ``_grade_reason`` into the record."""
    q, prefix = c.q, question.name
    step = await c.ask(question, {"question": q.question, "effective_year": c.year, "pages": c.pages(pages)})
    if step.status != "ok":
        return None, PROBE_UNREADABLE
    c.rec[f"{prefix}_answer"] = step.value["answer"]
    c.rec[f"{prefix}_reasoning"] = step.value["reasoning"] or None
    check = await c.ask(VERDICT, c.judge_fields(candidate=step.value["answer"]), name=f"{prefix}_grade",
                        facts=(q, step.value["answer"]))
    if check.status != "ok":
        return None, UNREADABLE
    c.rec[f"{prefix}_grade_reason"] = check.value["reason"] or None
    return bool(check.value["correct"]), UNREADABLE


@trace_test
class GoldOnlyProbe(TraceTest):
    """C.3: the evaluated model answers from the gold pages alone."""

    name = "gold_only"
    version = "gold-only-1"
    needs = ("gold_pages",)
    questions = (GOLD_ONLY, VERDICT)
    reads = "gold_only_correct: True when the answer from the gold pages alone is graded right"

    async def run(self, c: CaseRun) -> None:
        c.rec["gold_only_context"] = list(c.q.gold_urls)
        g: bool | None = None
        if c.rec["gold_pages_available"]:
            g, why = await probe(c, GOLD_ONLY, c.gold_pages)
            c.ran(self.name, g, why)
        else:
            c.rec["gold_only_grade_reason"] = GOLD_UNAVAILABLE
            c.skip(self.name, NO_GOLD_PAGE)
        c.rec["gold_only_correct"] = g


@trace_test
class NoiseProbe(TraceTest):
    """C.3: the evaluated model answers from its retrieved collection followed by the missing gold
    pages (the schedule runs it only after a right gold-only answer)."""

    name = "noise"
    version = "noise-1"
    needs = ("collection", "gold_urls")
    questions = (NOISE, VERDICT)
    reads = "noise_correct: True when the answer from the retrieved pages plus the gold pages is graded right"

    async def run(self, c: CaseRun) -> None:
        q, rec = c.q, c.rec
        ctx = noise_context(c.case.collection, q.gold_urls,
                            equivalent=c.values.get("retrieval") is True and rec.get("retrieval_basis") == "evidence-match")
        rec["noise_context"] = ctx
        rec["noise_was_run"] = True
        n, why = await probe(c, NOISE, await fetch_pages(c.config.store, ctx))
        rec["noise_correct"] = c.ran(self.name, n, why)
