"""TrekTrace's failure labels and the deterministic rules that assign them (paper appendix C.4).

The judges produce facts (was the evidence retrieved, were the queries adequate, did the model
answer right from the gold pages alone, and from the gold pages mixed with what it retrieved);
:func:`assign_labels` turns those facts into labels with fixed rules. No model ever chooses a
label.

Each fact is ``True``, ``False`` or ``None``. ``None`` means the judgment is missing or its
reply could not be read (``unknown``); it is never read as either answer, and the rules say
exactly where it falls: a ``None`` evidence flag is "not shown to be retrieved" (a retrieval-side
label is given), a ``None`` query flag is "not shown to be adequate" (Pre-retrieval), and a
``None`` gold-only or gold-plus-noise result gives no post-retrieval label. Randomness is the
residual: it is given whenever no other rule fires, including some cases with unknown
judgments, so it is not an estimate of stochastic failure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "PRE_RETRIEVAL",
    "RETRIEVAL",
    "INTERPRETATION",
    "DISTRACTION",
    "RANDOMNESS",
    "LABELS",
    "in_c4_order",
    "UPSTREAM",
    "POST_RETRIEVAL",
    "DEFINITIONS",
    "assign_labels",
    "assign_covered",
    "LabelRule",
    "C4",
]

PRE_RETRIEVAL = "Pre-retrieval"
RETRIEVAL = "Retrieval"
INTERPRETATION = "Interpretation"
DISTRACTION = "Distraction"
RANDOMNESS = "Randomness"

#: Every label, in the order labels are listed on a case.
LABELS: tuple[str, ...] = (PRE_RETRIEVAL, RETRIEVAL, INTERPRETATION, DISTRACTION, RANDOMNESS)


def in_c4_order(labels: Iterable[str]) -> list[str]:
    """``labels`` once each in the order of :data:`LABELS` (C.4: Pre-retrieval, Retrieval,
    Interpretation, Distraction, Randomness), any other name after them, alphabetically. Every
    list or count of labels that Trek prints, writes or plots goes through this order."""
    seen = set(labels)
    return [lab for lab in LABELS if lab in seen] + sorted(seen - set(LABELS))


#: Labels of failures before the model reads the evidence, and after.
UPSTREAM: tuple[str, ...] = (PRE_RETRIEVAL, RETRIEVAL)
POST_RETRIEVAL: tuple[str, ...] = (INTERPRETATION, DISTRACTION)

#: What each label means, for reviewers (the workbook's taxonomy sheet and the viewer).
DEFINITIONS: dict[str, str] = {
    PRE_RETRIEVAL: (
        "The answer-bearing evidence was not retrieved and the recorded queries do not aim at it: "
        "a wrong entity or date, a missing step of a multi-hop question, or no query that targets "
        "the answer."
    ),
    RETRIEVAL: (
        "The answer-bearing evidence was not retrieved although the queries were reasonable: the "
        "search returned other pages (for example older ones) instead."
    ),
    INTERPRETATION: (
        "The evaluated model answers wrongly even when given only the gold pages: it cannot read or "
        "reason over the evidence itself. The gold-plus-noise probe is not run after this."
    ),
    DISTRACTION: (
        "The evaluated model answers right from the gold pages alone but wrongly when the pages it "
        "retrieved are added: other context pulls it away from the valid evidence."
    ),
    RANDOMNESS: (
        "No other rule fired. With complete judgments: the evidence was retrieved and both probes "
        "answered right, so the original failure did not reproduce. Also given when missing "
        "judgments leave no other label. Not a measured cause."
    ),
}


def _flag(name: str, value: object) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise TypeError(f"{name} must be True, False or None, got {value!r}")


def assign_labels(
    evidence_retrieved: bool | None,
    query_adequate: bool | None,
    gold_only_correct: bool | None,
    noise_was_run: bool | None,
    noise_correct: bool | None,
) -> tuple[str, ...]:
    """The labels of one traced failure, in :data:`LABELS` order (paper C.4, E/Q/G/N).

    Rules, applied in this order:

    1. evidence not retrieved (``evidence_retrieved`` is ``False`` *or* ``None``): Retrieval when
       ``query_adequate is True``, otherwise (``False`` or ``None``) Pre-retrieval;
    2. ``gold_only_correct is False``: Interpretation; else when ``gold_only_correct is True``,
       the gold-plus-noise probe was run and ``noise_correct is False``: Distraction;
    3. no label yet: Randomness.

    A case therefore carries at most one retrieval-side and one post-retrieval label (e.g.
    Retrieval + Distraction). Every argument must be ``True``, ``False`` or ``None``.
    """
    e = _flag("evidence_retrieved", evidence_retrieved)
    q = _flag("query_adequate", query_adequate)
    g = _flag("gold_only_correct", gold_only_correct)
    ran = _flag("noise_was_run", noise_was_run)
    n = _flag("noise_correct", noise_correct)
    labels: list[str] = []
    if not e:
        labels.append(RETRIEVAL if q is True else PRE_RETRIEVAL)
    if g is False:
        labels.append(INTERPRETATION)
    elif g is True and ran and n is False:
        labels.append(DISTRACTION)
    if not labels:
        labels.append(RANDOMNESS)
    return tuple(labels)


def assign_covered(
    evidence_retrieved: bool | None,
    query_adequate: bool | None,
    gold_only_correct: bool | None,
    noise_was_run: bool | None,
    noise_correct: bool | None,
    *,
    retrieval_side: bool,
    post_side: bool,
) -> tuple[str, ...]:
    """:func:`assign_labels` restricted to the sides of C.4 whose tests ran.

    ``retrieval_side``: the retrieval test (and the query assessment it needed) ran;
    ``post_side``: the gold-only probe (and the gold-plus-noise probe it needed) ran. A side
    that did not run gives no label, and Randomness (the residual) is given only when both
    sides ran. With both true this is exactly :func:`assign_labels`.
    """
    if retrieval_side and post_side:
        return assign_labels(evidence_retrieved, query_adequate, gold_only_correct, noise_was_run, noise_correct)
    labels: list[str] = []
    if retrieval_side and not _flag("evidence_retrieved", evidence_retrieved):
        labels.append(RETRIEVAL if _flag("query_adequate", query_adequate) is True else PRE_RETRIEVAL)
    if post_side:
        g = _flag("gold_only_correct", gold_only_correct)
        if g is False:
            labels.append(INTERPRETATION)
        elif g is True and noise_was_run and _flag("noise_correct", noise_correct) is False:
            labels.append(DISTRACTION)
    return tuple(labels)


# -- the C.4 rule as declared data ---------------------------------------------------------------
@dataclass(frozen=True)
class LabelRule:
    """A label rule over the results of a schedule's tests, with its version.

    ``sides`` names the tests each side of the rule reads: a side is *covered* when each of its
    tests ran or was not needed; an uncovered side gives no label and makes the case
    ``incomplete``. ``facts`` names the record fields the rule reads, in :func:`assign_labels`'s
    argument order. Every trace record stores ``version`` (``TraceRecord.versions["labels"]``)
    and a change of it re-traces the records made under the old one."""

    name: str
    version: str
    sides: tuple[tuple[str, tuple[str, ...]], ...]
    facts: tuple[str, ...]

    def covered(self, tests: dict[str, Any]) -> dict[str, bool]:
        return {side: all(t in tests and tests[t].state in ("ran", "not_needed") for t in names)
                for side, names in self.sides}

    def apply(self, rec: dict[str, Any], tests: dict[str, Any]) -> None:
        """Write ``labels`` and ``status`` (``done`` or ``incomplete``) into the record ``rec``."""
        cov = self.covered(tests)
        facts = [rec.get(f) for f in self.facts]
        rec["labels"] = list(assign_covered(*facts, retrieval_side=cov["retrieval"], post_side=cov["post"]))
        rec["status"] = "done" if all(cov.values()) else "incomplete"


# Version history: c4-1 the rules of assign_covered (first versioned release).
#: The C.4 rule: the retrieval side reads the retrieval and query tests, the post-retrieval side
#: the two probes.
C4 = LabelRule(
    name="C.4",
    version="c4-1",
    sides=(("retrieval", ("retrieval", "queries")), ("post", ("gold_only", "noise"))),
    facts=("evidence_retrieved", "query_adequate", "gold_only_correct", "noise_was_run", "noise_correct"),
)
