"""Ctrl report builders on a tiny hand-made grid whose numbers can be worked out by hand."""

import pandas as pd
import pytest

from trek.report import ctrl as reports

QIDS = ["q1", "q2", "q3", "q4"]
DATASETS = ["freshqa", "freshqa", "sealqa", "sealqa"]


def grid(rows):
    """rows: {(method, condition): [correct per question]} -> the long frame load_ctrl returns."""
    out = []
    for (method, cond), correct in rows.items():
        for qid, ds, c in zip(QIDS, DATASETS, correct, strict=True):
            out.append({"run": f"m__{method}__{cond}", "model": "m", "method": method, "condition": cond,
                        "question_id": qid, "dataset": ds, "answer_status": "ok",
                        "outcome": "correct" if c else "incorrect", "correct": bool(c)})
    return pd.DataFrame(out)


DF = grid({
    ("direct", "GOLD"): [1, 1, 1, 1],
    ("direct", "OO"): [1, 1, 1, 0],
    ("direct", "MND"): [0, 0, 1, 0],
    ("direct", "SAA"): [0, 0, 0, 0],
    ("filter", "OO"): [1, 1, 1, 1],
    ("direct", "OO:timeswap"): [0, 1, 1, 0],
    ("direct", "OO:gold=first"): [1, 1, 1, 1],
    ("direct", "OO:gold=last"): [0, 0, 1, 1],
    ("direct", "OO:k=5"): [1, 1, 0, 0],
    ("direct", "OO:k=10"): [1, 0, 1, 0],
})


def test_micro_table_with_points_from_gold_only():
    t = reports.ctrl_micro(DF, conditions=("OO", "MND", "SAA"))
    assert t.loc[("m", "direct"), ["Gold-only", "OO", "OO Δ", "MND", "MND Δ", "SAA"]].tolist() == [
        100.0, 75.0, -25.0, 25.0, -75.0, 0.0]
    assert t.loc[("m", "filter"), "OO Δ"] == 0.0 and list(t.index.get_level_values(1)) == ["direct", "filter"]


def test_per_dataset_table_ends_each_method_with_micro():
    t = reports.ctrl_by_dataset(DF, conditions=("OO", "MND"))
    assert t.loc[("m", "direct", "freshqa"), "OO"] == 100.0 and t.loc[("m", "direct", "sealqa"), "OO"] == 50.0
    assert t.loc[("m", "direct", "micro"), "MND"] == 25.0 and t.loc[("m", "direct", "micro"), "n"] == 4


def test_table9_exact_mcnemar_and_holm():
    t = reports.ctrl_vs_oo(DF, conditions=("MND", "SAA"))
    # OO vs MND: b = 2 (q1, q2), c = 0 -> p = 2 * 0.5**2 = 0.5; OO vs SAA: b = 3 -> p = 0.25
    assert t.loc[("m", "MND"), ["b", "c", "p"]].tolist() == [2, 0, 0.5]
    assert t.loc[("m", "SAA"), "p"] == 0.25 and t.loc[("m", "SAA"), "delta_pp"] == -75.0
    assert t["p_holm"].tolist() == [0.5, 0.5]  # Holm: 2 x 0.25 = 0.5, then max(0.5, 0.5)


def test_metadata_swap_position_and_budget():
    swaps = reports.metadata_swap(DF)
    assert list(swaps.index) == [("m", "OO:timeswap")]  # SAA:domainswap not run here
    assert swaps.iloc[0][["b", "c", "p"]].tolist() == [1, 0, 1.0]
    pairs = reports.position_pairs(DF)
    assert pairs.iloc[0][["acc_a", "acc_b", "p"]].tolist() == [100.0, 50.0, 0.5]
    assert reports.position_table(DF)["correct"].tolist() == [4, 2]
    q = reports.budget_cochran(DF)
    # two budgets: Cochran's Q equals McNemar's chi-square (b - c)^2 / (b + c) = 0 with b = c = 1
    assert q.loc["m", "Q"] == pytest.approx(0.0) and q.loc["m", "df"] == 1
    with pytest.raises(ValueError, match="no direct runs"):
        reports.ctrl_vs_oo(DF[DF["condition"] != "OO"])


def test_title_names_model_and_data(tmp_path):
    from trek import runs
    from trek.types import Question, RunMeta

    def run(name, qids, **config):
        d = tmp_path / name
        runs.write_meta(d, RunMeta(run_id=name, kind="ctrl", model="m", config=config))
        runs.write_records(d, runs.QUESTIONS, [Question(id=q, dataset="freshqa", question="?", answers=["a"])
                                               for q in qids])
        return d

    df = DF.copy()
    df.attrs["run_dirs"] = {"a": run("a", ["q1", "q2"]), "b": run("b", ["q2", "q3", "q4"])}
    assert reports.ctrl_title(df, "T") == "T (m; TrekBench-Ctrl, 4 questions)"
    df.attrs["run_dirs"] = {"c": run("c", ["mini:01", "mini:02"], demo=True)}
    assert reports.ctrl_title(df, "T") == "DEMO DATA (not a result): T (scripted m; TrekBench-Mini, 2 questions)"
    df.attrs["run_dirs"] = {"d": run("d", ["q9"], benchmark="My-Set")}
    assert reports.ctrl_title(df, "T") == "T (m; My-Set, 1 questions)"
    # a cell with answers or grades that are not final says so in the title (and so in every caption)
    df.loc[(df["method"] == "direct") & (df["condition"] == "SAA") & (df["question_id"] == "q1"),
           ["answer_status", "outcome"]] = ["pending", "ungraded"]
    assert reports.ctrl_title(df, "T") == (
        "T (m; My-Set, 1 questions); not final (counted as not correct): direct · SAA: 1 pending answer")


