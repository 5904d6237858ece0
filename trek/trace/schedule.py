"""The C.4 schedule as data: which TrekTrace test runs when, and the label rule that reads them.

This module is where TrekTrace's parts are listed: it imports the modules that define the tests
(each registers itself with :func:`~trek.trace.parts.trace_test`), and :data:`SCHEDULE` names
them in the order they run, each :class:`Entry` saying which earlier result it waits on:

1. ``retrieval`` (C.2, URL identity then evidence match);
2. ``queries`` when the evidence was not shown to be retrieved (a ``True`` retrieval result makes
   it not needed);
3. ``gold_only`` (C.3);
4. ``noise`` only after a right gold-only answer;
5. ``stale`` (beyond the paper, ``check_stale`` only; no label reads it).

The labels then follow from :data:`~trek.trace.labels.C4`. A tracing run may be given another
schedule (``TraceConfig.schedule``): :func:`with_entry` adds a registered test to one.
"""

from __future__ import annotations

from dataclasses import dataclass

from trek.trace import evidence, probes, queries, stale  # noqa: F401  (the tests register on import)
from trek.trace.labels import C4, LabelRule
from trek.trace.parts import CaseRun, Undecided, get_test, needs_result

__all__ = ["Entry", "SCHEDULE", "LABEL_RULE", "with_entry", "play"]


@dataclass(frozen=True)
class Entry:
    """One test of a schedule. ``after``: the test whose result gates this one, which runs only
    when that result is in ``when``; otherwise it is *not needed* when the test it waits on ran,
    and *skipped* (it needs that result) when that test could not run."""

    test: str
    after: str | None = None
    when: tuple[bool | None, ...] = ()


SCHEDULE: tuple[Entry, ...] = (
    Entry("retrieval"),
    Entry("queries", after="retrieval", when=(False, None)),
    Entry("gold_only"),
    Entry("noise", after="gold_only", when=(True,)),
    Entry("stale"),
)
#: The label rule of the default schedule.
LABEL_RULE: LabelRule = C4


def with_entry(schedule: tuple[Entry, ...], entry: Entry, *, before: str | None = None) -> tuple[Entry, ...]:
    """``schedule`` with ``entry`` added at the end, or before the test named ``before``."""
    get_test(entry.test)  # only registered tests can be scheduled
    if before is None:
        return (*schedule, entry)
    at = next(i for i, e in enumerate(schedule) if e.test == before)
    return (*schedule[:at], entry, *schedule[at:])


async def play(entry: Entry, case: CaseRun) -> None:
    """Run one schedule entry on ``case`` (or record why it did not run)."""
    test = get_test(entry.test)
    if not test.enabled(case.config):
        return
    if entry.after is not None and case.values.get(entry.after) not in entry.when:
        upstream = case.tests.get(entry.after)
        if upstream is not None and upstream.state == "ran":
            case.not_needed(test.name)
        else:
            case.skip(test.name, needs_result(entry.after))
        return
    try:
        await test.run(case)
    except Undecided as u:  # a judge abstained: the test did not run, whatever else it set
        case.skip(test.name, u.reason)
