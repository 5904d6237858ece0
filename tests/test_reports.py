import pytest

from trek.reports import load_questions, reference_years
from trek.types import Question


def q(i, ds, year=None):
    return Question(id=f"{ds}:{i}", dataset=ds, question="q?", answers=["a"], effective_year=year,
                    effective_year_raw=None if year is None else str(year))


def test_reference_years_counts_and_totals():
    qs = [q(1, "freshqa", 2024), q(2, "freshqa", 2023), q(3, "sealqa", 2024), q(4, "infodeepseek")]
    t = reference_years(qs)
    assert t.loc["2024", "freshqa"] == 1 and t.loc["2024", "sealqa"] == 1 and t.loc["2024", "total"] == 2
    assert t.loc["unspecified", "infodeepseek"] == 1
    assert t.loc["total", "total"] == 4
    assert list(t.index) == ["2023", "2024", "unspecified", "total"]


def test_load_questions_sources():
    assert len(load_questions("mini")) >= 12
    with pytest.raises(ValueError, match="unknown question source 'nope'"):
        load_questions("nope")
    with pytest.raises(ValueError, match="no questions"):
        reference_years([])
