"""Accuracy tables on small made-up runs whose numbers can be worked out by hand."""

from __future__ import annotations

import math

import pytest

from trek.analysis import accuracy_by_dataset, accuracy_table, grades_frame, load_grades
from trek.types import Grade, write_jsonl


def g(qid: str, dataset: str, outcome: str) -> Grade:
    return Grade(question_id=qid, dataset=dataset, response="r", outcome=outcome,
                 grader=dataset, grader_version="v1", judge_model="judge")


def made_up_run() -> list[Grade]:
    # dataset a: 2 correct out of 4 decided, plus one unparsed grade that must not count;
    # dataset b: 3 correct out of 3 decided, plus one pending grade that must not count.
    return [
        g("a1", "a", "correct"), g("a2", "a", "incorrect"), g("a3", "a", "correct"),
        g("a4", "a", "not_attempted"), g("a5", "a", "unparsed"),
        g("b1", "b", "correct"), g("b2", "b", "correct"), g("b3", "b", "pending"), g("b4", "b", "correct"),
    ]


def test_micro_and_macro_by_hand():
    t = accuracy_by_dataset(made_up_run())
    assert list(t.index) == ["a", "b", "micro", "macro"]
    assert t.index.name == "dataset"

    a, b, micro, macro = (t.loc[k] for k in ["a", "b", "micro", "macro"])
    assert (a["n"], a["correct"], a["incorrect"], a["not_attempted"], a["unparsed"], a["pending"], a["decided"]) == (
        5, 2, 1, 1, 1, 0, 4)
    assert (b["n"], b["correct"], b["pending"], b["decided"]) == (4, 3, 1, 3)
    assert a["accuracy"] == pytest.approx(50.0)  # 2/4, the unparsed grade left out
    assert b["accuracy"] == pytest.approx(100.0)  # 3/3, the pending grade left out
    assert micro["accuracy"] == pytest.approx(100 * 5 / 7)
    assert macro["accuracy"] == pytest.approx(75.0)
    assert (micro["n"], micro["decided"], micro["unparsed"], micro["pending"]) == (9, 7, 1, 1)

    # Wilson 95% interval for 5/7, worked out from the score-interval formula
    z = 1.959963984540054
    n, p = 7, 5 / 7
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    assert micro["ci_low"] == pytest.approx(100 * (centre - half), abs=1e-6)
    assert micro["ci_high"] == pytest.approx(100 * (centre + half), abs=1e-6)
    # dataset b is 3/3: the Wilson upper bound is 100
    assert b["ci_high"] == pytest.approx(100.0)

    # macro: dataset b is always 100 in a resample and a lies in [0, 100], so macro is in [50, 100]
    assert 50.0 <= macro["ci_low"] < 75.0 < macro["ci_high"] <= 100.0


def test_macro_bootstrap_is_seeded():
    t1 = accuracy_by_dataset(made_up_run(), seed=3, n_resamples=2000)
    t2 = accuracy_by_dataset(made_up_run(), seed=3, n_resamples=2000)
    assert t1.loc["macro", "ci_low"] == t2.loc["macro", "ci_low"]
    assert t1.loc["macro", "ci_high"] == t2.loc["macro", "ci_high"]


def test_dataset_without_decided_grades_is_nan_and_left_out_of_macro():
    grades = [*made_up_run(), g("c1", "c", "unparsed"), g("c2", "c", "pending")]
    t = accuracy_by_dataset(grades)
    assert math.isnan(t.loc["c", "accuracy"]) and t.loc["c", "decided"] == 0
    assert t.loc["macro", "accuracy"] == pytest.approx(75.0)
    assert t.loc["micro", "accuracy"] == pytest.approx(100 * 5 / 7)


def test_empty_and_no_ci():
    t = accuracy_by_dataset([])
    assert list(t.index) == ["micro", "macro"] and t.loc["micro", "n"] == 0
    assert math.isnan(t.loc["micro", "accuracy"])
    fast = accuracy_by_dataset(made_up_run(), ci=False)
    assert fast.loc["macro", "accuracy"] == pytest.approx(75.0)
    assert math.isnan(fast.loc["micro", "ci_low"])


def test_accuracy_table_over_runs(tmp_path):
    run1, run2 = tmp_path / "run1", tmp_path / "run2"
    write_jsonl(run1 / "grades.jsonl", made_up_run())
    write_jsonl(run2 / "grades.jsonl", [g("a1", "a", "correct"), g("a2", "a", "incorrect")])
    assert len(load_grades(run1)) == 9

    t = accuracy_table({"model-x": run1, "model-y": run2})
    assert list(t.index) == ["model-x", "model-y"] and t.index.name == "run"
    assert list(t.columns) == ["a", "b", "micro", "macro"]
    assert t.loc["model-x", "micro"] == pytest.approx(100 * 5 / 7)
    assert t.loc["model-x", "macro"] == pytest.approx(75.0)
    assert math.isnan(t.loc["model-y", "b"])
    assert t.loc["model-y", "micro"] == pytest.approx(50.0) and t.loc["model-y", "macro"] == pytest.approx(50.0)

    only_b = accuracy_table({"x": made_up_run()}, datasets=["b"])
    assert list(only_b.columns) == ["b", "micro", "macro"]


def test_grades_frame_marks_undecided_as_missing():
    df = grades_frame(made_up_run())
    assert len(df) == 9
    assert df["correct"].isna().sum() == 2
    assert df.loc[df.question_id == "a1", "correct"].item() == 1.0


def test_bad_grade_input_is_rejected():
    with pytest.raises(ValueError, match=r"grades\[0\]"):
        accuracy_by_dataset([42])
