"""`trek grade review`, `trek grade RUN --human` and `trek compare`: a random review of a run's
grades, judge-corrected accuracy and corrected paired differences, on made-up runs whose numbers
are worked out by hand (and on a copy of the recorded agentic run for the grading command)."""

from __future__ import annotations

import csv
import math
import shutil
from pathlib import Path

import pandas as pd
import pytest
from openpyxl import load_workbook
from typer.testing import CliRunner

from trek import runs
from trek.cli import app
from trek.grade_review import (
    GRADES_SHEET,
    REVIEWER,
    compare_runs,
    corrected_accuracy,
    draw_grade_sample,
    read_grade_review,
)
from trek.types import Grade, Question, Trajectory, write_jsonl

REPO = Path(__file__).resolve().parents[1]
RECORDED = REPO / "data" / "runs" / "wild" / "agentic"
runner = CliRunner()


def make_run(root: Path, correct: dict[str, bool], dataset=lambda qid: "a") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    ids = sorted(correct)
    write_jsonl(root / runs.QUESTIONS, [Question(id=q, dataset=dataset(q), question=f"{q}?", answers=["x"])
                                        for q in ids])
    write_jsonl(root / runs.ANSWERS, [Trajectory(question_id=q, model="m", final_answer="r", status="ok") for q in ids])
    write_jsonl(root / runs.GRADES, [Grade(question_id=q, dataset=dataset(q), response="r",
                                           outcome="correct" if correct[q] else "incorrect", grader="a",
                                           grader_version="v1", judge_model="j") for q in ids])
    return root


IDS = [f"q{i:02d}" for i in range(40)]


def write_review_csv(path: Path, verdicts: dict[str, bool], seed: int = 0, by: str = "") -> Path:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["question_id", "dataset", "judge_outcome", REVIEWER, "sample_seed", "sample_by"])
        for q in sorted(verdicts):
            w.writerow([q, "a", "", "yes" if verdicts[q] else "no", seed, by])
    return path


@pytest.fixture
def drawn(tmp_path):
    """The 20 of 40 questions seed 0 draws (reviewed) and the other 20, in id order."""
    run = make_run(tmp_path / "probe", dict.fromkeys(IDS, False))
    rev = list(draw_grade_sample(run, 20, seed=0).question_ids)
    return rev, [q for q in IDS if q not in rev]


# -- corrected accuracy, by hand ------------------------------------------------------------------------------
def test_corrected_accuracy_by_hand(tmp_path, drawn):
    rev, unrev = drawn
    # Reviewed (human y, judge f): 8 x (1, 1), 1 x (1, 0), 1 x (0, 1), 10 x (0, 0); unreviewed: judge 1 on 10 of 20.
    pairs = [(1, 1)] * 8 + [(1, 0)] + [(0, 1)] + [(0, 0)] * 10
    judge = {q: bool(f) for q, (_, f) in zip(rev, pairs, strict=True)} | {q: i < 10 for i, q in enumerate(unrev)}
    human = {q: bool(y) for q, (y, _) in zip(rev, pairs, strict=True)}
    run = make_run(tmp_path / "r", judge)
    review = read_grade_review(write_review_csv(tmp_path / "h.csv", human), run)
    row = corrected_accuracy(run, review).set_index("dataset").loc["all"]
    # cov_n(y, f) = 8/20 - .45 * .45 = .1975; the judge's 19 ones of 40 pooled: var = 40/39 * 19/40 * 21/40
    # = .255769; n / N_u = 1, so lam = .1975 / (2 * .255769) = .386090.
    lam = 0.1975 / (2 * (40 / 39) * (19 / 40) * (21 / 40))
    assert row["lambda"] == pytest.approx(0.386090, abs=1e-6) == pytest.approx(lam)
    # estimate = lam * 10/20 + (9/20 - lam * 9/20) = .45 + .05 lam = .469305
    assert row["corrected_accuracy"] == pytest.approx(0.469305, abs=1e-6)
    # guarded rectifier variance: cells + .5 -> (1,1) 8.5 at 1 - lam, (1,0) 1.5 at 1, (0,1) 1.5 at -lam,
    # (0,0) 10.5 at 0, of 22: mean .279050, variance .146091. se^2 = .146091/20 + lam^2 * .255769/20
    # = .0092109; t(19) = 2.093024 -> .469305 -/+ .200876.
    assert (row["low"], row["high"]) == pytest.approx((0.268429, 0.670181), abs=2e-6)
    # (narrower than the review alone: Wilson with t(19) around 9/20 is .458985 -/+ .211076)
    assert row["judge_accuracy"] == pytest.approx(19 / 40) and row["human_only_accuracy"] == pytest.approx(9 / 20)
    assert row["n"] == 40 and row["n_reviewed"] == 20 and row["estimand"] == "population"


