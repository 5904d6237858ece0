"""The review workbook round trip and reviewer agreement against a hand-worked kappa."""

from __future__ import annotations

import pytest
from openpyxl import load_workbook
from statsmodels.stats.inter_rater import cohens_kappa as sm_kappa
from typer.testing import CliRunner

from trek import runs
from trek.cli import app
from trek.trace.agreement import agreement
from trek.trace.records import TraceRecord, UrlMatch
from trek.trace.review import (
    AUDIT,
    CHECKLIST,
    JUDGE_CORRECT,
    NOTES,
    REFERENCE_VALID,
    TAXONOMY,
    TREKTRACE_LABELS,
    reviewer_column,
    write_review,
)
from trek.types import write_jsonl


def rec(qid, labels, *, stale=None, status="done"):
    return TraceRecord(
        question_id=qid, dataset="freshqa", question=f"Question {qid}?", answers=["A", "B"],
        gold_urls=[f"https://gold.example/{qid}"], prediction="wrong", original_outcome="incorrect",
        retrieved_urls=["https://other.example/1"],
        url_matches=[UrlMatch(gold_url=f"https://gold.example/{qid}")],
        status=status, labels=labels, stale_reference=stale, key_evidence=f"fact {qid}",
        evidence_retrieved=False, query_adequate=True, gold_only_correct=True, noise_was_run=True,
        noise_correct=False,
    )


# TrekTrace's labels and the reviewer's verdicts for seven cases.
CASES = [
    ("c1", ["Retrieval", "Distraction"], {"labels": ["Retrieval", "Distraction"]}),
    ("c2", ["Pre-retrieval", "Interpretation"], {"labels": ["Pre-retrieval", "Interpretation"]}),
    ("c3", ["Retrieval"], {"labels": ["Randomness"], "notes": "an equivalent page was retrieved"}),
    ("c4", ["Distraction"], {"labels": ["Distraction"]}),
    ("c5", ["Distraction"], {"reference": "no"}),      # reference error: excluded
    ("c6", ["Interpretation"], {"judge": "no"}),       # judge error: excluded
    ("c7", ["Randomness"], None),                      # not reviewed: excluded
]


@pytest.fixture
def workbook(tmp_path):
    run_dir = tmp_path / "run-a"
    run_dir.mkdir()
    records = [rec(q, labs, stale=(q == "c4")) for q, labs, _ in CASES] + [rec("c8", [], status="pending")]
    write_jsonl(run_dir / runs.TRACE, records)
    return write_review(run_dir)


def fill(path):
    wb = load_workbook(path)
    ws = wb[CHECKLIST]
    header = [c.value for c in ws[1]]
    col = {h: i + 1 for i, h in enumerate(header)}
    verdicts = {q: v for q, _, v in CASES}
    for r in range(2, ws.max_row + 1):
        v = verdicts[ws.cell(r, col["question_id"]).value]
        if v is None:
            continue
        ws.cell(r, col[REFERENCE_VALID], v.get("reference", "yes"))
        ws.cell(r, col[JUDGE_CORRECT], v.get("judge", "yes"))
        for lab in v.get("labels", []):
            ws.cell(r, col[reviewer_column(lab)], "yes")
        ws.cell(r, col[NOTES], v.get("notes", ""))
    wb.save(path)


def test_workbook_layout(workbook):
    wb = load_workbook(workbook)
    assert wb.sheetnames == [CHECKLIST, AUDIT, TAXONOMY]
    ws = wb[CHECKLIST]
    header = [c.value for c in ws[1]]
    assert ws.freeze_panes == "C2" and ws.auto_filter.ref
    assert ws.max_row == 1 + 7  # pending case left out
    ids = [ws.cell(r, header.index("question_id") + 1).value for r in range(2, ws.max_row + 1)]
    assert ids[0] == "c4"  # the stale-flagged case comes first
    assert ws.cell(2, header.index(TREKTRACE_LABELS) + 1).value == "Distraction"
    assert all(ws.column_dimensions[c].width >= 10 for c in "ABCDEF")
    assert ws.data_validations.dataValidation  # yes/no drop-downs on the reviewer columns
    audit = wb[AUDIT]
    assert audit.max_row == 1 + 7 and audit.cell(2, 3).value.startswith("https://gold.example/")
    tax = [r[0].value for r in wb[TAXONOMY].iter_rows(min_row=2)]
    assert tax[:5] == ["Pre-retrieval", "Retrieval", "Interpretation", "Distraction", "Randomness"]
    assert "Reference error" in tax and "Judge error" in tax


def test_agreement_round_trip_matches_the_hand_worked_kappa(workbook):
    fill(workbook)
    a = agreement(workbook)
    assert (a.cases, a.reference_errors, a.judge_errors, a.not_reviewed) == (4, 1, 1, 1)
    # 4 cases x 5 labels = 20 decisions; TrekTrace says yes 6 times, the reviewer 6 times, they
    # agree on 18: p_o = 0.9, p_e = 0.3*0.3 + 0.7*0.7 = 0.58, kappa = 0.32 / 0.42 = 16/21.
    assert a.kappa == pytest.approx(16 / 21)
    # the same from statsmodels' kappa on the 2x2 table [[yes/yes, yes/no], [no/yes, no/no]]
    assert a.kappa == pytest.approx(sm_kappa([[5, 1], [1, 13]]).kappa)
    # Retrieval: [1,0,1,0] vs [1,0,0,0]: p_o = .75, p_e = .5 -> 0.5; Randomness: p_e = .75 -> 0
    assert a.per_label.loc["Retrieval", "kappa"] == pytest.approx(0.5)
    assert a.per_label.loc["Randomness", "kappa"] == pytest.approx(0.0)
    assert a.per_label.loc["Distraction", "kappa"] == pytest.approx(1.0)
    assert a.per_label.loc["Retrieval"].tolist()[1:] == [1, 1, 0, 2]
    assert a.disagreements["case"].tolist() == ["run-a:c3"]
    assert a.disagreements["notes"].tolist() == ["an equivalent page was retrieved"]
    text = a.describe()
    assert "0.762" in text and "1 reference error" in text


def test_agreement_cli_and_errors(workbook, tmp_path):
    res = CliRunner().invoke(app, ["trace", "agreement", str(workbook)])
    assert res.exit_code == 2 and "no reviewed" in res.output  # nothing filled yet
    fill(workbook)
    res = CliRunner().invoke(app, ["trace", "agreement", str(workbook)])
    assert res.exit_code == 0 and "0.762" in res.output
    wb = load_workbook(workbook)
    wb[CHECKLIST].cell(2, [c.value for c in wb[CHECKLIST][1]].index(REFERENCE_VALID) + 1, "maybe")
    wb.save(workbook)
    with pytest.raises(ValueError, match="use yes or no"):
        agreement(workbook)


def test_review_cli(tmp_path):
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    res = CliRunner().invoke(app, ["trace", "review", str(run_dir)])
    assert res.exit_code == 2 and "trek trace" in res.output
    write_jsonl(run_dir / runs.TRACE, [rec("x", ["Retrieval"])])
    res = CliRunner().invoke(app, ["trace", "review", str(run_dir)])
    assert res.exit_code == 0 and (run_dir / "review.xlsx").exists()
