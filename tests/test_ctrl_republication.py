"""Republication: source ranking, dates inside the interval, the late-year fallback, seeding, reuse,
publication-date lines, and only fictitious domains."""

from __future__ import annotations

import datetime as dt

import pytest

from trek.ctrl import republication as R
from trek.ctrl.common import FICTITIOUS_DOMAINS, host_of
from trek.ctrl.pools import Pool, from_mini
from trek.types import Document, Question


def pool(year: int | None, gold_date: str | None, hist: list[tuple[str, str | None, str | None]]) -> Pool:
    q = Question(id="q:1", dataset="freshqa", question="Who?", answers=["Ada"], effective_year=year)
    docs = [Document(id="q:1:gold:1", url="https://real.example/g", text="Ada leads.", date=gold_date, role="gold",
                     supports_answer="Ada")]
    for i, (date, answer, text) in enumerate(hist, start=1):
        docs.append(Document(id=f"q:1:outdated:{i}", url=f"https://old.example/{i}", title=f"Old {i}",
                             text=text or f"Old text {i}.", date=date, role="outdated", supports_answer=answer))
    return Pool(question=q, documents=docs)


def test_dates_fall_after_the_anchor_within_the_reference_year_for_every_mini_question():
    for p in from_mini():
        out = R.add_republications(p)
        reps = out.role("republication")
        assert len(reps) == 5
        anchor = p.anchor_date()
        note = out.notes["republication"]
        assert note["policy"] == "after_anchor"
        for d in reps:
            assert anchor < d.date <= dt.date(p.question.effective_year or anchor.year, 12, 31)
            src = next(x for x in p.documents if x.id == d.metadata["source_doc"])
            assert src.role == "outdated" and d.text == src.text and d.supports_answer == src.supports_answer
            assert d.metadata["synthetic"] is True and host_of(d.url) in FICTITIOUS_DOMAINS
            assert d.source in FICTITIOUS_DOMAINS


def test_empty_interval_uses_the_late_reference_year_fallback():
    p = pool(2023, "2023-12-31", [("2022-01-01", "Bo", None)])
    out = R.add_republications(p, fallback_days=30)
    assert out.notes["republication"]["policy"] == "late_reference_year_fallback"
    for d in out.role("republication"):
        assert dt.date(2023, 12, 2) <= d.date <= dt.date(2023, 12, 31)
    # gold dated after the reference year: same fallback
    later = R.add_republications(pool(2022, "2024-03-01", [("2021-01-01", "Bo", None)]))
    assert later.notes["republication"]["policy"] == "late_reference_year_fallback"
    assert all(d.date.year == 2022 and d.date.month >= 11 for d in later.role("republication"))
    # no gold date: fallback within the reference year
    undated = R.add_republications(pool(2021, None, [("2020-01-01", "Bo", None)]))
    assert undated.notes["republication"]["policy"] == "late_reference_year_fallback"


def test_interval_edges():
    plan = R.date_interval(dt.date(2024, 12, 30), 2024)
    assert (plan.start, plan.end, plan.policy) == (dt.date(2024, 12, 31), dt.date(2024, 12, 31), "after_anchor")
    assert R.date_interval(dt.date(2024, 12, 31), 2024).policy == "late_reference_year_fallback"


def test_dates_are_seeded_by_question_id():
    p = pool(2024, "2024-01-10", [(f"2020-0{i}-01", "Bo", None) for i in range(1, 6)])
    a = [d.date for d in R.add_republications(p).role("republication")]
    assert a == [d.date for d in R.add_republications(p).role("republication")]
    other = p.model_copy(update={"question": p.question.model_copy(update={"id": "q:2"})})
    assert a != [d.date for d in R.add_republications(other).role("republication")]


def test_sources_are_ranked_and_reused_when_fewer_than_five():
    p = pool(2024, "2024-06-01", [
        ("2024-08-01", "Bo", None),      # after the anchor: tier 2
        (None, "Cy", None),              # undated: tier 1
        ("2020-01-01", "Ada", None),     # before the anchor but supports the reference: tier 0, second
        ("2019-01-01", "Dee", None),     # before the anchor, old answer: tier 0, first
    ])
    ranked = [d.id for d in R.rank_sources(p)]
    assert ranked == ["q:1:outdated:4", "q:1:outdated:3", "q:1:outdated:2", "q:1:outdated:1"]
    two = pool(2024, "2024-06-01", [("2019-01-01", "Dee", None), ("2018-01-01", "Eve", None)])
    reps = R.add_republications(two).role("republication")
    assert [d.metadata["source_doc"] for d in reps] == ["q:1:outdated:1", "q:1:outdated:2"] * 2 + ["q:1:outdated:1"]
    assert len({d.id for d in reps}) == len({d.url for d in reps}) == 5
    assert R.add_republications(two).notes["republication"]["reused"] is True


def test_no_historical_documents_means_no_republication():
    out = R.add_republications(pool(2024, "2024-06-01", []))
    assert out.role("republication") == [] and out.notes["republication"]["made"] == 0


@pytest.mark.parametrize("line, expected", [
    ("Published: 2021-03-12", "Published: 2024-09-05"),
    ("Posted on March 12, 2021 by staff", "Posted on September 5, 2024 by staff"),
    ("Last updated 12 Mar 2021", "Last updated 5 Sep 2024"),
])
def test_publication_date_lines_are_rewritten(line, expected):
    text = f"Headline\n{line}\nThe club met on 2021-03-01 to decide."
    new, edits = R.rewrite_publication_lines(text, dt.date(2024, 9, 5))
    assert new == f"Headline\n{expected}\nThe club met on 2021-03-01 to decide."
    assert edits == [{"old": line, "new": expected}]


def test_republished_text_carries_the_new_date_line():
    p = pool(2024, "2024-01-10", [("2020-05-01", "Bo", "Date: 2020-05-01\nBo leads the club.")])
    (d, *_) = R.add_republications(p).role("republication")
    assert d.text == f"Date: {d.date.isoformat()}\nBo leads the club."
    assert d.metadata["original_date"] == "2020-05-01"