# -- paired comparisons, by hand ------------------------------------------------------------------------------
def paired_runs(tmp_path, drawn):
    rev, unrev = drawn
    # Reviewed: A right and B wrong on 4, A wrong and B right on 2, both right on 7, both wrong on 7; the
    # judge agrees with the reviewer everywhere. Unreviewed (judge only): 5, 1, 7, 7 of the same kinds.
    kinds_rev = [(1, 0)] * 4 + [(0, 1)] * 2 + [(1, 1)] * 7 + [(0, 0)] * 7
    kinds_unrev = [(1, 0)] * 5 + [(0, 1)] * 1 + [(1, 1)] * 7 + [(0, 0)] * 7
    kinds = dict(zip(rev, kinds_rev, strict=True)) | dict(zip(unrev, kinds_unrev, strict=True))
    a = make_run(tmp_path / "A", {q: bool(k[0]) for q, k in kinds.items()})
    b = make_run(tmp_path / "B", {q: bool(k[1]) for q, k in kinds.items()})
    ha = write_review_csv(tmp_path / "ha.csv", {q: bool(kinds[q][0]) for q in rev})
    hb = write_review_csv(tmp_path / "hb.csv", {q: bool(kinds[q][1]) for q in rev})
    return a, b, ha, hb


def test_compare_by_hand(tmp_path, drawn):
    a, b, ha, hb = paired_runs(tmp_path, drawn)
    c = tmp_path / "C"
    shutil.copytree(b, c)
    hc = shutil.copy(hb, tmp_path / "hc.csv")
    t = compare_runs({"A": a, "B": b, "C": c}, {"A": read_grade_review(ha, a), "B": read_grade_review(hb, b),
                                               "C": read_grade_review(hc, c)})
    ab = t.iloc[0]
    assert (ab["run_a"], ab["run_b"]) == ("A", "B")
    # Judge only over 40: A right and B wrong on 9, the reverse on 3: difference 6/40; exact McNemar
    # p = 2 * P(X <= 3 | 12, 1/2) = 2 * (1 + 12 + 66 + 220) / 4096.
    assert ab["judge_difference"] == pytest.approx(0.15)
    assert ab["judge_p"] == pytest.approx(2 * 299 / 4096)
    # d = g on the reviewed: +1 x 4, -1 x 2 (mean .1, variance .29 = cov); g pooled over 40: +1 x 9,
    # -1 x 3, mean .15, var (ddof 1) = 40/39 * (.3 - .0225) = .284615; lam = .29 / (2 * .284615) = .509459.
    # estimate = lam * mean_unreviewed(g) (4/20) + mean(d - lam g) (.1 (1 - lam)) = .1 + .1 lam.
    assert ab["lambda"] == pytest.approx(0.29 / (2 * 0.2775 * 40 / 39))
    assert ab["corrected_difference"] == pytest.approx(0.1 + 0.1 * ab["lambda"])
    # The rectifier's variance over the 3 x 3 (d, g) table with 2/9 a cell (of 22): .139974; se^2 =
    # .139974/20 + lam^2 * .284615/20 = .0106923; t(19) 2.093024: [-.065480, .367372], p = .160689.
    assert (ab["low"], ab["high"]) == pytest.approx((-0.065480, 0.367372), abs=2e-6)
    assert ab["p"] == pytest.approx(0.160689, abs=2e-6)
    bc = t.iloc[2]
    assert (bc["run_a"], bc["run_b"], bc["corrected_difference"], bc["p"], bc["judge_p"]) == ("B", "C", 0.0, 1.0, 1.0)
    # Holm over (p, p, 1): 3p, 3p, 1.
    assert list(t["p_holm"]) == pytest.approx([3 * ab["p"], 3 * ab["p"], 1.0])
    assert not t["significant"].any()


def test_compare_cli_prints_and_writes_the_table(tmp_path, drawn):
    a, b, ha, hb = paired_runs(tmp_path, drawn)
    out = tmp_path / "cmp.csv"
    r = runner.invoke(app, ["compare", str(a), str(b), "--human", str(ha), "--human", str(hb), "--out", str(out)])
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    row = lines[lines.index(f"{a} - {b}") + 1]  # the pair on a line of its own, its figures below it
    assert "+15.1 [-6.5, +36.7]" in row and row.split()[-2:] == ["0.161", "no"], r.output
    assert lines[lines.index(f"{a} - {b}") + 2].split() == ["(0.146)", "(0.161)"]  # each p above its Holm p
    table = [x for x in lines[1:] if x != f"{a} - {b}"]  # the title and the pair's names are never cut
    assert max(len(x) for x in table) <= 80 and sum(set(x) == {"-", " "} for x in lines) == 1, r.output
    t = pd.read_csv(out)
    assert t.loc[0, "corrected_difference"] == pytest.approx(0.150946, abs=1e-6)
    r = runner.invoke(app, ["compare", str(a), str(b), "--human", str(ha)])
    assert r.exit_code == 2 and "2 runs but 1 --human file(s)" in r.output
    other = write_review_csv(tmp_path / "other.csv", dict.fromkeys(draw_grade_sample(b, 20, seed=5).question_ids,
                                                                  True), seed=5)
    r = runner.invoke(app, ["compare", str(a), str(b), "--human", str(ha), "--human", str(other)])
    assert r.exit_code == 2 and "cover different questions" in r.output


