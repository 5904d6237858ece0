"""Answer-generation prompts, one per dataset protocol (paper appendix B.5), in our own words.

FreshQA and SealQA questions are answered *as of* their effective year, with relative time
words read against that year; InfoDeepSeek questions are answered as written.
"""

from __future__ import annotations

from trek.templates import render, template_version
from trek.types import Question

__all__ = ["VERSION", "ANSWER_AS_OF_YEAR", "ANSWER_AS_WRITTEN", "answer_prompt", "answer_prompt_version"]

VERSION = "answer-1"

ANSWER_AS_OF_YEAR = """\
Reply with the final answer only, no explanation.
Give the answer that was true in {year}. Read every relative time word in the question \
("current", "currently", "now", "today", "this year", "last year", "recent", "latest", \
"most recent") as pointing at {year}; where a single moment is needed, take the end of {year}.

Question: {question}
Answer:"""

ANSWER_AS_WRITTEN = """\
Reply with the final answer only, no explanation.

Question: {question}
Answer:"""


def _name_and_default(q: Question) -> tuple[str, str]:
    if q.effective_year is None and q.effective_year_raw is None:
        return "answer.as_written", ANSWER_AS_WRITTEN
    return "answer.as_of_year", ANSWER_AS_OF_YEAR


def year_text(q: Question) -> str:
    """The effective year as shown to a model: ``2024``, or the source's bound (``before 2022``)."""
    if q.effective_year is not None:
        return str(q.effective_year)
    return q.effective_year_raw or ""


def answer_prompt(q: Question) -> str:
    """The user message asking ``q``'s model for a bare final answer."""
    name, default = _name_and_default(q)
    if default is ANSWER_AS_WRITTEN:
        return render(name, default, question=q.question)
    return render(name, default, question=q.question, year=year_text(q))


def answer_prompt_version(q: Question) -> str:
    name, default = _name_and_default(q)
    return template_version(name, default, VERSION)