def test_not_final_note_counts_every_kind_per_cell():
    df = DF.copy()
    assert reports.not_final_note(df) == ""
    at = {"q1": ("pending", "ungraded"), "q2": ("failed", "ungraded"), "q3": ("ok", "pending"), "q4": ("ok", "unparsed")}
    for qid, values in at.items():
        df.loc[(df["method"] == "direct") & (df["condition"] == "MND") & (df["question_id"] == qid),
               ["answer_status", "outcome"]] = list(values)
    df.loc[(df["method"] == "filter") & (df["question_id"].isin(["q1", "q2"])), ["answer_status", "outcome"]] = [
        "missing", "ungraded"]
    assert reports.not_final_note(df) == (
        "not final (counted as not correct): direct · MND: 1 pending answer, 1 failed answer, 1 ungraded answer, "
        "1 unreadable verdict; filter · OO: 2 unanswered")
    other = df.assign(model="m2")
    assert reports.not_final_note(pd.concat([df, other])).count("m2 direct · MND") == 1  # models named when several


# -- Table 2's reasons and Figure 6's real distractor counts, on real builds --------------------
def test_table2_says_why_a_distractor_type_is_missing(tmp_path):
    from trek.ctrl.build import build
    from trek.ctrl.pools import from_mini
    from trek.report import ctrl_build
    from trek.report.paths import recorded_dir

    # the recorded build: exact fabrications, shown as a diff against the gold window
    recorded = ctrl_build.load_build(recorded_dir("ctrl", "build"))
    made = recorded.manifest["documents"]["fabrication"]
    assert made > 0 and recorded.manifest["fabricators"]["exact"] == len(recorded.pools)
    diff = ctrl_build.distraction_examples(recorded).loc["fabrication", "detail"]
    assert diff.startswith("--- gold") and "\n-" in diff and "\n+" in diff
    assert ctrl_build.build_title(recorded, "T").endswith(f"; {made} fabrications by exact edits)")
    # a model whose fabrications all failed the checks: said so, with the rejections, not "needs a model"
    rejected = [p.model_copy(update={
        "documents": [d for d in p.documents if d.role != "fabrication"],
        "notes": {**p.notes, "fabrication": {"fabricator": "model", "attempts": [{"outcome": "rejected", "kind": "low_similarity"}]}}})
        for p in recorded.pools]
    failed = ctrl_build.Built(recorded.folder, rejected, recorded.contexts,
                              {**recorded.manifest, "model": "m-1", "fabricators": {"exact": 0, "model": len(rejected)}})
    why = ctrl_build.distraction_examples(failed).loc["fabrication", "detail"]
    assert "needs a model" not in why and "m-1 wrote none that passed the checks" in why
    assert f"{len(rejected)} attempts for {len(rejected)} questions rejected: low_similarity {len(rejected)}" in why
    assert ctrl_build.build_title(failed, "T").endswith("; 0 fabrications by m-1)")
    # a build without fabrication skipped it
    build(from_mini(question_ids=["mini:01", "mini:02"]), tmp_path / "nomodel", count_tokens=False,
          conditions=("OO", "GOLD"), fabricator="none")
    why = ctrl_build.distraction_examples(ctrl_build.load_build(tmp_path / "nomodel")).loc["fabrication", "detail"]
    assert "skipped (`trek ctrl build --fabricator none`)" in why
    assert ctrl_build.build_title(ctrl_build.load_build(tmp_path / "nomodel"), "T").endswith(
        "no fabrications (--fabricator none))")


BUDGET_RUN = ("OO:k=5", "OO:k=10", "OO:k=20")


