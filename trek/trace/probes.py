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
from trek.trace.common import REPLY_JSON, as_text, as_urls

__all__ = ["VERSION", "GOLD_ONLY_TEMPLATE", "NOISE_TEMPLATE", "GOLD_ONLY_PROMPT", "NOISE_PROMPT", "SCHEMA", "USED_URLS_MAX",
           "validate"]

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
