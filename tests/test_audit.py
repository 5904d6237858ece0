"""The judge audit on a small hand-built run whose numbers are worked out by hand."""

from __future__ import annotations

import math

import pytest
from typer.testing import CliRunner

from trek import runs
from trek.audit import AUDIT_GRADING, audit_pairs, audit_table, confusion, describe, disagreements
from trek.cli import app
from trek.report.judge_audit import AuditData, plot_audit
from trek.stats import cohens_kappa_ci
from trek.trace.records import Step, TraceRecord
from trek.types import Grade, Question, Trajectory, write_jsonl

# Ten answers. The exact judge: 4 correct, 6 incorrect. The audit judge agrees on 3 of the 4 correct
# and on 5 of the 6 incorrect, and leaves an eleventh verdict unparsed.
#   p_o = 8/10 = 0.8;  p_e = 0.4 * 0.4 + 0.6 * 0.6 = 0.52;  kappa = (0.8 - 0.52) / (1 - 0.52) = 7/12
EXACT = ["correct"] * 4 + ["incorrect"] * 6 + ["incorrect"]
JUDGE = ["correct", "correct", "correct", "incorrect", "correct"] + ["incorrect"] * 5 + ["unparsed"]


def grade(qid: str, outcome: str, model: str, exact: bool) -> Grade:
    return Grade(question_id=qid, dataset="freshqa", response=f"answer {qid}", outcome=outcome,  # type: ignore[arg-type]
                 method="exact" if exact else "judge", grader="exact" if exact else "freshqa",
                 grader_version="v", judge_model=model, judge_raw=[] if exact else [f"evaluation: {outcome}"])


def step(name: str, model: str, value: dict, status: str = "ok") -> Step:
    return Step(name=name, role="analysis", model=model, endpoint="e", template="t", version="v",
                status=status, value=value)  # type: ignore[arg-type]


@pytest.fixture
def run_dir(tmp_path):
    rd = tmp_path / "run"
    ids = [f"h:{i}" for i in range(len(EXACT))]
    qs = [Question(id=q, dataset="freshqa", question=f"question {q}?", answers=["x"]) for q in ids]
    runs.write_records(rd, runs.QUESTIONS, qs)
    runs.write_records(rd, runs.ANSWERS, [Trajectory(question_id=q, model="m", final_answer=f"answer {q}") for q in ids])
    write_jsonl(rd / runs.GRADES, [grade(q, o, "oracle", True) for q, o in zip(ids, EXACT, strict=True)])
    write_jsonl(rd / AUDIT_GRADING, [grade(q, o, "gpt-judge", False) for q, o in zip(ids, JUDGE, strict=True)])
    # two traced cases: the audit judge agrees on one probe verdict and not on the other
    recs = []
    for q, exact_ok, judge_ok in (("h:0", True, True), ("h:1", False, True)):
        recs.append(TraceRecord(question_id=q, dataset="freshqa", question="?", answers=["x"], original_outcome="incorrect",
                                status="done", gold_only_answer=f"probe {q}",
                                steps=[step("gold_only_grade", "oracle", {"correct": exact_ok, "reason": "exact"})],
                                audit_steps=[step("gold_only_grade", "gpt-judge", {"correct": judge_ok, "reason": "llm"})]))
    write_jsonl(rd / runs.TRACE, recs)
    return rd


def test_the_grading_audit_is_worked_out_by_hand(run_dir):
    pairs = audit_pairs([run_dir])
    grading = pairs[pairs["role"] == "grading"]
    assert len(grading) == 11 and grading["judge"].isna().sum() == 1
    table = audit_table(pairs)
    row = table.loc["grading"]
    assert row["n"] == 10 and row["unreadable"] == 1
    assert row["agreement_binary"] == pytest.approx(80.0) and row["agreement_outcomes"] == pytest.approx(80.0)
    assert row["kappa"] == pytest.approx(7 / 12)
    assert row["exact_yes"] == pytest.approx(40.0) and row["judge_yes"] == pytest.approx(40.0)
    assert row["kappa_low"] < 7 / 12 < row["kappa_high"]
    assert (row["kappa"], row["kappa_low"], row["kappa_high"]) == pytest.approx(
        cohens_kappa_ci(EXACT[:10], JUDGE[:10]))
    assert row["judge_model"] == "gpt-judge"
    c = confusion(pairs, "grading")
    assert c.loc["correct", "correct"] == 3 and c.loc["correct", "incorrect"] == 1
    assert c.loc["incorrect", "correct"] == 1 and c.loc["incorrect", "incorrect"] == 5
    d = disagreements(pairs)
    assert set(d["question_id"]) == {"h:3", "h:4", "h:1"}  # two grades and one probe verdict


