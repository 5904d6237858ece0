"""InfoDeepSeek grader: a Yes/No judge with a separate template for false-premise questions.

The template is chosen from the question's annotation, not by asking a model: questions whose
``false_premise`` field is true use :data:`FALSE_PREMISE_PROMPT`, which asks whether the
candidate points out (or corrects) the same false premise as the reference and, when the
reference also answers the question, gives that answer too; every other question uses
:data:`JUDGE_PROMPT`. Both are read by :func:`parse_yes_no`: ``Yes`` is ``correct``, ``No``
is ``incorrect``. An empty response is ``incorrect`` with ``method="none"`` (no judge call).

Template overrides (``TREK_PROMPTS`` or ``--prompts`` folder):
``grader.infodeepseek.txt`` and ``grader.infodeepseek_false_premise.txt``. Fields available in
both: ``{query}`` (the question), ``{reference_answer}`` (the acceptable answers joined by
`` | ``) and ``{candidate_answer}`` (the response). These are the field names of the source
benchmark's judge, so its original wording can be dropped in unchanged. An override changes
the version of the grades made with that template to ``VERSION+override.<hash>``.
"""

from __future__ import annotations

from trek.graders.common import GRADER_EXPORTS, Judge, join_answers, register_grader
from trek.graders.verdict import Scheme, read_verdict
from trek.templates import register
from trek.types import Question

__all__ = [*GRADER_EXPORTS, "FALSE_PREMISE_TEMPLATE", "FALSE_PREMISE_PROMPT", "parse_yes_no", "template_for"]

GRADER = "infodeepseek"
TEMPLATE = "grader.infodeepseek"
FALSE_PREMISE_TEMPLATE = "grader.infodeepseek_false_premise"
# Version history: infodeepseek-1 first release; infodeepseek-2 reads the final verdict
# (trek.graders.verdict, with Correct/True/Y synonyms) and sends no temperature unless asked.
VERSION = "infodeepseek-2"

JUDGE_PROMPT = """\
You will see a question, its reference answer and a candidate answer. Decide whether the \
candidate answers the question correctly.

Rules:
1. The candidate must agree with the reference on the substance, including times, places, \
people and quantities. It may add further detail.
2. When the reference names several items (facts, events or people), the candidate must give \
all of them.
3. The question rests on a sound premise and asks about a person or event that exists and is \
unique. A candidate that disputes the premise, or says it cannot tell whether the person or \
event exists, is wrong.
4. The question has a definite answer and the reference is right. A candidate that gives no \
answer and only says more information would have to be looked up is wrong.

Question: {query}
Reference answer: {reference_answer}
Candidate answer: {candidate_answer}

Is the candidate answer correct? Reply with Yes or No only."""

FALSE_PREMISE_PROMPT = """\
You will see a question, its reference answer and a candidate answer. The question is built \
on a mistaken assumption, and the reference answer exposes that mistake. Decide whether the \
candidate handles the question correctly.

Rules:
1. The candidate must point out or correct the mistaken assumption. A candidate that goes \
along with it is wrong.
2. The mistake the candidate identifies must be the one the reference identifies: the same \
time, place, event, person and meaning. Naming some other problem is wrong.
3. When the reference, besides exposing the mistake, still answers the question, the candidate \
must answer it as well, consistently with the reference in time, place, person and quantity. \
A missing or inconsistent answer is wrong.

Question: {query}
Reference answer: {reference_answer}
Candidate answer: {candidate_answer}

Is the candidate answer correct? Reply with Yes or No only."""

register(TEMPLATE, JUDGE_PROMPT)
register(FALSE_PREMISE_TEMPLATE, FALSE_PREMISE_PROMPT)

#: How a Yes/No verdict may be written: ``Yes``/``No`` and their clear synonyms.
SCHEME = Scheme(
    labels={
        "yes": "yes", "y": "yes", "correct": "yes", "true": "yes",
        "no": "no", "n": "no", "incorrect": "no", "false": "no", "wrong": "no",
    },
    json_true="yes",
    json_false="no",
)


def parse_yes_no(text: str | None) -> str | None:
    """``"yes"``/``"no"``: the judge's final verdict, else ``None``.

    Read by :func:`trek.graders.verdict.read_verdict`. ``Correct``/``True``/``Y`` count as
    Yes and ``Incorrect``/``False``/``Wrong``/``N`` as No when they stand as the verdict (a
    sentence of their own, ``Answer: Yes``, ``No, the candidate ...``, ``{"answer": "yes"}``,
    ``the candidate answer is correct``). Yes and no inside running prose ("there is no
    contradiction") are not verdicts. The last verdict wins; a negated one (``Not yes.``) is
    never a verdict; a reply with no verdict gives ``None``.
    """
    return read_verdict(text, SCHEME)


REASK = "I could not read a verdict in that reply. Please answer again with a single word: Yes or No."


def template_for(question: Question) -> tuple[str, str]:
    """``(template name, built-in text)`` for ``question``, routed by its false-premise flag."""
    if question.false_premise:
        return FALSE_PREMISE_TEMPLATE, FALSE_PREMISE_PROMPT
    return TEMPLATE, JUDGE_PROMPT


JUDGE = Judge(
    GRADER,
    VERSION,
    template=template_for,
    fields=lambda q, response: {
        "query": q.question, "reference_answer": join_answers(q.answers), "candidate_answer": response,
    },
    parse=parse_yes_no,
    reask=REASK,
    labels=("Yes", "No"),
    outcome=lambda v: "correct" if v == "yes" else "incorrect",
)
grader_version, judge_prompt, agrade = register_grader(__name__, JUDGE)
