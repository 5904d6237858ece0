"""Verdict parsing of realistic judge replies, one table per grader (tests/fixtures/verdicts/).

Every row is a separate test: the parser must return exactly the row's ``want`` (``null`` in
the table means the reply is unreadable and must not be given a verdict).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from trek.graders import freshqa, infodeepseek, sealqa

TABLES = Path(__file__).parent / "fixtures" / "verdicts"


def rows(name: str) -> list:
    data = yaml.safe_load((TABLES / f"{name}.yaml").read_text(encoding="utf-8"))
    return [pytest.param(r["reply"], r["want"], id=f"{i:02d}-{r['why'][:40]}") for i, r in enumerate(data)]


@pytest.mark.parametrize("name", ["freshqa", "infodeepseek", "sealqa"])
def test_tables_are_large_and_well_formed(name):
    data = yaml.safe_load((TABLES / f"{name}.yaml").read_text(encoding="utf-8"))
    assert len(data) >= 40
    allowed = {"freshqa": {"correct", "incorrect", None}, "infodeepseek": {"yes", "no", None},
               "sealqa": {"A", "B", "C", None}}[name]
    for r in data:
        assert isinstance(r["reply"], str) and r["why"]
        assert r["want"] in allowed, r
    replies = [r["reply"] for r in data]
    assert len(set(replies)) == len(replies), "duplicate rows"


def test_infodeepseek_table_covers_both_templates():
    data = yaml.safe_load((TABLES / "infodeepseek.yaml").read_text(encoding="utf-8"))
    counts = {t: sum(r["template"] == t for r in data) for t in ("plain", "false_premise")}
    assert counts["plain"] >= 20 and counts["false_premise"] >= 8


@pytest.mark.parametrize(("reply", "want"), rows("freshqa"))
def test_freshqa_verdicts(reply, want):
    assert freshqa.parse_evaluation(reply) == want


@pytest.mark.parametrize(("reply", "want"), rows("infodeepseek"))
def test_infodeepseek_verdicts(reply, want):
    assert infodeepseek.parse_yes_no(reply) == want


@pytest.mark.parametrize(("reply", "want"), rows("sealqa"))
def test_sealqa_verdicts(reply, want):
    assert sealqa.parse_letter(reply) == want
