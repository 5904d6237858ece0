"""FreshQA grader: a deterministic match first, then an LLM judge for what is left.

1. The response is normalized (:func:`normalize_answer`: letter case, whitespace, punctuation
   and articles only) and compared with every acceptable answer normalized the same way. A
   match is graded ``correct`` with ``method="exact"`` and no judge call. A mismatch is never
   graded by this step: it goes to the judge, and so does every difference of units, number
   format or spelling (``12 miles`` vs ``12``, ``iOS 17.1`` vs ``iOS 17.10``).
2. The judge reads :data:`JUDGE_PROMPT` and must end its reply with ``evaluation: correct`` or
   ``evaluation: incorrect`` (parsed by :func:`parse_evaluation`).

An empty response is ``incorrect`` with ``method="none"`` (no judge call).

Template override: put ``grader.freshqa.txt`` in the prompts folder (``TREK_PROMPTS`` or
``--prompts``). Fields available: ``{question}``, ``{effective_year}`` (a year, a bound such
as ``before 2022``, or ``not given``), ``{answers}`` (the acceptable answers joined by
`` | ``) and ``{response}``. The reply must still end with an ``evaluation:`` line. An override
changes :func:`grader_version` to ``VERSION+override.<hash>``.
"""

from __future__ import annotations

import re
import unicodedata

from trek.graders.common import GRADER_EXPORTS, Judge, case_fields, register_grader
from trek.graders.verdict import Scheme, read_verdict
from trek.templates import register

__all__ = [*GRADER_EXPORTS, "parse_evaluation", "normalize_answer", "exact_match"]

GRADER = "freshqa"
TEMPLATE = "grader.freshqa"
# Version history: freshqa-1 first release; freshqa-2 reads the final verdict
# (trek.graders.verdict), exact match normalizes only case/whitespace/punctuation/articles,
# and no temperature is sent unless asked for.
VERSION = "freshqa-2"

JUDGE_PROMPT = """\
You are checking one response to a question against the answers a benchmark accepts for it. \
Decide whether the response is right with respect to at least one of the accepted answers.

How to decide:
- Judge the main answer the response commits to. Its wording, layout and any cited sources \
do not matter.
- The response is right when it means the same as an accepted answer, names it by a common \
alias or abbreviation, or necessarily implies it.
- Articles, punctuation, harmless units and source citations at the end make no difference.
- A number must equal the accepted value exactly, unless the accepted answer is itself \
approximate or a range. Then a compatible value is right, but a value that breaks a stated \
bound is wrong.
- Additional details make the response wrong only when they contradict the main answer or \
change what it says. A citation on its own is never a reason to reject a right answer.
- The accepted answers below are the truth for this task. Do not replace them with facts you \
believe to be more recent.

Question: {question}
Effective year: {effective_year}
Accepted answer(s), separated by " | ": {answers}
Response: {response}

End your reply with exactly one line, either
evaluation: correct
or
evaluation: incorrect"""

register(TEMPLATE, JUDGE_PROMPT)

#: How a FreshQA verdict may be written (see :mod:`trek.graders.verdict`).
SCHEME = Scheme(
    labels={"correct": "correct", "incorrect": "incorrect", "wrong": "incorrect"},
    prose=("correct", "incorrect"),
    json_true="correct",
    json_false="incorrect",
)


def parse_evaluation(text: str | None) -> str | None:
    """``"correct"``/``"incorrect"``: the judge's final verdict, else ``None``.

    Read by :func:`trek.graders.verdict.read_verdict`: the last verdict statement wins
    (``evaluation: correct``, ``Verdict: incorrect``, ``{"evaluation": "correct"}``, a line
    that is only ``**Correct**``, or a closing ``so the response is incorrect``), whatever the
    reasoning before it mentions. A negated label (``evaluation: not correct``) is never a
    verdict; a later mention of the other label in the prose (a change of mind after the verdict
    line) makes the reply unreadable, as does a reply with no verdict at all.
    """
    return read_verdict(text, SCHEME)


