"""SealQA grader: a three-way judge (CORRECT / INCORRECT / NOT_ATTEMPTED) answered as a letter.

The judge reads :data:`JUDGE_PROMPT` and replies ``A`` (correct), ``B`` (incorrect) or ``C``
(not attempted), parsed by :func:`parse_letter`. Only ``A`` earns credit: ``B`` becomes the
outcome ``incorrect`` and ``C`` the outcome ``not_attempted``, which counts as a miss in
accuracy. A hedged answer that contains the gold target and nothing contradicting it is
correct; an answer that contradicts itself is incorrect. An empty response is
``not_attempted`` with ``method="none"`` (no judge call).

Template override: ``grader.sealqa.txt`` in the prompts folder (``TREK_PROMPTS`` or
``--prompts``). Fields available: ``{question}``, ``{target}`` (the gold answers joined by
`` | ``) and ``{predicted_answer}`` (the response), the field names of the source benchmark's
judge. The reply must still be one of the letters A/B/C. An override changes
:func:`grader_version` to ``VERSION+override.<hash>``.
"""

from __future__ import annotations

from trek.graders.common import GRADER_EXPORTS, Judge, join_answers, register_grader
from trek.graders.verdict import Scheme, read_verdict
from trek.templates import register

__all__ = [*GRADER_EXPORTS, "OUTCOME_BY_LETTER", "parse_letter"]

GRADER = "sealqa"
TEMPLATE = "grader.sealqa"
# Version history: sealqa-1 first release; sealqa-2 reads the final grade
# (trek.graders.verdict: no letters read from sentences, negation is no grade) and sends no
# temperature unless asked.
VERSION = "sealqa-2"

JUDGE_PROMPT = """\
Your task is to grade a predicted answer to a question against the question's gold target. \
Give one of three grades: CORRECT, INCORRECT or NOT_ATTEMPTED.

CORRECT means the prediction contains the essential content of the gold target and states \
nothing that contradicts it. Only meaning counts: letter case, punctuation, grammar and word \
order do not. Hedging or guessing is acceptable as long as the whole gold target is there and \
nothing stated is wrong.

INCORRECT means some factual claim in the prediction contradicts the gold target, even when \
the claim is hedged ("maybe", "I believe", "possibly"). Offering several alternatives of which \
only one is right is INCORRECT. A prediction that contradicts itself anywhere is INCORRECT, \
even if one of its statements matches the gold target.

NOT_ATTEMPTED means the essential content of the gold target is missing and nothing in the \
prediction contradicts it: a refusal, a request for more context, or partial knowledge that \
stops short of the answer.

More points:
- The gold target may hold more than the question asks for. The prediction only needs what \
the question asks for.
- Do not penalize a prediction for leaving out what the question itself makes obvious.
- When several gold targets are listed, separated by " | ", matching any one of them is enough.

Examples.
Question: Which two metals are combined to make bronze?
Gold target: copper and tin
- "Tin and copper." -> CORRECT
- "I think it is copper plus tin, though I would want to double-check." -> CORRECT
- "Bronze is mostly copper, roughly 88 percent, with tin making up the rest." -> CORRECT
- "Copper." -> INCORRECT (an incomplete answer presented as complete)
- "Copper and zinc." -> INCORRECT
- "Either copper and tin, or copper and zinc." -> INCORRECT
- "I'm not sure." -> NOT_ATTEMPTED
- "One of them is copper, but I can't recall the other." -> NOT_ATTEMPTED

Question: In which city does the Danish parliament sit?
Gold target: Copenhagen, Denmark
- "Copenhagen" -> CORRECT (the country is implied by the question)

Question: How many moons does Mars have?
Gold target: 2
- "Mars has 2 moons: Phobos, Deimos and Titan." -> INCORRECT (the count and the list disagree)
- "Two, although later in the same answer: three." -> INCORRECT

Now grade this one.
Question: {question}
Gold target: {target}
Predicted answer: {predicted_answer}

Reply with a single letter and nothing else:
A = CORRECT
B = INCORRECT
C = NOT_ATTEMPTED"""

register(TEMPLATE, JUDGE_PROMPT)

OUTCOME_BY_LETTER = {"A": "correct", "B": "incorrect", "C": "not_attempted"}

#: How a SealQA grade may be written: the letters, or the grade names they stand for.
SCHEME = Scheme(
    labels={"correct": "A", "incorrect": "B", "not attempted": "C"},
    letters={"A": "A", "B": "B", "C": "C"},
    prose=("CORRECT", "INCORRECT", "NOT ATTEMPTED"),
    prose_case_sensitive=True,
)


def parse_letter(text: str | None) -> str | None:
    """``"A"``, ``"B"`` or ``"C"``: the judge's final grade, else ``None``.

    Read by :func:`trek.graders.verdict.read_verdict`. A letter counts only where it stands as
    the grade: alone (``a.``, ``**A**``, ``(B)``), after a verdict key (``grade: c``,
    ``Final answer: B``, ``the grade is B``), beside its name (``A: CORRECT``, ``B (INCORRECT)``)
    or in ``{"grade": "A"}``/``\\boxed{A}``. A capital letter opening a sentence ("A refusal to
    answer.") is not a grade. The names ``CORRECT``, ``INCORRECT`` and ``NOT_ATTEMPTED`` (any
    spelling of the underscore, any case) are read where a verdict stands; a letter and a name
    that disagree (``A: INCORRECT``) are unreadable. ``This is not CORRECT`` is no grade (it could
    be B or C). The last grade wins; a later capitalised grade name that disagrees with it, or an
    echo of the whole scale, gives ``None``.
    """
    return read_verdict(text, SCHEME)


REASK = (
    "I could not read a grade in that reply. Please answer again with one letter only: "
    "A (correct), B (incorrect) or C (not attempted)."
)


JUDGE = Judge(
    GRADER,
    VERSION,
    template=lambda question: (TEMPLATE, JUDGE_PROMPT),
    fields=lambda q, response: {
        "question": q.question, "target": join_answers(q.answers), "predicted_answer": response,
    },
    parse=parse_letter,
    reask=REASK,
    labels=("A", "B", "C"),
    outcome=OUTCOME_BY_LETTER.__getitem__,
    empty="not_attempted",
)
grader_version, judge_prompt, agrade = register_grader(__name__, JUDGE)
