"""The committed figures/ and tables/ (written by `make paper` from the recorded runs)."""

import re

import pytest

from trek.report.paths import repo_root

TABLES = sorted((repo_root() / "tables").glob("*.tex"))


@pytest.mark.parametrize("path", TABLES, ids=lambda p: p.name)
def test_committed_tables_print_no_tuples_and_no_raw_delta(path):
    tex = path.read_text(encoding="utf-8")
    assert "Δ" not in tex, f"{path.name}: a raw Δ (LaTeX needs $\\Delta$)"
    assert not re.search(r"\('[^']*', ", tex), f"{path.name}: a MultiIndex row printed as a Python tuple"


def test_committed_table1_and_figure6_carry_intervals_and_real_distractor_counts():
    tables = repo_root() / "tables"
    assert "95\\% intervals" in (tables / "tab1_wild_accuracy.tex").read_text()
    budget = (tables / "fig6_budget.csv").read_text().splitlines()
    assert budget[0].split(",")[-3:] == ["distractors", "distractors_min", "distractors_max"]
    assert "ci_low" in budget[0] and "ci_high" in (tables / "fig6_position.csv").read_text().splitlines()[0]
