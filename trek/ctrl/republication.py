"""Republication distractors (paper D.2, D.5 Algorithm 1): old pages shown with newer dates.

Programmatic, no model call. For a question, up to ``target`` (5) historical documents are given
a newer displayed date and a fictitious source URL; their substance is unchanged except that
explicit publication-date lines ("Published: ...", "Date: ...", "Posted on ...", "Updated ...")
are rewritten to the new date (each such edit is recorded).

Source ranking: tier 0 dated before the gold-date anchor, tier 1 undated, tier 2 the rest; within
a tier, documents supporting an old (non-reference) answer first, then the most recent, then id.
When fewer than ``target`` sources exist, they are reused in ranking order.

Dates: uniform over [anchor + 1 day, 31 December of the reference year], seeded by question id
and slot. When that interval is empty (no anchor, or the anchor is at or past the year end), the
late-reference-year fallback draws from the last ``fallback_days`` days of the reference year.
The reference year is the question's ``effective_year``, else the anchor's year, else the year
of the latest dated document of the pool; without any, no republication is made (noted).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

from trek.ctrl.common import FICTITIOUS_DOMAINS, rng, same_answer, slugify
from trek.ctrl.pools import Pool
from trek.types import Document

__all__ = ["VERSION", "RepublicationPlan", "date_interval", "rank_sources", "republish", "add_republications"]

VERSION = "ctrl.republication/1"
TARGET = 5
FALLBACK_DAYS = 61  # November and December


@dataclass(frozen=True)
class RepublicationPlan:
    """The date interval used for one question and the rule that produced it."""

    start: dt.date
    end: dt.date
    policy: str  # "after_anchor" or "late_reference_year_fallback"
    reference_year: int


def reference_year(pool: Pool) -> int | None:
    q = pool.question
    if q.effective_year is not None:
        return q.effective_year
    anchor = pool.anchor_date()
    if anchor is not None:
        return anchor.year
    dates = [d.date for d in pool.documents if d.date is not None]
    return max(dates).year if dates else None


def date_interval(
    anchor: dt.date | None, year: int, *, fallback_days: int = FALLBACK_DAYS
) -> RepublicationPlan:
    """The interval for displayed dates: after the anchor within ``year``, or the late-year fallback."""
    end = dt.date(year, 12, 31)
    if anchor is not None:
        start = anchor + dt.timedelta(days=1)
        if start <= end:
            return RepublicationPlan(start, end, "after_anchor", year)
    start = end - dt.timedelta(days=max(fallback_days, 1) - 1)
    return RepublicationPlan(start, end, "late_reference_year_fallback", year)


def rank_sources(pool: Pool) -> list[Document]:
    """Historical documents in republication order (see the module docstring)."""
    anchor = pool.anchor_date()
    refs = pool.question.answers

    def key(d: Document) -> tuple[Any, ...]:
        if d.date is not None and (anchor is None or d.date < anchor):
            tier = 0
        elif d.date is None:
            tier = 1
        else:
            tier = 2
        old_answer = d.supports_answer is not None and not same_answer(d.supports_answer, refs)
        recency = -(d.date.toordinal()) if d.date is not None else 0
        return (tier, 0 if old_answer else 1, recency, d.id)

    return sorted(pool.role("outdated"), key=key)


_MONTHS = [
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
]
_MONTH_RE = "|".join(_MONTHS) + "|" + "|".join(m[:3] for m in _MONTHS)
# A date in one of three shapes: 2021-03-12, 12 March 2021, March 12, 2021 (abbreviated months too).
_DATE = re.compile(
    rf"(?P<iso>\b\d{{4}}-\d{{2}}-\d{{2}}\b)"
    rf"|(?P<dmy>\b\d{{1,2}} (?P<m1>{_MONTH_RE})\.? \d{{4}}\b)"
    rf"|(?P<mdy>\b(?P<m2>{_MONTH_RE})\.? \d{{1,2}},? \d{{4}}\b)"
)
_PUB_LINE = re.compile(
    r"^(?P<head>[ \t]*(?:published|publication date|date published|posted(?: on)?|updated|last updated|date)"
    r"\b[^\n]{0,20}?)(?P<rest>[^\n]*)$",
    re.IGNORECASE | re.MULTILINE,
)


def _format_like(match: re.Match[str], new: dt.date) -> str:
    if match.group("iso"):
        return new.isoformat()
    abbreviated = (match.group("m1") or match.group("m2") or "") not in _MONTHS
    month = _MONTHS[new.month - 1][:3] if abbreviated else _MONTHS[new.month - 1]
    if match.group("dmy"):
        return f"{new.day} {month} {new.year}"
    return f"{month} {new.day}, {new.year}"


def rewrite_publication_lines(text: str, new: dt.date) -> tuple[str, list[dict[str, str]]]:
    """Replace the date on explicit publication-date lines; returns the text and the edits."""
    edits: list[dict[str, str]] = []

    def line(m: re.Match[str]) -> str:
        rest = m.group("rest")
        dm = _DATE.search(rest)
        if dm is None:
            return m.group(0)
        old_line = m.group(0)
        new_line = m.group("head") + rest[: dm.start()] + _format_like(dm, new) + rest[dm.end():]
        if new_line != old_line:
            edits.append({"old": old_line, "new": new_line})
        return new_line

    return _PUB_LINE.sub(line, text), edits


def republish(source: Document, *, question_id: str, slot: int, new_date: dt.date, domain: str) -> Document:
    """One republication document made from ``source`` (slot numbered from 1)."""
    text, edits = rewrite_publication_lines(source.text, new_date)
    slug = slugify(source.title or source.id)
    url = f"https://{domain}/{new_date.year}/{new_date.month:02d}/{slug}-r{slot}"
    meta = {
        "origin": "synthetic",
        "policy": "republication",
        "synthetic": True,
        "source_doc": source.id,
        "source_url": source.url,
        "original_date": source.date.isoformat() if source.date else None,
        "edits": edits,
        "version": VERSION,
    }
    if not edits and "answer_span" in source.metadata:  # same text: the answer stands where it stood
        meta["answer_span"] = source.metadata["answer_span"]
    return Document(
        id=f"{question_id}:republication:{slot}",
        url=url,
        title=source.title,
        date=new_date,
        text=text,
        question_id=question_id,
        role="republication",
        supports_answer=source.supports_answer,
        source=domain,
        metadata=meta,
    )


def add_republications(pool: Pool, *, target: int = TARGET, fallback_days: int = FALLBACK_DAYS) -> Pool:
    """The pool with up to ``target`` republication documents added (existing ones replaced).

    A pure function of the pool: dates and domains are seeded by the question id and slot.
    """
    qid = pool.question.id
    base = [d for d in pool.documents if d.role != "republication"]
    notes = dict(pool.notes)
    sources = rank_sources(pool)
    year = reference_year(pool)
    if not sources or year is None or target <= 0:
        notes["republication"] = {
            "made": 0,
            "reason": "no historical documents" if not sources else "no reference year or dated document",
        }
        return pool.model_copy(update={"documents": base, "notes": notes})
    plan = date_interval(pool.anchor_date(), year, fallback_days=fallback_days)
    span = (plan.end - plan.start).days
    offset = rng(qid, "republication", "domain").randrange(len(FICTITIOUS_DOMAINS))
    made = []
    for slot in range(1, target + 1):
        src = sources[(slot - 1) % len(sources)]
        day = rng(qid, "republication", "date", slot).randint(0, span)
        new_date = plan.start + dt.timedelta(days=day)
        domain = FICTITIOUS_DOMAINS[(offset + slot - 1) % len(FICTITIOUS_DOMAINS)]
        made.append(republish(src, question_id=qid, slot=slot, new_date=new_date, domain=domain))
    notes["republication"] = {
        "made": len(made),
        "sources": len(sources),
        "reused": len(made) > len(sources),
        "policy": plan.policy,
        "interval": [plan.start.isoformat(), plan.end.isoformat()],
        "reference_year": plan.reference_year,
        "version": VERSION,
    }
    return pool.model_copy(update={"documents": base + made, "notes": notes})