# -- the review file ------------------------------------------------------------------------------------------
def test_draw_is_reproducible_and_stratified(tmp_path):
    run = make_run(tmp_path / "r", dict.fromkeys(IDS, True), dataset=lambda q: "a" if q < "q30" else "b")
    one = draw_grade_sample(run, 8, seed=2)
    assert one == draw_grade_sample(run, 8, seed=2) and one != draw_grade_sample(run, 8, seed=3)
    strat = draw_grade_sample(run, 8, seed=2, by="dataset")
    assert strat.strata == {"a": (30, 6), "b": (10, 2)}
    assert sum(q >= "q30" for q in strat.question_ids) == 2
    with pytest.raises(ValueError, match="--sample 41: the run has only 40 question"):
        draw_grade_sample(run, 41)


def test_review_cli_writes_a_workbook_a_person_fills_in(tmp_path):
    run = make_run(tmp_path / "r", {q: i % 2 == 0 for i, q in enumerate(IDS)})
    r = runner.invoke(app, ["grade", "review", str(run), "--sample", "6", "--seed", "1"])
    assert r.exit_code == 0, r.output
    wb_path = run / "grade-review.xlsx"
    assert "6 of 40 question(s), uniform random, seed 1" in r.output
    # never replaced without --force
    r = runner.invoke(app, ["grade", "review", str(run), "--sample", "6", "--seed", "2"])
    assert r.exit_code == 2 and "may hold a person's verdicts" in r.output
    wb = load_workbook(wb_path)
    ws = wb[GRADES_SHEET]
    header = [c.value for c in ws[1]]
    col = header.index(REVIEWER) + 1
    assert header[:2] == ["question_id", "dataset"] and "judge_outcome" in header
    ids = [ws.cell(row=i, column=1).value for i in range(2, ws.max_row + 1)]
    assert ids == sorted(draw_grade_sample(run, 6, seed=1).question_ids)
    for i in range(2, ws.max_row + 1):
        ws.cell(row=i, column=col).value = "yes"
    wb.save(wb_path)
    review = read_grade_review(wb_path, run)
    assert review.correct == dict.fromkeys(ids, True) and review.sample.seed == 1
    # a blank verdict names the row and the field
    ws.cell(row=3, column=col).value = None
    wb.save(wb_path)
    with pytest.raises(ValueError, match=rf"grade-review.xlsx: row 3 \({ids[1]}\), {REVIEWER}: blank"):
        read_grade_review(wb_path, run)
    r = runner.invoke(app, ["grade", "review", str(run), "--sample", "6", "--seed", "2", "--force"])
    assert r.exit_code == 0, r.output  # replaced on request
    assert load_workbook(wb_path)[GRADES_SHEET].cell(row=3, column=col).value is None


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda rows: rows[1].update({REVIEWER: "maybe"}), r"row 3 \(q\d\d\), reviewer_correct: 'maybe'; use yes or no"),
        (lambda rows: rows[0].update({"question_id": "zz"}), r"row 2: unknown question_id 'zz'"),
        (lambda rows: rows[1].update({"question_id": rows[0]["question_id"]}), r"row 3: q\d\d is given again"),
        (lambda rows: rows[2].update({"sample_seed": "4"}), r"the rows name different draws"),
        (lambda rows: rows.pop(), r"row \d: q\d\d is not in the sample"),
    ],
)
def test_bad_review_csv_names_the_row(tmp_path, edit, message):
    run = make_run(tmp_path / "r", dict.fromkeys(IDS, True))
    path = tmp_path / "h.csv"
    r = runner.invoke(app, ["grade", "review", str(run), "--sample", "5", "--seed", "0", "--out", str(path)])
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(path.open()))
    for row in rows:
        row[REVIEWER] = "yes"
    edit(rows)
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    with pytest.raises(ValueError, match=message):
        read_grade_review(path, run)