def test_binary_and_three_outcome_agreement_are_each_reported(tmp_path):
    # SealQA: exact C/B/A/A, judge B/C/A/B. Outcomes agree once (A, A) of 4: 25%; credit (A or
    # not) agrees three times (not/not, not/not, A/A) of 4: 75%.
    exact, judge = ["not_attempted", "incorrect", "correct", "correct"], ["incorrect", "not_attempted", "correct",
                                                                         "incorrect"]
    rd = tmp_path / "seal"
    ids = [f"s:{i}" for i in range(4)]
    runs.write_records(rd, runs.QUESTIONS, [Question(id=q, dataset="sealqa", question=f"{q}?", answers=["x"])
                                            for q in ids])
    runs.write_records(rd, runs.ANSWERS, [Trajectory(question_id=q, model="m", final_answer="a") for q in ids])
    mk = lambda q, o, m, e: grade(q, o, m, e).model_copy(update={"dataset": "sealqa"})  # noqa: E731
    write_jsonl(rd / runs.GRADES, [mk(q, o, "oracle", True) for q, o in zip(ids, exact, strict=True)])
    write_jsonl(rd / AUDIT_GRADING, [mk(q, o, "gpt-judge", False) for q, o in zip(ids, judge, strict=True)])
    row = audit_table(audit_pairs([rd])).loc["grading"]
    assert row["agreement_outcomes"] == pytest.approx(25.0) and row["agreement_binary"] == pytest.approx(75.0)


def test_trace_steps_recorded_beside_the_exact_ones_are_paired(run_dir):
    table = audit_table(audit_pairs([run_dir]))
    row = table.loc["gold_only"]
    assert row["n"] == 2 and row["agreement_binary"] == row["agreement_outcomes"] == pytest.approx(50.0)
    # exact yes/no, judge yes/yes: p_o = 1/2, p_e = 1/2 * 1 + 1/2 * 0 = 1/2, kappa 0
    assert row["kappa"] == pytest.approx(0.0)
    assert list(table.index) == ["grading", "gold_only"]  # the roles' fixed order


def test_kappa_interval_matches_the_normal_approximation():
    # [[20, 5], [10, 15]]: p_o = 0.7, p_e = 0.5, kappa = 0.4
    a = [1] * 25 + [0] * 25
    b = [1] * 20 + [0] * 5 + [1] * 10 + [0] * 15
    k, lo, hi = cohens_kappa_ci(a, b)
    assert k == pytest.approx(0.4)
    assert hi - k == pytest.approx(k - lo) and 0.15 < lo < 0.16  # se 0.127 (Fleiss, Cohen, Everitt)
    assert cohens_kappa_ci(a, b, level=0.5)[2] < hi
    k1, lo1, hi1 = cohens_kappa_ci([1, 1, 1], [1, 1, 1])
    assert math.isnan(k1) and math.isnan(lo1) and math.isnan(hi1)  # undefined, not 1.0
    k2, lo2, hi2 = cohens_kappa_ci([1, 0, 1, 0, 0], [1, 1, 1, 1, 1])  # one rater constant: 0, no interval
    assert k2 == 0.0 and math.isnan(lo2) and math.isnan(hi2)


