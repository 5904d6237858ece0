"""Tables behind the TrekTrace notebooks, on small hand-made traced runs; the demo trace script."""

from __future__ import annotations

import shutil

import pytest

from trek import runs
from trek.report import trace as reports
from trek.trace import records
from trek.trace.labels import LABELS
from trek.trace.records import TraceRecord
from trek.types import Question, RunMeta, write_jsonl


def rec(qid, labels, dataset="freshqa", status="done"):
    return TraceRecord(question_id=qid, dataset=dataset, question="?", answers=["a"], original_outcome="incorrect",
                       status=status, labels=labels)


@pytest.fixture
def traced(tmp_path):
    specs = {
        "m1-search": ("m1", "tavily", 0, [rec("1", ["Retrieval", "Distraction"]), rec("2", ["Interpretation"]),
                                          rec("3", ["Distraction"], "sealqa"), rec("4", [], status="pending")]),
        "m2-search": ("m2", "local", 1, [rec("1", ["Pre-retrieval"]), rec("2", ["Randomness"], "sealqa")]),
    }
    for name, (model, search, order, recs) in specs.items():
        d = tmp_path / name
        d.mkdir()
        runs.write_meta(d, RunMeta(run_id=name, kind="wild", model=model,
                                   config={"order": order, "system": {"system": "agentic", "search": search}}))
        write_jsonl(d / runs.TRACE, recs)
    (tmp_path / "untraced").mkdir()
    return tmp_path


def test_label_shares_per_run_and_dataset(traced):
    found = reports.traced_runs(runs_dir=traced)
    assert list(found) == ["m1-search", "m2-search"]
    t = reports.label_shares(found)
    assert list(t.index) == [("m1-search", "freshqa"), ("m1-search", "sealqa"), ("m1-search", "all"),
                             ("m2-search", "freshqa"), ("m2-search", "sealqa"), ("m2-search", "all")]
    all1 = t.loc[("m1-search", "all")]
    # 3 finished cases: Distraction on 2 of them, Retrieval and Interpretation on 1: shares sum past 100
    assert all1["Distraction"] == pytest.approx(66.7) and all1["Retrieval"] == pytest.approx(33.3)
    assert all1["cases"] == 3 and all1["pending"] == 1
    assert t.loc[("m1-search", "freshqa"), "pending"] == 1
    assert all1[["Pre-retrieval", "Retrieval", "Interpretation", "Distraction", "Randomness"]].sum() > 100
    fig = reports.plot_label_shares(t, "T")
    assert "need not sum to 100%" in fig._suptitle.get_text()


def test_model_search_and_post_vs_upstream(traced):
    found = reports.traced_runs(runs_dir=traced)
    ms = reports.model_search_labels(found)
    assert list(ms.index) == [("m1", "tavily (agentic)"), ("m2", "local (agentic)")]
    assert ms.loc[("m2", "local (agentic)"), "Pre-retrieval"] == 50.0
    reports.plot_model_search(ms, "T")
    pv = reports.post_vs_upstream(found)
    # m1: post on all 3, upstream on 1 -> b = 2, c = 0, exact McNemar p = 2 * 0.5^2 = 0.5
    assert pv.loc["m1-search", ["n", "n_post", "n_upstream", "b", "c"]].tolist() == [3, 3, 1, 2, 0]
    assert pv.loc["m1-search", "p"] == pytest.approx(0.5)
    assert pv.loc["m2-search", "b"] == 0 and pv.loc["m2-search", "c"] == 1


def test_traced_runs_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="trek trace"):
        reports.traced_runs(runs_dir=tmp_path)


@pytest.mark.slow
def test_demo_trace_script_shows_every_label(tmp_path):
    from _scripts import load_script

    mod = load_script("demo_trace")
    load_script("demo_runs").build_demo_runs(tmp_path / "runs")
    traced = mod.build_demo_trace(tmp_path / "runs")
    assert len(traced) == 3
    t = reports.label_shares(traced)
    assert (t[list(LABELS)].max() > 0).all()  # every label occurs somewhere
    assert t["incomplete"].sum() == 0  # the demo has every page and readable judgments
    shutil.rmtree(tmp_path / "runs")


def test_incomplete_cases_are_left_out_of_the_shares_and_counted(tmp_path):
    d = tmp_path / "r"
    d.mkdir()
    runs.write_meta(d, RunMeta(run_id="r", kind="wild", model="m", config={"system": {"system": "agentic"}}))
    write_jsonl(d / runs.TRACE, [rec("1", ["Distraction"]), rec("2", ["Pre-retrieval"], status="incomplete"),
                                 rec("3", [], status="incomplete")])
    t = reports.label_shares({"r": d})
    row = t.loc[("r", "all")]
    assert row["Distraction"] == 100.0 and row["Pre-retrieval"] == 0.0  # the incomplete case's label is not counted
    assert (row["cases"], row["incomplete"], row["pending"]) == (1, 2, 0)
    pv = reports.post_vs_upstream({"r": d})
    assert pv.loc["r", "n"] == 1 and pv.loc["r", "excluded"] == 2 and pv.loc["r", "post_pct"] == 100.0


