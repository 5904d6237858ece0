"""`trek trace review --sample` and `trek trace shares`: a random review sample, human verdicts in,
label shares corrected by prediction-powered inference."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from openpyxl import load_workbook
from typer.testing import CliRunner

from trek import runs
from trek.cli import app
from trek.stats import prediction_powered_share
from trek.trace.labels import LABELS
from trek.trace.pipeline import load_trace
from trek.trace.records import Step, TraceRecord
from trek.trace.review import CHECKLIST, SAMPLE, read_sample, reviewer_column, write_review
from trek.trace.shares import audit_labels, draw_sample, judge_labels, read_human, shares_table
from trek.types import write_jsonl

REPO = Path(__file__).resolve().parents[1]
RECORDED = REPO / "data" / "runs" / "wild" / "agentic"
runner = CliRunner()

# 90 cases over three datasets with a deterministic mix of labels.
MIX = [("Retrieval", "Distraction"), ("Pre-retrieval", "Interpretation"), ("Interpretation",), ("Randomness",),
       ("Retrieval",), ("Pre-retrieval", "Distraction")]


def rec(i: int, labels, status="done") -> TraceRecord:
    return TraceRecord(question_id=f"q{i:03d}", dataset=("freshqa", "sealqa", "infodeepseek")[i % 3],
                       question=f"Question {i}?", answers=["A"], original_outcome="incorrect", status=status,
                       labels=list(labels))


@pytest.fixture
def run_dir(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    records = [rec(i, MIX[(i * 7) % len(MIX)]) for i in range(90)] + [rec(90, [], status="pending")]
    write_jsonl(d / runs.TRACE, records)
    return d


def write_csv(path: Path, rows: list[dict]) -> Path:
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["question_id", *LABELS])
        w.writeheader()
        w.writerows(rows)
    return path


def human_rows(records, ids, change=lambda labs: labs):
    by_id = {r.question_id: r for r in records}
    return [{"question_id": q, **{lab: int(lab in change(set(by_id[q].labels))) for lab in LABELS}} for q in ids]


# -- the sample ------------------------------------------------------------------------------------------
def test_sample_is_reproducible_by_seed_and_only_fully_traced(run_dir):
    records = load_trace(run_dir)
    a = draw_sample(records, 20, seed=7)
    b = draw_sample(list(reversed(records)), 20, seed=7)  # file order does not matter
    c = draw_sample(records, 20, seed=8)
    assert a.question_ids == b.question_ids
    assert a.question_ids != c.question_ids
    assert len(set(a.question_ids)) == 20 and "q090" not in a.question_ids  # the pending case is never drawn
    assert a.population == 90


def test_stratified_sample_allocates_proportionally(run_dir):
    s = draw_sample(load_trace(run_dir), 10, seed=1, by="dataset")
    # 30 cases per dataset, 10 draws: 4/3/3 by largest remainders, ties broken by name
    assert s.strata == {"freshqa": (30, 4), "infodeepseek": (30, 3), "sealqa": (30, 3)}
    by_id = {r.question_id: r.dataset for r in load_trace(run_dir)}
    assert sorted(by_id[q] for q in s.question_ids).count("freshqa") == 4


def test_sample_draws_look_uniform(run_dir):
    # Over many seeds every case is drawn about equally often (20 of 90 each time).
    records = load_trace(run_dir)
    counts = np.zeros(90)
    for seed in range(900):
        for q in draw_sample(records, 20, seed=seed).question_ids:
            counts[int(q[1:])] += 1
    expected = 900 * 20 / 90
    assert counts.min() > 0.7 * expected and counts.max() < 1.3 * expected


def test_review_cli_sample_records_seed_and_ids(run_dir, tmp_path):
    out1, out2 = tmp_path / "a.xlsx", tmp_path / "b.xlsx"
    for out in (out1, out2):
        r = runner.invoke(app, ["trace", "review", str(run_dir), "--sample", "12", "--seed", "3", "--out", str(out)])
        assert r.exit_code == 0, r.output
        assert "12 of 90 fully traced case(s), uniform random, seed 3" in r.output
    s1, s2 = read_sample(out1), read_sample(out2)
    assert s1 is not None and s1.seed == 3 and s1.question_ids == s2.question_ids
    assert s1.question_ids == draw_sample(load_trace(run_dir), 12, seed=3).question_ids
    wb = load_workbook(out1, read_only=True)
    checklist_ids = [row[1] for row in wb[CHECKLIST].iter_rows(min_row=2, values_only=True)]
    assert sorted(checklist_ids) == list(s1.question_ids)
    fields = {row[0]: row[1] for row in wb[SAMPLE].iter_rows(min_row=2, values_only=True)}
    assert fields["selection"] == "uniform random" and fields["seed"] == 3 and fields["population"] == 90
    wb.close()


def test_review_cli_sample_larger_than_the_run_is_refused(run_dir):
    r = runner.invoke(app, ["trace", "review", str(run_dir), "--sample", "500"])
    assert r.exit_code == 2
    assert "only 90 fully traced case(s)" in r.output


def test_prefilled_csv_holds_the_trace_labels(run_dir, tmp_path):
    out = tmp_path / "s.csv"
    r = runner.invoke(app, ["trace", "review", str(run_dir), "--sample", "6", "--seed", "2", "--prefill",
                            "--out", str(out)])
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(out.open()))
    by_id = {x.question_id: x for x in load_trace(run_dir)}
    assert [x["question_id"] for x in rows] == list(draw_sample(load_trace(run_dir), 6, seed=2).question_ids)
    for x in rows:
        assert {lab for lab in LABELS if x[lab] == "1"} == set(by_id[x["question_id"]].labels)


# -- human verdicts in -------------------------------------------------------------------------------------
def fill_workbook(path: Path, marks: dict[str, set[str]]) -> None:
    wb = load_workbook(path)
    ws = wb[CHECKLIST]
    header = [c.value for c in ws[1]]
    for row in ws.iter_rows(min_row=2):
        qid = row[header.index("question_id")].value
        if qid in marks:
            for lab in LABELS:
                row[header.index(reviewer_column(lab))].value = "yes" if lab in marks[qid] else "no"
    wb.save(path)


def test_filled_workbook_is_read_with_its_sample(run_dir, tmp_path):
    records = load_trace(run_dir)
    sample = draw_sample(records, 9, seed=5)
    path = write_review(run_dir, tmp_path / "r.xlsx", sample=sample)
    by_id = {r.question_id: r for r in records}
    fill_workbook(path, {q: set(by_id[q].labels) - {"Distraction"} for q in sample.question_ids})
    human = read_human(path, records)
    assert human.sample == sample
    assert human.labels == {q: frozenset(set(by_id[q].labels) - {"Distraction"}) for q in sample.question_ids}


def test_workbook_with_a_skipped_sampled_case_names_the_row(run_dir, tmp_path):
    records = load_trace(run_dir)
    sample = draw_sample(records, 5, seed=5)
    path = write_review(run_dir, tmp_path / "r.xlsx", sample=sample)
    fill_workbook(path, {q: {"Retrieval"} for q in sample.question_ids[1:]})
    with pytest.raises(ValueError, match=rf"checklist row \d \({sample.question_ids[0]}\): not reviewed"):
        read_human(path, records)


def test_hand_picked_workbook_is_refused_or_flagged(run_dir, tmp_path):
    records = load_trace(run_dir)
    path = write_review(run_dir, tmp_path / "all.xlsx")  # no --sample: every case listed
    fill_workbook(path, {"q001": {"Retrieval"}, "q002": {"Randomness"}})  # the reviewer picked two
    with pytest.raises(ValueError, match="not shown to be a random sample"):
        read_human(path, records)
    human = read_human(path, records, allow_unsampled=True)
    assert human.sample is None
    table = shares_table(records, judge_labels(records), human)
    assert set(table["sample"]) == {"not random"}
    r = runner.invoke(app, ["trace", "shares", str(run_dir), "--human", str(path)])
    assert r.exit_code == 2 and "not shown to be a random sample" in r.output
    r = runner.invoke(app, ["trace", "shares", str(run_dir), "--human", str(path), "--allow-unsampled"])
    assert r.exit_code == 0 and "NOT a random sample" in r.output


def test_a_fully_reviewed_workbook_without_sample_is_a_census(tmp_path):
    d = tmp_path / "small"
    d.mkdir()
    write_jsonl(d / runs.TRACE, [rec(i, MIX[i % len(MIX)]) for i in range(6)])
    records = load_trace(d)
    path = write_review(d, tmp_path / "all.xlsx")
    fill_workbook(path, {r.question_id: set(r.labels) - {"Retrieval"} for r in records})
    human = read_human(path, records)
    assert human.sample is not None and human.sample.selection == "every case (census)"
    t = shares_table(records, judge_labels(records), human).set_index("label")
    # every case reviewed: the corrected share is the human share exactly
    assert t.loc["Retrieval", "corrected_share"] == 0.0 and t.loc["Retrieval", "judge_share"] == pytest.approx(2 / 6)


def test_shares_cli_rejects_bad_options(run_dir, tmp_path):
    r = runner.invoke(app, ["trace", "shares", str(run_dir), "--seed", "3"])
    assert r.exit_code == 2 and "go with --human FILE" in r.output
    r = runner.invoke(app, ["trace", "shares", str(run_dir), "--labels-from", "audit"])
    assert r.exit_code == 2 and "have no audit verdicts" in r.output
    r = runner.invoke(app, ["trace", "shares", str(run_dir), "--human", str(tmp_path / "none.csv")])
    assert r.exit_code == 2 and "no human review file" in r.output


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda rows: rows.__setitem__(2, {**rows[2], "question_id": "nope"}), r"row 4: unknown question_id 'nope'"),
        (lambda rows: rows.__setitem__(1, {**rows[1], "question_id": "q090"}), r"row 3: q090 is not fully traced"),
        (lambda rows: rows.__setitem__(3, {**rows[3], "Retrieval": 2}), r"row 5 \(q\d+\), Retrieval: '2'; use 0 or 1"),
        (lambda rows: rows.__setitem__(0, {**rows[0], "Randomness": "yes"}), r"row 2 \(q\d+\), Randomness: 'yes'"),
        (lambda rows: rows.__setitem__(4, {**rows[4], "Distraction": ""}), r"row 6 \(q\d+\), Distraction: a blank"),
        (lambda rows: rows.append(dict(rows[0])), r"row 10: q\d+ is given again \(first on row 2\)"),
    ],
)
def test_bad_human_csv_names_the_row(run_dir, tmp_path, edit, message):
    records = load_trace(run_dir)
    rows = human_rows(records, draw_sample(records, 8, seed=0).question_ids)
    edit(rows)
    path = write_csv(tmp_path / "h.csv", rows)
    with pytest.raises(ValueError, match=message):
        read_human(path, records, seed=0)
    r = runner.invoke(app, ["trace", "shares", str(run_dir), "--human", str(path), "--seed", "0"])
    assert r.exit_code == 2
    assert "Traceback" not in r.output and "h.csv" in r.output


def test_csv_id_outside_the_sample_names_the_row(run_dir, tmp_path):
    records = load_trace(run_dir)
    ids = list(draw_sample(records, 8, seed=0).question_ids)
    outsider = next(r.question_id for r in records if r.status == "done" and r.question_id not in ids)
    ids[5] = outsider
    path = write_csv(tmp_path / "h.csv", human_rows(records, ids))
    with pytest.raises(ValueError, match=rf"row 7: {outsider} is not in the sample \(8 of 90"):
        read_human(path, records, seed=0)


def test_csv_missing_a_label_column(run_dir, tmp_path):
    path = tmp_path / "h.csv"
    path.write_text("question_id,Retrieval\nq001,1\n")
    with pytest.raises(ValueError, match="missing column\\(s\\) Pre-retrieval, Interpretation"):
        read_human(path, load_trace(run_dir), seed=0)


# -- the corrected shares ----------------------------------------------------------------------------------
def test_human_equal_to_judge_moves_only_toward_the_reviewed_judge_share(run_dir, tmp_path):
    records = load_trace(run_dir)
    sample = draw_sample(records, 30, seed=4)
    path = write_csv(tmp_path / "h.csv", human_rows(records, sample.question_ids))
    judge = judge_labels(records)
    human = read_human(path, records, seed=4)
    # The population rate: between the judge's share of the unreviewed and of the reviewed cases.
    table = shares_table(records, judge, human).set_index("label")
    assert (table["estimand"] == "population").all()
    for lab in LABELS:
        row = table.loc[lab]
        f_u = np.array([lab in judge[q] for q in sorted(judge) if q not in sample.question_ids])
        f_n = np.array([lab in judge[q] for q in sample.question_ids])
        lo, hi = sorted([f_u.mean(), f_n.mean()])
        assert lo - 1e-9 <= row["corrected_share"] <= hi + 1e-9, lab
        assert row["low"] <= row["corrected_share"] <= row["high"]
    # The share among the traced cases: between the judge's share of all and of the reviewed cases.
    table = shares_table(records, judge, human, estimand="traced").set_index("label")
    assert (table["estimand"] == "traced").all()
    for lab in LABELS:
        row = table.loc[lab]
        f_all = np.array([lab in judge[q] for q in sorted(judge)])
        f_n = np.array([lab in judge[q] for q in sample.question_ids])
        lo, hi = sorted([f_all.mean(), f_n.mean()])
        assert lo - 1e-9 <= row["corrected_share"] <= hi + 1e-9, lab
        assert row["judge_low"] <= row["corrected_share"] <= row["judge_high"], lab
        assert row["low"] <= row["corrected_share"] <= row["high"]
        # untuned (lam = 1) it is the judge's share exactly
        assert prediction_powered_share(f_all, f_n, f_n, tuned=False)[0] == pytest.approx(row["judge_share"])
        assert row["n_reviewed"] == 30 and row["n_traced"] == 90


def test_human_removing_a_label_lowers_its_corrected_share(run_dir, tmp_path):
    records = load_trace(run_dir)
    sample = draw_sample(records, 30, seed=4)
    rows = human_rows(records, sample.question_ids, change=lambda labs: labs - {"Distraction"})
    path = write_csv(tmp_path / "h.csv", rows)
    table = shares_table(records, judge_labels(records), read_human(path, records, seed=4)).set_index("label")
    d = table.loc["Distraction"]
    assert d["human_only_share"] == 0.0
    assert d["corrected_share"] < d["judge_share"]
    assert d["high"] < d["judge_share"]  # and its interval excludes the judge's share here


def test_shares_cli_without_human_says_how_to_correct(run_dir, tmp_path):
    out = tmp_path / "shares.csv"
    r = runner.invoke(app, ["trace", "shares", str(run_dir), "--by", "dataset", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "trek trace review" in r.output and "--sample" in r.output and "--human" in r.output
    t = pd.read_csv(out)
    assert len(t) == 4 * len(LABELS)  # three datasets and all
    allr = t[t["dataset"] == "all"].set_index("label")
    # 90 cases, MIX cycles through six label sets, so each set appears 15 times
    assert allr.loc["Retrieval", "judge_share"] == pytest.approx(30 / 90)
    assert allr["corrected_share"].isna().all() and (allr["n_reviewed"] == 0).all()


def test_shares_cli_with_workbook_writes_the_columns(run_dir, tmp_path):
    records = load_trace(run_dir)
    wb = tmp_path / "r.xlsx"
    r = runner.invoke(app, ["trace", "review", str(run_dir), "--sample", "15", "--seed", "1", "--by", "dataset",
                            "--out", str(wb)])
    assert r.exit_code == 0, r.output
    by_id = {x.question_id: x for x in records}
    fill_workbook(wb, {q: set(by_id[q].labels) for q in read_sample(wb).question_ids})
    out = tmp_path / "shares.csv"
    r = runner.invoke(app, ["trace", "shares", str(run_dir), "--human", str(wb), "--by", "dataset", "--alpha", "0.1",
                            "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "corrected %" in r.output and "[90% CI]" in r.output and "stratified by dataset" in r.output
    table = r.output.split("\ncorrected estimand:", 1)[1].split("\n", 1)[1].split("\nwrote ", 1)[0].splitlines()
    assert max(len(x) for x in table) <= 80 and sum(set(x) == {"-", " "} for x in table) == 1, r.output  # one block
    t = pd.read_csv(out)
    for _, row in t[t["n_reviewed"] > 0].iterrows():  # each estimate above its interval, the label below the dataset
        at = next(i for i, x in enumerate(table[:-1]) if x.split()[:1] == [row["dataset"]] and
                  x.split()[2:3] == [f"{100 * row['judge_share']:.1f}"] and table[i + 1].split()[:1] == [row["label"]])
        assert f"[{100 * row['low']:.1f}, {100 * row['high']:.1f}]" in table[at + 1]
    t = pd.read_csv(out)
    for col in ("n_traced", "n_reviewed", "judge_share", "judge_low", "judge_high", "corrected_share", "low", "high",
                "human_only_share", "human_low", "human_high"):
        assert col in t.columns
    assert (t.loc[t["dataset"] != "all", "n_reviewed"] == 5).all()
    assert (t["low"] <= t["corrected_share"] + 1e-12).all() and (t["corrected_share"] <= t["high"] + 1e-12).all()


# -- the audit judge's labels ------------------------------------------------------------------------------
def _step(name: str, value: dict) -> Step:
    return Step(name=name, role="analysis", model="m", endpoint="e", template="t", version="v", status="ok",
                value=value)


def test_audit_labels_follow_the_audit_verdicts():
    r = TraceRecord(question_id="x", dataset="d", question="?", answers=["a"], original_outcome="incorrect",
                    status="done", evidence_retrieved=False, query_adequate=True, gold_only_correct=True,
                    noise_was_run=True, noise_correct=False, labels=["Retrieval", "Distraction"],
                    audit_steps=[_step("evidence_match", {"evidence_match": True}),
                                 _step("query_adequacy", {"query_adequate": False}),
                                 _step("gold_only_grade", {"correct": True}),
                                 _step("noise_grade", {"correct": True})])
    assert audit_labels(r) == ("Randomness",)  # the audit judge saw the evidence and both probes right
    r2 = r.model_copy(update={"audit_steps": [_step("evidence_match", {"evidence_match": False}),
                                              _step("query_adequacy", {"query_adequate": False}),
                                              _step("gold_only_grade", {"correct": False})]})
    assert audit_labels(r2) == ("Pre-retrieval", "Interpretation")


@pytest.mark.skipif(not (RECORDED / runs.TRACE).exists(), reason="the recorded runs (data/runs) are absent")
def test_recorded_review_file_reproduces(tmp_path):
    # data/runs/README.md: the stand-in review is the exact judge's labels of a random sample.
    run = tmp_path / "agentic"
    shutil.copytree(RECORDED, run)
    out = tmp_path / "review.csv"
    done = sum(r.status == "done" for r in load_trace(run))
    size = -(-done // 3)  # the recording samples a third of its fully traced cases (trek.experiments)
    r = runner.invoke(app, ["trace", "review", str(run), "--sample", str(size), "--seed", "0", "--by", "dataset",
                            "--prefill", "--out", str(out)])
    assert r.exit_code == 0, r.output
    recorded = RECORDED / "review-sample-exact.csv"
    assert out.read_text() == recorded.read_text()
    records = load_trace(run)
    table = shares_table(records, judge_labels(records, "audit"),
                         read_human(recorded, records, seed=0, by="dataset")).set_index("label")
    truth = {lab: np.mean([lab in r.labels for r in records if r.status == "done"]) for lab in LABELS}
    for lab in LABELS:  # on this recording every corrected interval holds the exact judge's share
        assert table.loc[lab, "low"] <= truth[lab] <= table.loc[lab, "high"], lab


# -- Figure 2 with a review ---------------------------------------------------------------------------------
def test_figure2_corrected_bars_show_judge_and_corrected_with_n_and_big_n(run_dir, tmp_path):
    from trek.report import trace as reports

    records = load_trace(run_dir)
    sample = draw_sample(records, 30, seed=4)
    path = write_csv(tmp_path / "h.csv", human_rows(records, sample.question_ids,
                                                   change=lambda labs: labs - {"Distraction"}))
    t = reports.corrected_shares({"r": run_dir}, {"r": path}, seed=4)
    assert reports.corrected_caption(t) == ("corrected (PPI++, 95% interval) by a random review of n=30 of N=90 "
                                            "fully traced cases")
    d = t.loc[("r", "Distraction")]
    assert d["corrected_share"] < d["judge_share"]  # in %, as Figure 2
    assert d["judge_share"] == pytest.approx(100 * 30 / 90, abs=0.05)
    fig = reports.plot_corrected_shares(t, "T")
    ax = fig.axes[0]
    assert ax.get_title() == "r (n=30 of N=90)"
    heights = [round(b.get_height(), 1) for b in ax.patches]
    assert len(heights) == 2 * len(LABELS)  # a judge and a corrected bar per label
    assert heights[len(LABELS) + LABELS.index("Distraction")] == round(d["corrected_share"], 1)
    with pytest.raises(ValueError, match="not among the traced runs"):
        reports.corrected_shares({"r": run_dir}, {"other": path}, seed=4)


@pytest.mark.slow
@pytest.mark.skipif(not (RECORDED / runs.TRACE).exists(), reason="the recorded runs (data/runs) are absent")
def test_the_fig2_notebook_takes_a_human_review(tmp_path):
    from trek.paper import run_notebook
    from trek.report.paths import repo_root

    params = tmp_path / "p.yaml"
    params.write_text(f"runs:\n  agentic: {RECORDED}\nhuman:\n  agentic: {RECORDED / 'review-sample-exact.csv'}\n"
                      "human_seed: 0\nhuman_sample_by: dataset\nlabels_from: audit\n")
    run_notebook(repo_root() / "notebooks" / "fig2_trektrace.ipynb", tmp_path / "fig2.ipynb", str(params),
                 tmp_path / "out", quiet=True)
    tex = (tmp_path / "out" / "tables" / "fig2_trektrace_corrected.tex").read_text().replace("\n", " ")
    done = sum(r.status == "done" for r in load_trace(RECORDED))
    assert f"random review of n={-(-done // 3)} of N={done} fully traced cases" in tex  # a third, as recorded
    assert (tmp_path / "out" / "figures" / "fig2_trektrace_corrected.png").exists()


# -- the estimand -------------------------------------------------------------------------------------------
@pytest.mark.skipif(not (RECORDED / runs.TRACE).exists(), reason="the recorded runs (data/runs) are absent")
@pytest.mark.parametrize("estimand", [None, "traced"])
def test_shares_cli_on_the_recorded_run_equals_the_functions(tmp_path, estimand):
    from trek.stats import ppi_mean

    out = tmp_path / "shares.csv"
    review = RECORDED / "review-sample-exact.csv"
    args = ["trace", "shares", str(RECORDED), "--human", str(review), "--seed", "0", "--sample-by", "dataset",
            "--labels-from", "audit", "--by", "dataset", "--out", str(out)]
    r = runner.invoke(app, args + (["--estimand", estimand] if estimand else []))
    assert r.exit_code == 0, r.output
    t = pd.read_csv(out, keep_default_na=False)
    want = estimand or "population"
    # a dataset none of whose cases was reviewed has no corrected share (and says no estimand)
    unreviewed = t["n_reviewed"] == 0
    assert set(t.loc[~unreviewed, "estimand"]) == {want}
    assert set(t.loc[unreviewed, "estimand"]) <= {""} and (t.loc[unreviewed, "corrected_share"] == "").all()
    assert f"corrected estimand: {want}" in r.output
    # The same labels read here without trek.trace.shares: the audit judge's, the review CSV's.
    done = [x for x in load_trace(RECORDED) if x.status == "done"]
    judge = {x.question_id: set(audit_labels(x)) for x in done}
    with review.open(newline="") as fh:
        human = {row["question_id"]: {lab for lab in LABELS if row[lab] == "1"} for row in csv.DictReader(fh)}
    dataset = {x.question_id: x.dataset for x in done}
    rev = sorted(human)
    unrev = sorted(q for q in judge if q not in human)
    for lab in LABELS:
        def f(ids, lab=lab):
            return [int(lab in judge[q]) for q in ids]
        y = [int(lab in human[q]) for q in rev]
        for ds in sorted(set(dataset.values())):
            row = t[(t["dataset"] == ds) & (t["label"] == lab)].iloc[0]
            r_ds = [q for q in rev if dataset[q] == ds]
            if not r_ds:  # not reviewed: nothing to correct with (checked above)
                continue
            u_ds = [q for q in unrev if dataset[q] == ds]
            y_ds = [int(lab in human[q]) for q in r_ds]
            if want == "population":
                expected = ppi_mean(f(u_ds), f(r_ds), y_ds)
            else:
                expected = prediction_powered_share(f(sorted(r_ds + u_ds)), f(r_ds), y_ds)
            assert tuple(float(row[c]) for c in ("corrected_share", "low", "high")) == pytest.approx(expected, abs=2e-6), (ds, lab)
        row = t[(t["dataset"] == "all") & (t["label"] == lab)].iloc[0]
        if want == "population" and {dataset[q] for q in rev} == set(dataset.values()):
            # the sample is stratified by dataset, each stratum reviewed: the stratified form
            expected = ppi_mean(f(unrev), f(rev), y, strata_unreviewed=[dataset[q] for q in unrev],
                                strata_reviewed=[dataset[q] for q in rev])
        elif want == "population":  # a stratum without a reviewed case: the plain form
            expected = ppi_mean(f(unrev), f(rev), y)
        else:
            expected = prediction_powered_share(f(sorted(judge)), f(rev), y)
        assert tuple(float(row[c]) for c in ("corrected_share", "low", "high")) == pytest.approx(expected, abs=2e-6), lab


def test_shares_estimand_is_checked(run_dir, tmp_path):
    r = runner.invoke(app, ["trace", "shares", str(run_dir), "--estimand", "sample"])
    assert r.exit_code == 2 and "--estimand must be one of population, traced" in r.output


# -- the review planner -------------------------------------------------------------------------------------
def test_review_plan_without_and_with_a_pilot(run_dir, tmp_path):
    r = runner.invoke(app, ["trace", "review", str(run_dir), "--plan", "10"])
    assert r.exit_code == 0, r.output
    assert "+/- 10 points" in r.output and "review a small random pilot" in r.output
    assert not (run_dir / "review.xlsx").exists()  # a plan writes nothing
    records = load_trace(run_dir)
    sample = draw_sample(records, 20, seed=2)
    pilot = write_csv(tmp_path / "pilot.csv", human_rows(records, sample.question_ids))
    r = runner.invoke(app, ["trace", "review", str(run_dir), "--plan", "10", "--human", str(pilot), "--seed", "2"])
    assert r.exit_code == 0, r.output
    assert "with the judge" in r.output and "20 reviewed cases" in r.output
    from trek.trace.shares import plan_reviews

    t = plan_reviews(records, judge_labels(records), 0.10, read_human(pilot, records, seed=2)).set_index("label")
    # the pilot's person agrees with the judge: the judge never costs reviews and saves some (NaN: more than 90)
    with_judge, alone = t["reviews_with_judge"].fillna(np.inf), t["reviews_alone"].fillna(np.inf)
    assert (with_judge <= alone).all() and (with_judge < alone).sum() >= 2
    r = runner.invoke(app, ["trace", "review", str(run_dir), "--human", str(pilot)])
    assert r.exit_code == 2 and "--human goes with --plan" in r.output


def test_review_design_stratified_is_by_dataset(run_dir, tmp_path):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    assert runner.invoke(app, ["trace", "review", str(run_dir), "--sample", "9", "--design", "stratified",
                               "--out", str(a)]).exit_code == 0
    assert runner.invoke(app, ["trace", "review", str(run_dir), "--sample", "9", "--by", "dataset",
                               "--out", str(b)]).exit_code == 0
    assert a.read_text() == b.read_text()
    r = runner.invoke(app, ["trace", "review", str(run_dir), "--sample", "9", "--design", "uniform", "--by",
                            "dataset", "--out", str(tmp_path / "c.csv")])
    assert r.exit_code == 2 and "disagree" in r.output
