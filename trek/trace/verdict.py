"""The analysis judge grades a counterfactual answer against the reference (paper appendix C.3).

Used for both probes (gold-only and gold-plus-noise) with the same template, ``trace.verdict``.
Trivial differences of form, aliases and paraphrases are accepted; a different entity, number or
time, or a partial answer to a multi-part question, is not. The reply is JSON read by
:func:`validate`; an unreadable reply is an ``unknown`` grade, never a wrong one.
"""

from __future__ import annotations

from typing import Any

from trek.llm.structured import object_schema
from trek.templates import register
from trek.trace.common import JUDGE_CASE, REPLY_JSON, flag_and_reason
from trek.trace.parts import JudgeQuestion

__all__ = ["VERSION", "TEMPLATE", "PROMPT", "SCHEMA", "validate", "VERDICT"]

VERSION = "trace-verdict-1"
TEMPLATE = "trace.verdict"

PROMPT = """\
[TrekTrace: answer check]
Decide whether a candidate answer to a benchmark question agrees with the reference answer(s). \
Accept the same meaning in other words, a common alias or abbreviation, and harmless differences \
of formatting or units. Reject a different entity, number, date or time scope, an answer that \
covers only part of what the question asks, or one that mixes the right answer with \
incompatible guesses. The reference answers are the standard here; do not replace them with \
what you believe is true now.

""" + JUDGE_CASE + """Candidate answer: {candidate}

""" + REPLY_JSON + """{{"correct": true or false, "reason": "one short sentence"}}"""


register(TEMPLATE, PROMPT)

#: The reply shape, sent to endpoints that enforce schemas.
SCHEMA = object_schema({"correct": "boolean", "reason": "text"})


def validate(value: dict[str, Any]) -> dict[str, Any]:
    return flag_and_reason(value, "correct")


#: The grade of a probe's answer (asked as ``<probe>_grade``).
VERDICT = JudgeQuestion("grade", "analysis", TEMPLATE, PROMPT, VERSION, SCHEMA, validate, exact="verdict")
