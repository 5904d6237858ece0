"""FreshQA grader: a deterministic match first, then an LLM judge for what is left.

1. The response is normalized (:func:`normalize_answer`) and compared with every acceptable
   answer normalized the same way. A match is graded ``correct`` with ``method="exact"`` and no
   judge call. A mismatch is never graded by this step: it goes to the judge.
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

from trek.answer_prompts import year_text
from trek.graders.common import (
    JudgeConfig,
    ask_judge,
    is_empty_response,
    join_answers,
    make_grade,
)
from trek.graders.verdict import Scheme, read_verdict
from trek.llm.client import LLMClient
from trek.templates import render, template_version
from trek.types import Grade, Question

__all__ = [
    "GRADER",
    "TEMPLATE",
    "VERSION",
    "JUDGE_PROMPT",
    "REASK",
    "SCHEME",
    "parse_evaluation",
    "normalize_answer",
    "exact_match",
    "grader_version",
    "judge_prompt",
    "agrade",
]

GRADER = "freshqa"
TEMPLATE = "grader.freshqa"
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

_CITATION = re.compile(r"\[\s*\d+(?:\s*[,\u2013-]\s*\d+)*\s*\]")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_DECIMAL_ZEROS = re.compile(r"(\d+)\.(\d*?)0+(?!\d)")
# An article is dropped only when a word follows it, so "Vitamin A" keeps its letter.
_ARTICLES = re.compile(r"\b(?:a|an|the)\s+(?=\S)")
_CURRENCY = "$\u20ac\u00a3\u00a5\u20b9\u20a9\u20bd"

# Harmless units and currency markers, each alias mapped to one canonical name. A quantity
# written with one of these matches the same number written with the same unit or without one.
_UNIT_GROUPS = {
    "usd": ("$", "usd", "dollar", "dollars", "us dollars"),
    "eur": ("\u20ac", "eur", "euro", "euros"),
    "gbp": ("\u00a3", "gbp"),
    "jpy": ("\u00a5", "jpy", "yen"),
    "cny": ("cny", "rmb", "yuan"),
    "inr": ("\u20b9", "inr", "rupee", "rupees"),
    "krw": ("\u20a9", "krw"),
    "rub": ("\u20bd", "rub", "rouble", "roubles", "ruble", "rubles"),
    "percent": ("%", "percent", "per cent", "pct"),
    "km": ("km", "kilometer", "kilometers", "kilometre", "kilometres"),
    "m": ("m", "meter", "meters", "metre", "metres"),
    "cm": ("cm", "centimeter", "centimeters", "centimetre", "centimetres"),
    "mm": ("mm", "millimeter", "millimeters", "millimetre", "millimetres"),
    "mile": ("mi", "mile", "miles"),
    "ft": ("ft", "foot", "feet"),
    "inch": ("inch", "inches"),
    "kg": ("kg", "kilogram", "kilograms"),
    "g": ("g", "gram", "grams"),
    "lb": ("lb", "lbs", "pound", "pounds"),
    "tonne": ("ton", "tons", "tonne", "tonnes"),
    "year": ("year", "years", "yr", "yrs"),
    "day": ("day", "days"),
    "hour": ("hour", "hours", "hr", "hrs"),
    "minute": ("minute", "minutes", "min", "mins"),
    "second": ("second", "seconds", "sec", "secs"),
    "degree": ("\u00b0", "degree", "degrees"),
    "celsius": ("\u00b0c", "celsius", "degrees celsius", "degree celsius"),
    "fahrenheit": ("\u00b0f", "fahrenheit", "degrees fahrenheit", "degree fahrenheit"),
}
_UNIT_CANON = {alias: canon for canon, aliases in _UNIT_GROUPS.items() for alias in aliases}
_QUANTITY = re.compile(
    rf"^([{re.escape(_CURRENCY)}])?\s*(-?\d+(?:\.\d+)?)\s*"
    rf"([{re.escape(_CURRENCY)}%]|\u00b0\s*[cf]?|[a-z]+(?: [a-z]+)?)?$"
)


def _fold(text: str) -> str:
    text = unicodedata.normalize("NFKD", text)
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    return unicodedata.normalize("NFKC", text).lower()


def normalize_answer(text: str | None) -> str:
    """A canonical form for the deterministic match.

    Lowercased and accent-folded; bracketed citation marks (``[1]``) removed; thousands
    separators dropped (``1,234`` -> ``1234``) and trailing decimal zeros trimmed
    (``3.50`` -> ``3.5``); apostrophes removed; other punctuation turned into spaces, except a
    decimal point between digits, a minus sign in front of a number, and the ``%``, ``°`` and
    currency signs that :func:`exact_match` reads as units; articles (a, an, the) in front of a word removed;
    whitespace collapsed.
    """
    t = _fold(text or "")
    t = _CITATION.sub(" ", t)
    t = _THOUSANDS.sub("", t)
    t = re.sub(r"['\u2019`]", "", t)
    t = re.sub(r"(?<!\d)\.|\.(?!\d)", " ", t)  # a decimal point survives only between digits
    t = re.sub(rf"[^\w\s.%\u00b0\-{re.escape(_CURRENCY)}]", " ", t)
    t = re.sub(r"(?<=\w)-|-(?!\d)", " ", t)  # hyphens become spaces, a leading minus stays
    t = t.replace("_", " ")
    t = _DECIMAL_ZEROS.sub(lambda m: m.group(1) + ("." + m.group(2) if m.group(2) else ""), t)
    t = _ARTICLES.sub(" ", t)
    return " ".join(t.split())


def _quantity(norm: str) -> tuple[str, str | None] | None:
    """``(number, canonical unit or None)`` when a normalized answer is only a quantity."""
    m = _QUANTITY.match(norm)
    if not m:
        return None
    units = set()
    for part in (m.group(1), m.group(3)):
        if part:
            canon = _UNIT_CANON.get(re.sub(r"\s+", "" if part.startswith("\u00b0") else " ", part))
            if canon is None:
                return None  # "5 million", "3 goals": not a harmless unit
            units.add(canon)
    if len(units) > 1:
        return None
    return m.group(2), (units.pop() if units else None)


def _same_quantity(a: tuple[str, str | None], b: tuple[str, str | None] | None) -> bool:
    """Same number, and the same unit or a unit on one side only."""
    if b is None or a[0] != b[0]:
        return False
    return a[1] is None or b[1] is None or a[1] == b[1]


def exact_match(response: str | None, answers: list[str]) -> bool:
    """True when the normalized response equals a normalized acceptable answer.

    A quantity with a harmless unit or currency sign also matches the same number written with
    the same unit or with none (``$1,000`` = ``1000 USD`` = ``1000``); different numbers or
    different units (``100 km`` and ``100 miles``) never match here.
    """
    r = normalize_answer(response)
    if not r:
        return False
    rq = _quantity(r)
    for a in answers:
        n = normalize_answer(a)
        if not n:
            continue
        if r == n:
            return True
        if rq is not None and _same_quantity(rq, _quantity(n)):
            return True
    return False


# -- grading --------------------------------------------------------------------------------


def grader_version(question: Question | None = None) -> str:
    """``VERSION``, or ``VERSION+override.<hash>`` when ``grader.freshqa.txt`` overrides it."""
    return template_version(TEMPLATE, JUDGE_PROMPT, VERSION)


def judge_prompt(question: Question, response: str) -> str:
    """The judge prompt for one response (the override's text when there is one)."""
    return render(
        TEMPLATE,
        JUDGE_PROMPT,
        question=question.question,
        effective_year=year_text(question) or "not given",
        answers=join_answers(question.answers),
        response=response.strip(),
    )


async def agrade(question: Question, response: str | None, judge: LLMClient, **settings: object) -> Grade:
    """Grade one FreshQA response (see the module docstring for the steps)."""
    config = JudgeConfig.from_settings(judge, settings)
    version = grader_version(question)
    common = {"grader": GRADER, "grader_version": version, "config": config}
    if is_empty_response(response):
        return make_grade(question, response, outcome="incorrect", method="none", **common)
    assert response is not None
    if exact_match(response, question.answers):
        return make_grade(question, response, outcome="correct", method="exact", **common)
    reply = await ask_judge(judge, judge_prompt(question, response), parse_evaluation, REASK, config)
    outcome = reply.status if reply.status != "ok" else str(reply.verdict)
    return make_grade(question, response, outcome=outcome, method="judge", reply=reply, **common)
