"""Ctrl report builders on a tiny hand-made grid whose numbers can be worked out by hand."""

import pandas as pd
import pytest

from trek.rag import reports

QIDS = ["q1", "q2", "q3", "q4"]
DATASETS = ["freshqa", "freshqa", "sealqa", "sealqa"]


def grid(rows):
    """rows: {(method, condition): [correct per question]} -> the long frame load_ctrl returns."""
    out = []
    for (method, cond), correct in rows.items():
        for qid, ds, c in zip(QIDS, DATASETS, correct, strict=True):
            out.append({"run": f"m__{method}__{cond}", "model": "m", "method": method, "condition": cond,
                        "question_id": qid, "dataset": ds, "correct": bool(c)})
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
    assert t.loc[("m", "SAA"), "p"] == 0.25 and t.loc[("m", "SAA"), "delta_pp"] == 75.0
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