# -- trek grade RUN --human on the recorded run ---------------------------------------------------------------
@pytest.mark.skipif(not (RECORDED / runs.GRADES).exists(), reason="the recorded runs (data/runs) are absent")
def test_grade_cli_with_human_prints_the_corrected_accuracy(tmp_path):
    run = tmp_path / "agentic"
    shutil.copytree(RECORDED, run)
    path = tmp_path / "h.csv"
    r = runner.invoke(app, ["grade", "review", str(run), "--sample", "12", "--seed", "3", "--out", str(path)])
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(path.open()))
    for row in rows:  # the reviewer finds 3 of the 12 answers correct, whatever the judge said
        row[REVIEWER] = "yes" if row["question_id"] in {x["question_id"] for x in rows[:3]} else "no"
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    plain = runner.invoke(app, ["grade", str(run), "--judge", "oracle", "--no-progress"])
    r = runner.invoke(app, ["grade", str(run), "--judge", "oracle", "--no-progress", "--human", str(path)])
    assert r.exit_code == plain.exit_code, r.output  # --human adds a table; the grading decides the exit code
    assert r.output.index("micro") < r.output.index("judge-corrected accuracy")  # after the accuracy table
    table = corrected_accuracy(run, read_grade_review(path, run)).set_index("dataset")
    allr = table.loc["all"]
    assert allr["human_only_accuracy"] == pytest.approx(0.25)
    estimate, interval = f"{100 * allr['corrected_accuracy']:.1f}", f"[{100 * allr['low']:.1f}, {100 * allr['high']:.1f}]"
    lines = r.output.split("judge-corrected accuracy", 1)[1].split("\nnot finished:", 1)[0].splitlines()[1:]
    # each estimate sits above its interval, so the table comes in one block within 80 columns
    below = [(a, b) for a, b in zip(lines, lines[1:], strict=False) if estimate in a.split() and interval in b]
    assert below and max(len(x) for x in lines) <= 80, r.output
    assert sum(set(x) == {"-", " "} for x in lines) == 1, r.output
    # the exact judge finds no answer of the recorded run correct, so the judge adds nothing: the review's own
    assert allr["judge_accuracy"] == 0.0 and allr["lambda"] == 0.0
    assert allr["corrected_accuracy"] == pytest.approx(0.25)
    assert not math.isnan(allr["low"])
    r = runner.invoke(app, ["grade", str(run), "--judge", "oracle", "--no-progress", "--human", str(tmp_path / "no")])
    assert r.exit_code == 2 and "no review file" in r.output


# -- the notebooks' tables ------------------------------------------------------------------------------------
def test_report_tables_take_the_reviews(tmp_path, drawn):
    from trek.report import wild

    a, b, ha, hb = paired_runs(tmp_path, drawn)
    acc = wild.corrected_accuracy({"A": a, "B": b}, {"A": ha, "B": hb})
    # A: 4 + 7 of the 20 reviewed right, the judge agreeing; B: 2 + 7
    assert acc.loc[("A", "all"), "human_only_accuracy"] == 55.0 and acc.loc[("B", "all"), "human_only_accuracy"] == 45.0
    assert acc.loc[("A", "all"), "judge_accuracy"] == pytest.approx(100 * (11 + 12) / 40, abs=0.05)
    sig = wild.corrected_significance({"A": a, "B": b}, {"A": ha, "B": hb})
    assert sig.loc[0, "corrected_difference"] == 15.1 and sig.loc[0, "judge_difference"] == 15.0
    with pytest.raises(ValueError, match="not among the runs"):
        wild.corrected_accuracy({"A": a}, {"Z": ha})


@pytest.mark.slow
@pytest.mark.skipif(not (RECORDED / runs.GRADES).exists(), reason="the recorded runs (data/runs) are absent")
def test_the_paired_runs_notebook_takes_reviews(tmp_path):
    from trek.paper import run_notebook
    from trek.report.paths import repo_root

    files = {}
    for name in ("agentic", "search-then-read"):
        path = tmp_path / f"{name}.csv"
        r = runner.invoke(app, ["grade", "review", str(RECORDED.parent / name), "--sample", "12", "--seed", "1",
                                "--out", str(path)])
        assert r.exit_code == 0, r.output
        rows = list(csv.DictReader(path.open()))
        for i, row in enumerate(rows):
            row[REVIEWER] = "yes" if i % 3 == 0 else "no"
        with path.open("w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        files[name] = path
    params = tmp_path / "p.yaml"
    params.write_text("runs:\n" + "".join(f"  {n}: {RECORDED.parent / n}\n" for n in files)
                      + "human:\n" + "".join(f"  {n}: {p}\n" for n, p in files.items()))
    for nb, table in (("tab_paired_runs", "tab_paired_runs_corrected"), ("tab1_wild_accuracy",
                                                                       "tab1_wild_accuracy_corrected")):
        run_notebook(repo_root() / "notebooks" / f"{nb}.ipynb", tmp_path / f"{nb}.ipynb", str(params),
                     tmp_path / "out", quiet=True)
        tex = (tmp_path / "out" / "tables" / f"{table}.tex").read_text()
        assert "PPI++" in tex
