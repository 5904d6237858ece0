"""Answer-generation prompts, chosen per dataset as in paper appendix B.5, in our own words.

=============  ======================  ===============================================
dataset        template                what the model is told
=============  ======================  ===============================================
freshqa        ``answer.freshqa``      answer as of the question's reference year
sealqa         ``answer.sealqa``       the same text as FreshQA (SealQA-Hard)
infodeepseek   ``answer.infodeepseek`` the question as written, no year instruction
=============  ======================  ===============================================

The choice depends on the dataset only, never on whether a year happens to be present: an
InfoDeepSeek question is asked as written even if it carried a year, and a FreshQA or SealQA
question without a reference year is an error (its protocol needs one).

The reference year is phrased from the source's value. A plain year ``2024`` reads "in 2024",
relative words point at 2024 and a single moment is the end of 2024. A bound is phrased as a
bound, never pasted into "in {year}": ``before 2024`` reads "before 2024", relative words point at
the time just before 2024 and a single moment is the end of 2023; ``until 2024`` ends at the end
of 2024; ``after 2023`` / ``since 2023`` point at the period after (since) 2023.

Override fields (``TREK_PROMPTS`` folder): ``{question}`` in all three; the year templates also
get ``{year}`` (the source's value as written: ``2024`` or ``before 2024``), ``{period}``
(``in 2024``, ``before 2024``...), ``{reference}`` (what relative words point at) and ``{moment}``
(the single point in time to use), so the paper's own wording can be dropped in with ``{year}``.
"""

from __future__ import annotations

import re

from trek.templates import register, render, template_version
from trek.types import Question

__all__ = [
    "VERSION",
    "ANSWER_AS_OF_YEAR",
    "ANSWER_AS_WRITTEN",
    "DATASET_TEMPLATES",
    "answer_prompt",
    "answer_prompt_version",
    "year_fields",
    "year_text",
]

VERSION = "answer-2"

ANSWER_AS_OF_YEAR = """\
Reply with the final answer only, no explanation.
Give the answer that held {period}. Read every relative time word in the question \
("current", "currently", "now", "today", "this year", "last year", "recent", "latest", \
"most recent") as pointing at {reference}; where a single moment is needed, take {moment}.

Question: {question}
Answer:"""

ANSWER_AS_WRITTEN = """\
Reply with the final answer only, no explanation.

Question: {question}
Answer:"""

#: dataset -> (template name, built-in text)
DATASET_TEMPLATES: dict[str, tuple[str, str]] = {
    "freshqa": ("answer.freshqa", register("answer.freshqa", ANSWER_AS_OF_YEAR, ("year",))),
    "sealqa": ("answer.sealqa", register("answer.sealqa", ANSWER_AS_OF_YEAR, ("year",))),
    "infodeepseek": ("answer.infodeepseek", register("answer.infodeepseek", ANSWER_AS_WRITTEN)),
}

_BOUND = re.compile(r"^\s*(before|until|after|since)\s+(\d{4})\s*$", re.IGNORECASE)


def _template_for(q: Question) -> tuple[str, str]:
    try:
        return DATASET_TEMPLATES[q.dataset]
    except KeyError:
        raise ValueError(
            f"question {q.id!r}: no answer prompt for dataset {q.dataset!r} "
            f"(answer prompts exist for {', '.join(sorted(DATASET_TEMPLATES))})"
        ) from None


def year_text(q: Question) -> str:
    """The effective year as written by the source: ``2024``, or a bound such as ``before 2022``."""
    if q.effective_year is not None:
        return str(q.effective_year)
    return q.effective_year_raw or ""


def year_fields(q: Question) -> dict[str, str]:
    """``year``, ``period``, ``reference`` and ``moment`` for ``q``'s reference year.

    Raises ``ValueError`` when the question has no usable reference year.
    """
    if q.effective_year is not None:
        y = q.effective_year
        return {"year": str(y), "period": f"in {y}", "reference": str(y), "moment": f"the end of {y}"}
    raw = (q.effective_year_raw or "").strip()
    m = _BOUND.match(raw)
    if m:
        word, y = m.group(1).lower(), int(m.group(2))
        if word == "before":
            return {
                "year": raw,
                "period": f"before {y}",
                "reference": f"the time just before {y}",
                "moment": f"the end of {y - 1}",
            }
        if word == "until":
            return {
                "year": raw,
                "period": f"up to the end of {y}",
                "reference": str(y),
                "moment": f"the end of {y}",
            }
        return {
            "year": raw,
            "period": f"{word} {y}",
            "reference": f"the period {word} {y}",
            "moment": f"the latest point {word} {y} that the evidence covers",
        }
    what = f"an unreadable reference year {raw!r}" if raw else "no reference year"
    raise ValueError(
        f"question {q.id!r} ({q.dataset}) has {what}; its answer prompt (paper B.5) needs one"
    )


def answer_prompt(q: Question) -> str:
    """The user message asking for ``q``'s bare final answer, per ``q.dataset``'s protocol."""
    name, default = _template_for(q)
    if name == "answer.infodeepseek":
        return render(name, default, question=q.question)
    return render(name, default, question=q.question, **year_fields(q))


def answer_prompt_version(q: Question) -> str:
    """``VERSION``, plus ``+override.<hash>`` when ``q``'s template is overridden."""
    name, default = _template_for(q)
    return template_version(name, default, VERSION)