def test_a_run_without_any_fully_traced_case_gives_no_number(tmp_path):
    d = tmp_path / "r"
    d.mkdir()
    runs.write_meta(d, RunMeta(run_id="r", kind="wild", model="m", config={"system": {"system": "agentic"}}))
    write_jsonl(d / runs.TRACE, [rec("1", ["Randomness"], status="incomplete"), rec("2", [], status="pending")])
    t = reports.label_shares({"r": d})
    assert t[list(LABELS)].isna().all().all() and t.loc[("r", "all"), "incomplete"] == 1
    pv = reports.post_vs_upstream({"r": d})
    assert pv.loc["r", "n"] == 0 and pv.loc["r", "excluded"] == 2
    assert pv[["post_pct", "upstream_pct", "p", "p_holm"]].isna().all().all()


def _with_tests(r: TraceRecord, **skipped: str) -> TraceRecord:
    r.tests = {name: records.TestRun(state="skipped", reason=why) for name, why in skipped.items()}
    return r


def _run_with_left_out_cases(tmp_path):
    d = tmp_path / "r"
    d.mkdir(parents=True)
    runs.write_meta(d, RunMeta(run_id="r", kind="wild", model="m", config={"system": {"system": "agentic"}}))
    write_jsonl(d / runs.QUESTIONS, [Question(id=str(i), dataset="freshqa", question=f"Q{i}?", answers=["a"])
                                     for i in range(1, 9)])
    write_jsonl(d / runs.TRACE, [
        rec("1", ["Distraction"]), rec("2", ["Pre-retrieval"]),
        _with_tests(rec("3", [], status="incomplete"), gold_only="no gold page", noise="needs the gold-only result"),
        _with_tests(rec("4", ["Retrieval"], status="incomplete"), gold_only="no gold page"),
        rec("5", [], status="pending"), rec("6", [], status="failed"),
    ])
    return d


def test_coverage_note_says_what_the_numbers_are_over_and_what_is_left_out(tmp_path, traced):
    d = _run_with_left_out_cases(tmp_path / "mine")
    assert reports.coverage_note({"r": d}) == (
        "n=2 fully traced; 2 incomplete (no gold page: 2, needs the gold-only result: 1), 2 pending left out")
    assert reports.coverage_note(reports.traced_runs(runs_dir=traced)) == "n=5 fully traced; 1 pending left out"
    only = {"m2": traced / "m2-search"}
    assert reports.coverage_note(only) == "n=2 fully traced; none left out"
    write_jsonl(d / runs.TRACE, [rec("1", ["Distraction"]),
                                 _with_tests(rec("3", [], status="incomplete"), gold_only="no gold page")])
    assert reports.coverage_note({"r": d}) == "n=1 fully traced; 1 incomplete (no gold page) left out"
    # the panels and rows of Figures 2 and 3 say it too
    t = reports.label_shares({"r": _run_with_left_out_cases(tmp_path / "again")})
    fig = reports.plot_label_shares(t, "T")
    assert fig.axes[0].get_title().splitlines()[0] == "r (n=2, 4 left out)"
    ms = reports.model_search_labels({"r": tmp_path / "again" / "r"})
    fig = reports.plot_model_search(ms, "T")
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["m\nnone (agentic) (n=2, 4 left out)"]
    # each cell names its share and its 95% Wilson interval over the row's n
    assert any("\n[" in t.get_text() for t in fig.axes[0].texts)


@pytest.mark.slow
def test_the_trektrace_notebooks_state_the_excluded_count(tmp_path):
    from trek.paper import run_notebook
    from trek.report.paths import repo_root

    d = _run_with_left_out_cases(tmp_path)
    params = tmp_path / "p.yaml"
    params.write_text(f"runs:\n  Left-Out-Run: {d}\n")
    note = "n=2 fully traced; 2 incomplete (no gold page: 2, needs the gold-only result: 1), 2 pending left out"
    for name in ("fig2_trektrace", "fig3_model_search", "tabA42_post_vs_upstream"):
        run_notebook(repo_root() / "notebooks" / f"{name}.ipynb", tmp_path / f"{name}.ipynb", str(params),
                     tmp_path / "out", quiet=True)
        tex = (tmp_path / "out" / "tables" / f"{name}.tex").read_text()
        assert note in tex.replace("\n", " "), (name, tex)
