"""The public face (``import trek``; :mod:`trek.api`): on copies of the recorded runs, checked
against what their files hold and against the committed tables the notebooks wrote."""

from __future__ import annotations

import csv
import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from test_trace_view import IMG, SCRIPT, _chromium, dump_dom
from typer.testing import CliRunner

import trek
from trek import api
from trek.report.paths import repo_root
from trek.trace.labels import LABELS
from trek.trace.records import TESTS

ROOT = repo_root()
WILD = ROOT / "data" / "runs" / "wild"
# Payloads for every text field; what would leave a mark in the DOM is assembled at run time.
CLOSE = "</td></table></div><script>document.body.setAttribute('data-x','BRO'+'KEN')</script>"
HOSTILE = SCRIPT + IMG + CLOSE


def val(x):
    """A cell's value, ``None`` when missing (``pd.NA``, NaN)."""
    return None if pd.isna(x) else (bool(x) if isinstance(x, (bool, type(pd.array([True])[0]))) else x)


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


@pytest.fixture
def agentic(tmp_path):
    """A copy of the recorded agentic run (every test may change its copy)."""
    return Path(shutil.copytree(WILD / "agentic", tmp_path / "agentic"))


# -- import trek -----------------------------------------------------------------------------------
def test_import_trek_loads_no_part_of_the_face_until_a_name_is_used():
    code = ("import sys, trek; before = sorted(m for m in sys.modules if m.startswith('trek') or m == 'pandas'); "
            "trek.load; after = 'trek.api' in sys.modules and 'pandas' in sys.modules; print(before, after)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "['trek'] True"


def test_the_face_names_what_it_has():
    assert set(trek.__all__) - {"__version__"} <= set(dir(trek))
    assert trek.load is api.load and trek.Run is api.Run and trek.LABELS == LABELS
    with pytest.raises(AttributeError, match="no attribute 'lod'"):
        trek.lod  # noqa: B018


def test_load_refuses_a_folder_that_is_not_a_run(tmp_path):
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        trek.load(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match=re.escape(str(tmp_path / "questions.jsonl"))):
        trek.load(tmp_path)


# -- Run.frame -------------------------------------------------------------------------------------
def test_frame_holds_what_the_run_files_hold(agentic):
    df = trek.load(agentic).frame()
    questions = lines(agentic / "questions.jsonl")
    grades = {g["question_id"]: g for g in lines(agentic / "grades.jsonl")}
    answers = {a["question_id"]: a for a in lines(agentic / "answers.jsonl")}
    traces = {t["question_id"]: t for t in lines(agentic / "trace.jsonl")}
    assert list(df.columns) == api.FRAME_COLUMNS
    assert df["question_id"].tolist() == [q["id"] for q in questions]  # one row per question, in order
    assert df["question"].tolist() == [q["question"] for q in questions]
    assert df["references"].tolist() == [tuple(q["answers"]) for q in questions]
    assert df["outcome"].tolist() == [grades[q["id"]]["outcome"] for q in questions]
    assert df["judge"].tolist() == [grades[q["id"]]["judge_model"] for q in questions]
    assert df["correct"].tolist() == [grades[q["id"]]["outcome"] == "correct" for q in questions]
    assert df["answer"].tolist() == [answers[q["id"]]["final_answer"] for q in questions]
    assert df["prompt_tokens"].tolist() == [answers[q["id"]]["usage"]["prompt_tokens"] for q in questions]
    for i, q in enumerate(questions):
        t = traces[q["id"]]  # every failure of this run is traced
        assert df.at[i, "trace_status"] == t["status"]
        assert {lab for lab in LABELS if val(df.at[i, lab]) is True} == set(t["labels"]), q["id"]
        assert all(val(df.at[i, lab]) is False for lab in LABELS if lab not in t["labels"])  # done: known
        assert set(df.at[i, "labels"].split(" + ")) == set(t["labels"])
        for name in TESTS:
            state = t["tests"].get(name, {}).get("state")
            assert val(df.at[i, f"test_{name}"]) == state
        assert val(df.at[i, "evidence_retrieved"]) == t["evidence_retrieved"]
    # counts, as a reader of the files would make them
    assert len(df) == len(questions) == 36
    assert int(df["Retrieval"].sum()) == sum("Retrieval" in t["labels"] for t in traces.values())
    # the columns are typed: categoricals for outcomes, labels, statuses and tests
    for col in ("dataset", "outcome", "answer_status", "trace_status", "labels", "grader", "judge",
                *(f"test_{t}" for t in TESTS)):
        assert isinstance(df[col].dtype, pd.CategoricalDtype), col
    assert list(df["outcome"].cat.categories[:len(api.OUTCOMES)]) == list(api.OUTCOMES)
    assert "undecided" in df["outcome"].cat.categories
    assert all(str(df[lab].dtype) == "boolean" for lab in LABELS)
    assert str(df["question"].dtype) == "string" and df["prompt_tokens"].dtype == "int64"


def _rewrite(path: Path, change) -> None:
    recs = lines(path)
    recs = [r for r in (change(r) for r in recs) if r is not None]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")


def _some_incomplete(agentic: Path) -> None:
    """mini:02 incomplete (two tests skipped), mini:03 pending, mini:04 untraced, mini:05 ungraded,
    mini:06 undecided."""
    def change(t):
        if t["question_id"] == "mini:02":  # incomplete: two tests could not run
            t["status"] = "incomplete"
            t["tests"]["gold_only"] = {"state": "skipped", "reason": "no gold page"}
            t["tests"]["queries"] = {"state": "skipped", "reason": "queries not recorded"}
            t["labels"] = ["Retrieval"]
        elif t["question_id"] == "mini:03":  # pending: no labels yet
            t["status"], t["labels"] = "pending", []
        elif t["question_id"] == "mini:04":  # never traced
            return None
        return t

    _rewrite(agentic / "trace.jsonl", change)
    _rewrite(agentic / "grades.jsonl", lambda g: None if g["question_id"] == "mini:05" else
             {**g, "outcome": "undecided"} if g["question_id"] == "mini:06" else g)


def test_frame_names_every_incomplete_test_and_marks_what_is_not_known(agentic):
    _some_incomplete(agentic)
    df = trek.load(agentic).frame().set_index("question_id")
    row = df.loc["mini:02"]
    assert row["trace_status"] == "incomplete"
    assert row["test_gold_only"] == "skipped" and row["test_queries"] == "skipped"
    assert set(row["skipped"].split("; ")) == {"queries: queries not recorded", "gold_only: no gold page"}
    assert val(row["Retrieval"]) is True and val(row["Interpretation"]) is None  # not known, not False
    skipped_rows = df[df["trace_status"] == "incomplete"]
    assert all(isinstance(s, str) and s for s in skipped_rows["skipped"])  # every incomplete case names its tests
    assert df.loc["mini:03", "trace_status"] == "pending" and pd.isna(df.loc["mini:03", "labels"])
    assert all(pd.isna(df.loc["mini:03", lab]) for lab in LABELS)
    assert df.loc["mini:04", "trace_status"] == "not_traced" and pd.isna(df.loc["mini:04", "test_retrieval"])
    assert df.loc["mini:05", "outcome"] == "ungraded" and not df.loc["mini:05", "correct"]
    assert pd.isna(df.loc["mini:05", "judge"])
    assert df.loc["mini:06", "outcome"] == "undecided" and not df.loc["mini:06", "correct"]
    assert int((df["outcome"] == "undecided").sum()) == 1


def test_label_shares_are_over_the_fully_traced_cases_and_count_the_others(agentic):
    _some_incomplete(agentic)
    df = trek.load(agentic).frame()
    # over the fully traced cases a label column's mean is the label's share (Figure 2's number)
    done = df[df["trace_status"] == "done"]
    shares = trek.load(agentic).label_shares(by_dataset=False).set_index("label")
    assert round(100 * done["Retrieval"].mean(), 1) == shares.at["Retrieval", "share"]
    assert shares.at["Retrieval", "incomplete"] == 1 and shares.at["Retrieval", "pending"] == 1


def test_a_bad_record_is_an_error_naming_file_and_line(agentic):
    with (agentic / "grades.jsonl").open("a") as fh:
        fh.write('{"question_id": "mini:99", "dataset": "freshqa"}\n')
    with pytest.raises(Exception, match=r"grades\.jsonl.*(line )?37"):
        trek.load(agentic).frame()


def test_an_outcome_the_categories_do_not_know_is_kept():
    # a newer grader's outcome (issue 49's judges may say "undecided") joins the categories
    col = api._categorical(["correct", "undecided", "weird", None], api.OUTCOMES)
    assert list(col.astype(object)[:3]) == ["correct", "undecided", "weird"] and pd.isna(col[3])
    assert list(col.categories) == [*api.OUTCOMES, "weird"]


# -- cases -------------------------------------------------------------------------------------------
def test_cases_select_by_label_and_dataset(agentic):
    run = trek.load(agentic)
    traces = lines(agentic / "trace.jsonl")
    questions = {q["id"]: q for q in lines(agentic / "questions.jsonl")}
    got = run.cases(label="Distraction", dataset="infodeepseek")
    want = [t["question_id"] for t in traces
            if "Distraction" in t["labels"] and questions[t["question_id"]]["dataset"] == "infodeepseek"]
    assert [c.question_id for c in got] == want and want
    assert len(run.cases()) == len(traces)
    with pytest.raises(ValueError, match="Interpretation"):
        run.cases(label="retrieval")
    with pytest.raises(ValueError, match="freshqa, infodeepseek, sealqa"):
        run.cases(dataset="mini")
    with pytest.raises(KeyError, match="questions.jsonl has no question 'nope'"):
        run.case("nope")
    per = run.case_per_label()
    assert list(per) == [lab for lab in LABELS if any(lab in t["labels"] for t in traces)]
    assert all(lab in c.labels for lab, c in per.items())
    assert f"<p>{len(traces)} case(s)</p>" in run.cases()._repr_html_()


def _hostile_run(agentic: Path) -> Path:
    """The copy with hostile text in every text field of one traced and one untraced question."""
    def q(rec):
        if rec["id"] in ("mini:01", "mini:02"):
            rec["question"] = f"What is {HOSTILE}?"
            rec["answers"] = [HOSTILE, "fine"]
            rec["gold_urls"] = [f"https://gold.example/{HOSTILE}"]
            rec["dataset"] = "freshqa"
        return rec

    def a(rec):
        if rec["question_id"] in ("mini:01", "mini:02"):
            rec["final_answer"] = HOSTILE
            for c in rec.get("search_calls", []):
                c["query"] = HOSTILE
        return rec

    def g(rec):
        if rec["question_id"] in ("mini:01", "mini:02"):
            rec["response"] = rec["error"] = HOSTILE
            rec["judge_model"] = rec["grader_version"] = HOSTILE
            rec["judge_raw"] = [HOSTILE]
        return rec

    def t(rec):
        if rec["question_id"] == "mini:02":
            return None
        if rec["question_id"] == "mini:01":
            rec["question"] = f"What is {HOSTILE}?"
            for field in ("prediction", "key_evidence", "retrieved_key_evidence", "evidence_reason",
                          "query_reason", "gold_only_answer", "gold_only_grade_reason", "noise_answer",
                          "noise_grade_reason", "error", "dataset"):
                rec[field] = HOSTILE
            rec["answers"] = [HOSTILE]
            rec["queries"] = [HOSTILE]
            rec["retrieved_urls"] = [f"https://x.example/{HOSTILE}"]
            rec["noise_context"] = [HOSTILE]
            rec["tests"]["noise"] = {"state": "skipped", "reason": HOSTILE}
            for s in rec["steps"]:
                s["raw"] = [HOSTILE]
                s["name"] = HOSTILE
        return rec

    _rewrite(agentic / "questions.jsonl", q)
    _rewrite(agentic / "answers.jsonl", a)
    _rewrite(agentic / "grades.jsonl", g)
    _rewrite(agentic / "trace.jsonl", t)
    return agentic


def test_the_inline_case_shows_question_and_labels_and_escapes_every_field(agentic):
    run = trek.load(_hostile_run(agentic))
    traced, untraced = run.case("mini:01"), run.case("mini:02")
    assert traced.trace is not None and untraced.trace is None
    for case in (traced, untraced):
        html = case._repr_html_()
        assert "<script" not in html and "<img" not in html and "</table></div><script" not in html
        assert html.count("<style>") == 1 and not re.search(r"""(src|href)=["']?(https?:)?//""", html)
        assert "&lt;script&gt;document.title=&#x27;PW&#x27;+&#x27;NED&#x27;&lt;/script&gt;" in html  # shown as text
        assert "What is &lt;script&gt;" in html  # the question
        # every selector of the fragment's style stays inside the fragment
        style = html.split("<style>")[1].split("</style>")[0]
        assert all(s.strip().startswith(".trek-case ") for rule in re.findall(r"([^{}]+)\{", style)
                   for s in rule.split(","))
    labels = lines(agentic / "trace.jsonl")[0]["labels"]
    html = traced._repr_html_()
    assert all(f'<span class="lab {lab}">{lab}</span>' in html for lab in labels)
    assert "not traced" in untraced._repr_html_()
    # the listing of cases is escaped too
    cases_html = run.cases()._repr_html_()
    assert "<script" not in cases_html and "<img" not in cases_html and "What is &lt;script&gt;" in cases_html


@pytest.mark.slow
@pytest.mark.skipif(_chromium() is None, reason="chromium is not installed")
def test_in_a_headless_browser_the_inline_case_runs_nothing(agentic, tmp_path):
    # a notebook puts the fragment into its own page: no Content-Security-Policy helps here,
    # escaping alone must keep the payloads inert
    raw = tmp_path / "raw.html"
    raw.write_text(f"<!DOCTYPE html><html><head><title>t</title></head><body>{SCRIPT}{IMG}{CLOSE}</body></html>")
    control = dump_dom(raw, tmp_path)
    assert "PWNED" in control and "IMGFIRED" in control and "BROKEN" in control  # they do run unescaped

    run = trek.load(_hostile_run(agentic))
    page = tmp_path / "cell.html"
    fragments = [run.case("mini:01")._repr_html_(), run.case("mini:02")._repr_html_(), run.cases()._repr_html_()]
    page.write_text("<!DOCTYPE html><html><head><title>t</title></head><body><div id='before'></div>"
                    + "".join(fragments) + "<div id='after'>end of output</div></body></html>")
    dom = dump_dom(page, tmp_path)
    assert "PWNED" not in dom and "IMGFIRED" not in dom and "BROKEN" not in dom
    assert "&lt;script&gt;document.title" in dom and "end of output" in dom
    assert dom.count('class="trek-case"') == 2 and "<details class=\"case\" open" in dom


# -- the numbers of the CLI and the figures ------------------------------------------------------------
def _csv(name: str) -> list[dict]:
    with (ROOT / "tables" / name).open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """The Wilson score interval, written out from its formula."""
    p = k / n
    mid = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return mid - half, mid + half


@pytest.mark.parametrize("name", ["agentic", "search-then-read"])
def test_label_shares_are_the_shares_of_the_fully_traced_cases(name):
    shares = trek.load(WILD / name).label_shares()
    assert list(shares.columns) == ["dataset", "label", "share", "low", "high", "n", "count", "incomplete", "pending"]
    traces = [t for t in lines(WILD / name / "trace.jsonl") if t["status"] == "done"]
    figure2 = {r["dataset"]: r for r in _csv("fig2_trektrace.csv") if r["run"] == name}
    for ds in sorted({t["dataset"] for t in traces}) + ["all"]:
        mine = [t for t in traces if ds in ("all", t["dataset"])]
        for lab in LABELS:
            k = sum(lab in t["labels"] for t in mine)
            row = shares[(shares["dataset"] == ds) & (shares["label"] == lab)].iloc[0]
            assert row["n"] == len(mine) and row["count"] == k
            assert row["share"] == round(100 * k / len(mine), 1) == float(figure2[ds][lab])
            lo, hi = wilson(k, len(mine))
            assert (row["low"], row["high"]) == (round(100 * lo, 1), round(100 * hi, 1))
    pooled = trek.load(WILD / name).label_shares(by_dataset=False)
    assert "dataset" not in pooled and len(pooled) == len(LABELS)


def test_label_shares_of_an_untraced_run_say_what_to_run():
    with pytest.raises(FileNotFoundError, match="trek trace"):
        trek.load(WILD / "no-search").label_shares()


@pytest.mark.parametrize("name", ["agentic", "search-then-read", "no-search"])
def test_accuracy_is_table_1s(name):
    acc = trek.load(WILD / name).accuracy().set_index("dataset")
    grades = lines(WILD / name / "grades.jsonl")
    table1 = {r[""]: r for r in _csv("tab1_wild_accuracy.csv")[2:]}[name]
    cols = _csv("tab1_wild_accuracy.csv")[0]
    for key, ds in cols.items():
        if ds in ("freshqa", "infodeepseek", "sealqa", "micro", "macro"):
            what = {"acc": "accuracy", "low": "low", "high": "high"}[_csv("tab1_wild_accuracy.csv")[1][key]]
            assert round(float(acc.at[ds, what]), 1) == float(table1[key]), (ds, what)
    for ds in ("freshqa", "infodeepseek", "sealqa"):
        mine = [g for g in grades if g["dataset"] == ds]
        assert acc.at[ds, "n"] == len(mine)
        assert acc.at[ds, "accuracy"] == pytest.approx(100 * sum(g["outcome"] == "correct" for g in mine) / len(mine))


def test_runs_frame_is_the_table_of_trek_runs_list():
    from trek.cli import app

    df = trek.runs_frame(WILD)
    res = CliRunner().invoke(app, ["runs", "list", str(WILD)], env={"COLUMNS": "300"})  # one line a run
    assert res.exit_code == 0, res.output
    printed = [ln.split() for ln in res.output.splitlines()[2:] if ln.strip()]
    assert [p[0] for p in printed] == df["run"].tolist() == ["agentic", "no-search", "search-then-read"]
    for p, row in zip(printed, df.itertuples(index=False), strict=True):
        assert p[1:5] == [row.system, row.model, str(row.n), f"{row.accuracy:.1f}%"]
        assert p[5:] == [f"{row.traced}/{row.failures}", f"${row.cost:.4f}", row.status]
    assert df.loc[df["run"] == "agentic", "traced"].item() == 36
    with pytest.raises(FileNotFoundError):
        trek.runs_frame(ROOT / "docs")


def test_compare_is_the_paired_runs_tables_row():
    got = trek.compare(WILD / "no-search", WILD / "search-then-read")
    row = {r["condition"]: r for r in _csv("tab_paired_runs.csv")}["search-then-read"]
    assert list(got.index) == ["search-then-read"]
    for col in ("n", "acc_ref", "acc_cond", "delta_pp", "b", "c", "p"):
        assert float(got.iloc[0][col]) == float(row[col]), col
    a = {g["question_id"]: g["outcome"] == "correct" for g in lines(WILD / "no-search" / "grades.jsonl")}
    b = {g["question_id"]: g["outcome"] == "correct" for g in lines(WILD / "search-then-read" / "grades.jsonl")}
    assert got.iloc[0]["c"] == sum(not a[q] and b[q] for q in a)  # a wrong, b right
    same = trek.compare(WILD / "agentic", trek.load(WILD / "agentic"))
    assert list(same.index) == ["b: agentic"] and same.iloc[0]["b"] == same.iloc[0]["c"] == 0


def test_a_later_record_of_a_question_wins_as_in_every_reader(agentic):
    # the record files are journals: a question graded again has its new grade on a later line
    g = next(x for x in lines(agentic / "grades.jsonl") if x["question_id"] == "mini:01")
    with (agentic / "grades.jsonl").open("a") as fh:
        fh.write(json.dumps({**g, "outcome": "correct", "judge_raw": ["regraded"]}) + "\n")
    run = trek.load(agentic)
    assert run.case("mini:01").grade.outcome == "correct" and run.case("mini:02").grade.outcome == "incorrect"
    df = run.frame().set_index("question_id")
    assert df.at["mini:01", "outcome"] == "correct" and df.at["mini:01", "grade_reason"] == "regraded"
    assert run.cases(label="Distraction")[0].grade.outcome == "correct"  # mini:01 is the first


@pytest.mark.slow
def test_the_start_up_benchmark_runs_and_reports_both_sides():
    bench = ROOT / "benchmarks" / "import_face.py"
    res = subprocess.run([sys.executable, str(bench), "--repeats", "1", "--before", "HEAD", "--json"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-2000:]
    got = json.loads(res.stdout)
    for key in ("python", "version", "import", "face", "version_before", "import_before"):
        assert got[f"{key}_cpu_s"] > 0, key
    assert got["face_cpu_s"] > got["import_cpu_s"]  # the face's first use imports pandas; import trek does not


def test_compare_with_reviews_is_the_table_of_trek_compare(tmp_path):
    from test_grade_review import IDS, make_run, write_review_csv

    from trek.cli import app
    from trek.grade_review import draw_grade_sample

    # two made-up runs of 40 questions that differ on 9 of them; both reviewed on seed 0's 20
    a = make_run(tmp_path / "A", {q: i % 3 != 0 for i, q in enumerate(IDS)})
    b = make_run(tmp_path / "B", {q: i % 4 != 0 for i, q in enumerate(IDS)})
    drawn = draw_grade_sample(a, 20, seed=0).question_ids
    ha = write_review_csv(tmp_path / "ha.csv", {q: IDS.index(q) % 3 != 0 for q in drawn})
    hb = write_review_csv(tmp_path / "hb.csv", {q: IDS.index(q) % 5 != 0 for q in drawn})  # B's judge errs
    got = trek.compare(a, b, human=(ha, hb))
    res = CliRunner().invoke(app, ["compare", str(a), str(b), "--human", str(ha), "--human", str(hb),
                                   "--out", str(tmp_path / "cli.csv")])
    assert res.exit_code == 0, res.output
    cli = pd.read_csv(tmp_path / "cli.csv")
    assert len(got) == len(cli) == 1
    for col in ("judge_difference", "judge_p", "corrected_difference", "low", "high", "p"):
        assert float(got.iloc[0][col]) == pytest.approx(float(cli.iloc[0][col]), rel=1e-5), col
    assert (got.iloc[0]["run_a"], got.iloc[0]["run_b"]) == ("A", "B")
    with pytest.raises(ValueError, match="two review files"):
        trek.compare(a, b, human=ha)