@pytest.fixture(scope="module")
def budget_runs(tmp_path_factory):
    """A real Mini build of three questions (8 outdated documents each: no generated timeline pages) and graded Direct runs on
    three budgets and two gold positions, against the scripted model and judge."""
    import json

    from _scripts import load_script
    from typer.testing import CliRunner

    from trek.cli import app
    from trek.rag.context import load_ctrl_questions

    demo_ctrl, demo_runs = load_script("demo_ctrl"), load_script("demo_runs")
    root = tmp_path_factory.mktemp("budgets")
    built = root / "build"
    conditions = ",".join(("OO:gold=first", "OO:gold=last", *BUDGET_RUN))
    res = CliRunner().invoke(app, ["ctrl", "build", "--source", "mini", "--out", str(built), "--no-tokens",
                                   "--questions", "mini:09,mini:14,mini:16", "--conditions", conditions])
    assert res.exit_code == 0, res.output
    raw = [json.loads(x) for x in (built / "contexts.jsonl").read_text().splitlines()]
    questions = load_ctrl_questions(built / "pools.jsonl")
    from trek.datasets.mini import load as load_mini

    mini = load_mini()
    judge = [r for r in demo_runs.demo_script(mini.questions, mini) if r.get("model") == demo_runs.JUDGE]
    with demo_ctrl.scripted_server(judge + demo_ctrl.ctrl_script(raw, questions),
                                   [q.question for q in questions.values()]) as srv:
        run = CliRunner().invoke(app, ["ctrl", "run", str(built / "contexts.jsonl"), "--model", demo_ctrl.MODEL,
                                       "--base-url", srv.base_url, "--runs", str(root / "runs"), "--methods", "direct",
                                       "--conditions", conditions, "--judge", demo_runs.JUDGE, "--judge-base-url", srv.base_url,
                                       "--no-progress"])
        assert run.exit_code == 0, run.output
    return built, root / "runs", res


def test_ctrl_build_warns_once_per_budget_a_pool_cannot_fill(budget_runs):
    _, _, res = budget_runs
    warnings = [line for line in res.output.splitlines() if line.startswith("warning: budget")]
    assert len(warnings) == 3 and warnings[0].startswith("warning: budget OO outdated 20: 3 of 3 questions")
    assert any(w.startswith("warning: budget OO:k=10 outdated 10: 3 of 3 questions have fewer") for w in warnings)
    assert any("OO:k=20 outdated 20: 3 of 3" in w and "as few as 8" in w for w in warnings)
    assert not any("OO:k=5 " in w for w in warnings)


def test_figure6_plots_the_distractors_the_contexts_hold_with_intervals(budget_runs, tmp_path):
    import shutil

    from trek.ctrl.build import build
    from trek.ctrl.pools import from_mini

    built, runs_dir, _ = budget_runs
    df = reports.load_ctrl(runs_dir)
    budgets = reports.budget_table(df)
    assert budgets["distractors"].tolist() == [5.0, 8.0, 8.0]  # the pools hold 8 outdated documents
    assert budgets["distractors_max"].tolist() == [5, 8, 8]
    for t in (budgets, reports.position_table(df)):
        assert ((t["ci_low"] <= t["accuracy"]) & (t["accuracy"] <= t["ci_high"])).all()
        assert (t["ci_high"] - t["ci_low"] > 0).all()  # 3 questions: wide Wilson intervals
    fig = reports.plot_position_budget(reports.position_table(df), budgets, "T")
    right = fig.axes[1]
    assert list(right.lines[0].get_xdata()) == [5.0, 8.0, 8.0]
    assert [t.get_text() for t in right.texts] == ["k=10, 20"]  # the budgets behind the point at 8
    assert "95% Wilson" in fig._suptitle.get_text()
    # the legend sits below both panels (their labels included), never on a point or interval
    renderer = fig.canvas.get_renderer()
    assert right.get_legend() is None and len(fig.legends) == 1
    assert fig.legends[0].get_window_extent(renderer).y1 <= min(ax.get_tightbbox(renderer).y0 for ax in fig.axes)
    # runs read from other contexts are refused, naming the file
    other = tmp_path / "other"
    build(from_mini(question_ids=["mini:04"]), other, count_tokens=False, conditions=BUDGET_RUN)
    with pytest.raises(ValueError, match="made from other contexts"):
        reports.budget_table(df, contexts=other)
    # a run.json naming contexts that are gone: the error says what to pass
    shutil.move(built / "contexts.jsonl", tmp_path / "moved.jsonl")
    try:
        with pytest.raises(FileNotFoundError, match="ctrl_contexts"):
            reports.budget_table(df)
        assert reports.budget_table(df, contexts=tmp_path / "moved.jsonl")["distractors"].tolist() == [5.0, 8.0, 8.0]
    finally:
        shutil.move(tmp_path / "moved.jsonl", built / "contexts.jsonl")


def test_the_not_final_note_counts_only_the_cells_shown(tmp_path):
    """A figure of some cells names the not-final answers of those cells, not of every run."""
    df = pd.DataFrame({"model": ["m"] * 4, "method": ["direct", "direct", "rerank", "direct"],
                       "condition": ["OO", "SAA", "OO", "OO:k=5"],
                       "answer_status": ["ok", "pending", "failed", "ok"],
                       "outcome": ["correct", "pending", "pending", "undecided"]})
    df.attrs["run_dirs"] = {}
    everything = reports.ctrl_title(df, "T")
    assert "SAA: 1 pending answer" in everything and "rerank" in everything and "OO:k=5" in everything
    only = reports.ctrl_title(df, "T", method="direct", conditions=["OO", "OO:k=5"])
    assert "OO:k=5: 1 undecided verdict" in only and "SAA" not in only and "rerank" not in only
    assert reports.ctrl_title(df, "T", method="direct", conditions=["OO"]) == reports.ctrl_title(df[:0], "T")