def test_no_audit_data_is_said_not_failed(tmp_path):
    rd = tmp_path / "plain"
    runs.write_records(rd, runs.QUESTIONS, [Question(id="h:0", dataset="freshqa", question="?", answers=["x"])])
    pairs = audit_pairs({"plain": rd})
    assert pairs.empty and audit_table(pairs).empty
    assert describe(pairs).startswith("no audit data")
    fig = plot_audit(AuditData(pairs, audit_table(pairs)), "t")
    assert fig.axes[0].texts[0].get_text() == "no audit data"
    res = CliRunner().invoke(app, ["judge", "audit", str(rd)])
    assert res.exit_code == 0 and "no audit data" in res.output


def test_the_command_prints_the_table_and_writes_the_pairs(run_dir, tmp_path):
    out = tmp_path / "pairs.csv"
    res = CliRunner().invoke(app, ["judge", "audit", str(run_dir), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "grading" in res.output and "0.583" in res.output and "3 disagreement(s)" in res.output
    assert len(out.read_text().splitlines()) == 1 + 11 + 2
    res = CliRunner().invoke(app, ["judge", "audit", str(tmp_path / "missing")])
    assert res.exit_code == 2 and "does not exist" in res.output


def test_a_kappa_without_interval_says_why_on_the_plot():
    """A judge that says yes every time has kappa 0 and no interval: the plot names the reason."""
    import pandas as pd

    table = pd.DataFrame({"n": [10, 10], "kappa": [0.0, 0.4], "kappa_low": [float("nan"), 0.1],
                          "kappa_high": [float("nan"), 0.7], "judge_yes": [100.0, 50.0]},
                         index=pd.Index(["evidence", "grading"], name="role"))
    fig = plot_audit(AuditData(pd.DataFrame({"role": ["evidence"]}), table), "t")
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts == ["no interval:\njudge\nsaid yes\nevery time"]


def test_the_audit_plot_has_one_encoding_dots_with_intervals():
    """No bars beside dots: every defined kappa is a dot, its interval a line; n under each role."""
    import pandas as pd
    from matplotlib.container import BarContainer, ErrorbarContainer

    table = pd.DataFrame({"n": [10, 12, 8], "kappa": [0.0, 0.4, float("nan")], "kappa_low": [float("nan"), 0.1,
                                                                                              float("nan")],
                          "kappa_high": [float("nan"), 0.7, float("nan")], "judge_yes": [100.0, 50.0, 0.0]},
                         index=pd.Index(["evidence", "grading", "noise"], name="role"))
    fig = plot_audit(AuditData(pd.DataFrame({"role": ["evidence"]}), table), "t")
    ax = fig.axes[0]
    assert not [c for c in ax.containers if isinstance(c, BarContainer)]
    (err,) = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    assert err.lines[0].get_xydata().tolist() == [[1.0, 0.4]]  # grading: its dot and interval
    dots = [tuple(p) for line in ax.lines if line.get_marker() == "o" for p in line.get_xydata()]
    assert sorted(dots) == [(0.0, 0.0), (1.0, 0.4)]  # evidence: a dot without an interval; noise: none
    assert [t.get_text() for t in ax.get_xticklabels()] == ["evidence\nn=10", "grading\nn=12", "noise\nn=8"]


def test_an_undefined_kappa_is_marked_and_named_in_the_table_and_on_the_plot():
    """Both judges said no every time: kappa 0/0 is undefined (NaN), not 1 and not 0."""
    import pandas as pd

    from trek.audit import audit_table, show_kappa

    pairs = pd.DataFrame({"role": ["noise"] * 3 + ["grading"] * 2, "exact": ["no"] * 3 + ["correct", "incorrect"],
                          "judge": ["no"] * 3 + ["correct", "correct"], "judge_model": ["m"] * 5})
    table = audit_table(pairs)
    assert math.isnan(table.loc["noise", "kappa"]) and "undefined: both judges said 'no'" in table.loc["noise",
                                                                                                         "kappa_note"]
    assert table.loc["grading", "kappa"] == 0.0 and "audited judge said 'correct'" in table.loc["grading",
                                                                                                 "kappa_note"]
    shown = show_kappa(table, 2)
    assert list(shown["kappa"]) == ["0.00", "undefined"]  # the roles' fixed order: grading first
    fig = plot_audit(AuditData(pairs, table), "t")
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "undefined:\nboth judges\nsaid 'no'\nevery time" in texts