REASK = (
    "I could not find the verdict in that reply. Please answer again with only one line: "
    "either `evaluation: correct` or `evaluation: incorrect`."
)

# -- deterministic match --------------------------------------------------------------------
#
# Only differences of letter case, whitespace, punctuation and articles are removed. Units,
# currency signs, trailing zeros, accents and citation marks are left as they are, so
# "iOS 17.1" / "iOS 17.10", "12 miles" / "12" and "$1,000" / "1000" go to the judge, which
# decides whether the difference matters.

# Punctuation that carries meaning and is kept as a token of its own.
_KEPT_PUNCTUATION = set("%\u2030\u2031#&@/")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
# An article is dropped only when whitespace and a word follow it, so "Vitamin A" keeps its
# letter and the initial in "A. Lovelace" stays.
_ARTICLES = re.compile(r"(?<![\w'\u2019])(?:a|an|the)\s+(?=\w)")


def _is_punctuation(ch: str) -> bool:
    return unicodedata.category(ch).startswith("P") and ch not in _KEPT_PUNCTUATION


def normalize_answer(text: str | None) -> str:
    """A canonical form for the deterministic match: case, whitespace, punctuation, articles.

    Unicode-composed (NFC) and case-folded; invisible format characters dropped; articles
    (a, an, the) in front of a word removed; thousands separators between digit groups dropped
    (``1,234`` -> ``1234``); apostrophes removed (``O'Brien`` -> ``obrien``); any other
    punctuation turned into a space, except punctuation between two digits (``17.1``, ``3:45``,
    ``1-2``), a minus sign in front of a number, and ``% # & @ /``, which carry meaning. Symbols
    (``$``, ``°``, ``+``) and kept punctuation stand as tokens of their own, so ``42%`` and
    ``42 %`` agree; whitespace is collapsed. Nothing else changes: no unit, zero or accent is
    dropped.
    """
    t = unicodedata.normalize("NFC", text or "").casefold().replace("\u2212", "-")
    t = "".join(ch for ch in t if unicodedata.category(ch) != "Cf")
    t = " ".join(t.split())
    t = _ARTICLES.sub("", t)
    t = _THOUSANDS.sub("", t)
    t = re.sub(r"['\u2019\u02bc`]", "", t)
    out: list[str] = []
    for i, ch in enumerate(t):
        prev = t[i - 1] if i else ""
        nxt = t[i + 1] if i + 1 < len(t) else ""
        if _is_punctuation(ch):
            if prev.isdigit() and nxt.isdigit():
                out.append(ch)  # decimal point, time, score or range between digits
            elif ch == "-" and nxt.isdigit() and not (prev.isalnum() or prev == "_"):
                out.append(" -")  # a minus sign
            else:
                out.append(" ")
        elif not ch.isalnum() and not ch.isspace():
            out.append(f" {ch} ")  # a symbol or kept punctuation: a token of its own
        else:
            out.append(ch)
    return " ".join("".join(out).split())


def exact_match(response: str | None, answers: list[str]) -> bool:
    """True when the normalized response equals a normalized acceptable answer.

    See :func:`normalize_answer` for what is normalized. Anything else, units and number
    formats included, is left for the judge.
    """
    r = normalize_answer(response)
    if not r:
        return False
    return any(r == normalize_answer(a) for a in answers)


# -- grading --------------------------------------------------------------------------------


JUDGE = Judge(
    GRADER,
    VERSION,
    template=lambda question: (TEMPLATE, JUDGE_PROMPT),
    fields=case_fields,
    parse=parse_evaluation,
    reask=REASK,
    labels=("correct", "incorrect"),
    outcome=str,
    exact=lambda q, response: exact_match(response, q.answers),
)
grader_version, judge_prompt, agrade = register_grader(__name__, JUDGE)
