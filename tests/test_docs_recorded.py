"""docs/recorded-runs.md's paragraph on the committed recording is checked against data/runs/README.md (which
`make runs` writes): every percentage it states appears there, so a re-recording cannot leave the
paragraph saying numbers the recording no longer shows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
START, END = "<!-- recorded-results:start -->", "<!-- recorded-results:end -->"
#: a percentage or a range of them: "5.6%", "0 %", "0-8%", "16.7 to 25.0 %"
PERCENT = re.compile(r"(-?\d+(?:\.\d+)?)(?:\s*(?:-|–|to)\s*(-?\d+(?:\.\d+)?))?\s*%")
NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")


def paragraph(readme: str) -> str:
    if START not in readme or END not in readme:
        raise AssertionError(f"docs/recorded-runs.md has no {START} ... {END} block around its recorded-results paragraph")
    return readme.split(START, 1)[1].split(END, 1)[0]


def percentages(text: str) -> list[float]:
    out = []
    for m in PERCENT.finditer(text):
        out += [float(g) for g in m.groups() if g is not None]
    return out


def recorded_numbers(text: str) -> set[float]:
    """Every number of the recording's README, rounded to the tables' one decimal."""
    return {round(float(n), 1) for n in NUMBER.findall(text)}


def test_the_checks_read_percentages_and_ranges():
    assert percentages("0% without search, 5.6 % with, 0-8% under any, 16.7 to 25.0% and kappa 0.01") == [
        0.0, 5.6, 0.0, 8.0, 16.7, 25.0]
    assert recorded_numbers("a 25.0 | 16.7 NaN x1.5 -0.12") == {25.0, 16.7, -0.1}
    with pytest.raises(AssertionError, match="recorded-results"):
        paragraph("no block here")


def test_every_percentage_of_the_readme_paragraph_is_in_the_recording():
    text = paragraph((ROOT / "docs" / "recorded-runs.md").read_text(encoding="utf-8"))
    found = percentages(text)
    assert len(found) >= 8, "the paragraph states the recording's main percentages"
    recorded = recorded_numbers((ROOT / "data" / "runs" / "README.md").read_text(encoding="utf-8"))
    missing = [p for p in found if round(p, 1) not in recorded]
    assert not missing, f"docs/recorded-runs.md's recorded-results paragraph states {missing} (%), which data/runs/README.md " \
                        "does not show: update the paragraph from data/runs/README.md"
