"""Generic grader: one three-way judge (correct / incorrect / not attempted) for any dataset.

For question sets that are not one of the three source benchmarks (your own questions, an
imported agent's log). The judge reads :data:`JUDGE_PROMPT` and ends its reply with
``verdict: correct``, ``verdict: incorrect`` or ``verdict: not_attempted``, parsed by
:func:`parse_verdict`. Only ``correct`` earns credit; ``not_attempted`` (a refusal, "I don't
know", an answer that stops short) is its own outcome and counts as a miss in accuracy. An
empty response is ``not_attempted`` with ``method="none"`` (no judge call).

A question is graded with it when its ``grader`` field says ``generic`` (``trek import`` and
the question-file loader set it for datasets without a grader of their own), or for every
question of a run with ``trek grade --grader generic``.

Template override: ``grader.generic.txt`` in the prompts folder (``TREK_PROMPTS`` or
``--prompts``). Fields: ``{question}``, ``{effective_year}`` (a year, a bound or ``not
given``), ``{answers}`` (the reference answers joined by `` | ``) and ``{response}``. The reply
must still end with a ``verdict:`` line. An override changes :func:`grader_version` to
``VERSION+override.<hash>``.
"""

from __future__ import annotations

from trek.graders.common import GRADER_EXPORTS, Judge, case_fields, register_grader
from trek.graders.verdict import Scheme, read_verdict
from trek.templates import register

__all__ = [*GRADER_EXPORTS, "parse_verdict"]

GRADER = "generic"
TEMPLATE = "grader.generic"
# Version history: generic-1 first release.
VERSION = "generic-1"

JUDGE_PROMPT = """\
You are grading one answer to a question. Reference answers are given; they are the truth \
for this task, even if you believe something newer is true.

Pick one of three grades:
- correct: the answer commits to a main claim that agrees with at least one reference answer \
(same meaning, a common alias, a harmless difference of form or units). Extra detail is fine \
as long as nothing in it contradicts the reference.
- incorrect: the answer commits to something that disagrees with every reference answer, \
lists several candidates without settling on the right one, or contradicts itself.
- not_attempted: the answer gives no claim to check: it declines, says it does not know, asks \
for more information, or stops before naming an answer, and says nothing that contradicts \
the reference.

Numbers must match the reference exactly unless the reference itself is approximate or a range.

Question: {question}
Effective year: {effective_year}
Reference answer(s), separated by " | ": {answers}
Answer to grade: {response}

Explain briefly if you need to, then end with exactly one line:
verdict: correct
or
verdict: incorrect
or
verdict: not_attempted"""
register(TEMPLATE, JUDGE_PROMPT)

#: How a generic verdict may be written (see :mod:`trek.graders.verdict`).
SCHEME = Scheme(
    labels={
        "correct": "correct",
        "incorrect": "incorrect",
        "wrong": "incorrect",
        "not attempted": "not_attempted",
    },
    prose=("correct", "incorrect"),
    json_true="correct",
    json_false="incorrect",
)


def parse_verdict(text: str | None) -> str | None:
    """``"correct"``, ``"incorrect"`` or ``"not_attempted"``: the judge's final verdict, else
    ``None``.

    Read by :func:`trek.graders.verdict.read_verdict`: the last verdict statement wins
    (``verdict: not_attempted``, ``{"verdict": "correct"}``, a closing ``**Incorrect**``). A
    negated label (``verdict: not correct``) is never a verdict; a reply without a verdict is
    unreadable.
    """
    return read_verdict(text, SCHEME)


REASK = (
    "I could not find the verdict in that reply. Please answer again with only one line: "
    "`verdict: correct`, `verdict: incorrect` or `verdict: not_attempted`."
)


JUDGE = Judge(
    GRADER,
    VERSION,
    template=lambda question: (TEMPLATE, JUDGE_PROMPT),
    fields=case_fields,
    parse=parse_verdict,
    reask=REASK,
    labels=("correct", "incorrect", "not_attempted"),
    outcome=str,
    empty="not_attempted",
)
grader_version, judge_prompt, agrade = register_grader(__name__, JUDGE)
