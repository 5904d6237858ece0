"""Tables and figures of the Ctrl evaluation, one builder per artifact, called by the notebooks.

``tab3_ctrl_micro``       :func:`ctrl_micro` (Table 3)
``tab7_ctrl_full``        :func:`ctrl_by_dataset` (Table 7)
``tab9_ctrl_vs_oo``       :func:`ctrl_vs_oo` (Table 9)
``fig5_metadata_swap``    :func:`metadata_swap`, :func:`plot_metadata_swap` (§4.4, finding 3)
``fig6_position_budget``  :func:`position_table`, :func:`position_pairs`, :func:`budget_table`,
                          :func:`budget_cochran`, :func:`plot_position_budget` (appendix A.3)

Everything starts from :func:`load_ctrl`: one row per (run, question) of every graded Ctrl run
(``run.json`` kind ``ctrl``) under a folder, with the run's model, method and condition. Accuracy
is over every question of a run (only a ``correct`` grade counts, as in :mod:`trek.analysis`).
The tests are :mod:`trek.stats`' exact McNemar, Holm and Cochran's Q through
:func:`trek.analysis.paired_comparisons` and :func:`trek.analysis.cochran_table`.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from trek import runs as _runs
from trek import stats
from trek.analysis import cochran_table, paired_comparisons

__all__ = [
    "MAIN",
    "METHOD_ORDER",
    "POSITIONS",
    "BUDGETS",
    "SWAPS",
    "load_ctrl",
    "ctrl_title",
    "ctrl_micro",
    "ctrl_by_dataset",
    "ctrl_vs_oo",
    "metadata_swap",
    "plot_metadata_swap",
    "position_table",
    "position_pairs",
    "budget_table",
    "budget_cochran",
    "plot_position_budget",
]

MAIN = ("OO", "MND", "SAA", "SBA")
METHOD_ORDER = ("direct", "rerank", "filter", "structured")
POSITIONS = ("OO:gold=first", "OO:gold=1/3", "OO:gold=2/3", "OO:gold=last")
BUDGETS = ("OO:k=5", "OO:k=10", "OO:k=15", "OO:k=20")
SWAPS = (("OO", "OO:timeswap"), ("SAA", "SAA:domainswap"))
GOLD = "GOLD"


def load_ctrl(runs_dir: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None) -> pd.DataFrame:
    """Every graded Ctrl run under ``runs_dir`` (one folder or several; default the recorded
    runs, ``data/runs/ctrl/runs``).

    Returns one row per (run, question): ``run``, ``model``, ``method``, ``condition`` and
    :func:`trek.runs.frame`'s columns (``question_id``, ``dataset``, ``outcome``, ``correct``, ...);
    ``df.attrs["run_dirs"]`` maps each run label to its folder (for :func:`ctrl_title`).
    """
    from trek.paper import recorded_dir

    roots = [runs_dir] if runs_dir is None or isinstance(runs_dir, str | os.PathLike) else list(runs_dir)
    parts = []
    found: dict[str, Path] = {}
    for root in roots:
        base = Path(root) if root is not None else recorded_dir("ctrl", "runs")
        try:
            dirs = _runs.discover(base, require=_runs.GRADES)
        except FileNotFoundError as e:
            raise FileNotFoundError(f"{e} (`make runs` records the bundled Ctrl runs; grade your own with "
                                    "`trek grade` or `trek ctrl run --judge`)") from None
        for label, d in dirs.items():
            meta = _runs.read_meta(d)
            if meta is None or meta.kind != "ctrl":
                continue
            df = _runs.frame(d)
            df.insert(0, "condition", meta.config["condition"])
            df.insert(0, "method", meta.config["method"])
            df.insert(0, "model", meta.model)
            df.insert(0, "run", label)
            parts.append(df)
            found[label] = d
    if not parts:
        raise FileNotFoundError(f"no graded Ctrl runs (run.json kind 'ctrl') under {roots}")
    out = pd.concat(parts, ignore_index=True)
    out.attrs["run_dirs"] = found
    return out


def ctrl_title(df: pd.DataFrame, what: str) -> str:
    """A figure or table title naming the models and the question set of the runs behind ``df``
    (a :func:`load_ctrl` frame; see :func:`trek.paper.runs_title`)."""
    from trek.paper import runs_title

    return runs_title(what, df.attrs.get("run_dirs", {}), benchmark="TrekBench-Ctrl")


def _methods(df: pd.DataFrame) -> list[str]:
    seen = set(df["method"])
    return [m for m in METHOD_ORDER if m in seen] + sorted(seen - set(METHOD_ORDER))


def _accuracy_rows(df: pd.DataFrame, keys: list[str], conditions: Sequence[str]) -> pd.DataFrame:
    """Accuracy (%) per ``keys`` x condition, the Gold-only accuracy (Direct on GOLD) of the same
    model (and dataset) and each condition's change from it in points (``<cond> Δ``)."""
    acc = df.groupby([*keys, "condition"])["correct"].mean().mul(100)
    gold_keys = [k for k in keys if k != "method"]
    gold = (df[(df["method"] == "direct") & (df["condition"] == GOLD)]
            .groupby(gold_keys)["correct"].mean().mul(100))
    rows = {}
    for idx, part in df[df["condition"].isin(conditions)].groupby(keys, sort=False):
        idx = idx if isinstance(idx, tuple) else (idx,)
        gkey = tuple(v for k, v in zip(keys, idx, strict=True) if k != "method")
        g = gold.get(gkey if len(gkey) > 1 else gkey[0], np.nan)
        row: dict[str, float] = {"Gold-only": g}
        for c in conditions:
            a = acc.get((*idx, c), np.nan)
            row[c] = a
            row[f"{c} Δ"] = a - g
        row["n"] = part.groupby("condition")["question_id"].nunique().max()
        rows[idx] = row
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index = pd.MultiIndex.from_tuples(out.index, names=keys)
    return out


def ctrl_micro(df: pd.DataFrame, conditions: Sequence[str] = MAIN) -> pd.DataFrame:
    """Table 3: micro accuracy (%) per model x method under each condition, with the change from
    the model's Gold-only accuracy in points (the paper's gray numbers) and ``n`` questions."""
    out = _accuracy_rows(df, ["model", "method"], conditions)
    order = [(m, k) for m in dict.fromkeys(df["model"]) for k in _methods(df) if (m, k) in out.index]
    return out.loc[order].round(1)


def ctrl_by_dataset(df: pd.DataFrame, conditions: Sequence[str] = MAIN) -> pd.DataFrame:
    """Table 7: :func:`ctrl_micro` per dataset, each model x method followed by its micro average."""
    per = _accuracy_rows(df, ["model", "method", "dataset"], conditions).sort_index()
    micro = _accuracy_rows(df, ["model", "method"], conditions)
    rows = []
    for m in dict.fromkeys(df["model"]):
        for k in _methods(df):
            sub = per.loc[(m, k)] if (m, k) in per.index.droplevel(2) else None
            if sub is None:
                continue
            for ds in sorted(sub.index):
                rows.append(((m, k, ds), sub.loc[ds]))
            rows.append(((m, k, "micro"), micro.loc[(m, k)]))
    out = pd.DataFrame([r for _, r in rows], index=pd.MultiIndex.from_tuples([i for i, _ in rows],
                                                                            names=["model", "method", "dataset"]))
    out["n"] = out["n"].astype(int)
    return out.round(1)


def _table(df: pd.DataFrame, model: str, method: str, conditions: Sequence[str]) -> pd.DataFrame:
    """Question x condition booleans of one model and method (conditions it lacks are left out)."""
    sub = df[(df["model"] == model) & (df["method"] == method) & (df["condition"].isin(conditions))]
    t = sub.pivot_table(index="question_id", columns="condition", values="correct", aggfunc="first")
    return t[[c for c in conditions if c in t.columns]]


def ctrl_vs_oo(df: pd.DataFrame, method: str = "direct", conditions: Sequence[str] = ("MND", "SAA", "SBA"),
               reference: str = "OO") -> pd.DataFrame:
    """Table 9: each condition against ``reference`` on the same questions, per model: accuracies
    (%), the decrease in points, discordant counts, exact McNemar p and Holm-adjusted p."""
    parts = []
    for model in dict.fromkeys(df["model"]):
        t = _table(df, model, method, [reference, *conditions])
        if reference not in t.columns or t.shape[1] < 2:
            continue
        res = paired_comparisons(t, reference)
        parts.append(pd.concat({model: res}, names=["model"]))
    if not parts:
        raise ValueError(f"no {method} runs with {reference} and any of {list(conditions)}")
    return pd.concat(parts).round({"acc_ref": 1, "acc_cond": 1, "delta_pp": 1})


def _with_holm(rows: list[dict]) -> list[dict]:
    """``rows`` (one model's comparisons, each with ``p``) with ``p_holm`` across them."""
    if rows:
        for r, h in zip(rows, stats.holm([r["p"] for r in rows]), strict=True):
            r["p_holm"] = float(h)
    return rows


def metadata_swap(df: pd.DataFrame, method: str = "direct",
                  swaps: Sequence[tuple[str, str]] = SWAPS) -> pd.DataFrame:
    """Figure 5: each swapped condition against its unswapped one on the same questions, per model:
    accuracies (%), the change in points, exact McNemar p and Holm across the swaps of a model."""
    rows = []
    for model in dict.fromkeys(df["model"]):
        mrows = []
        for base, swapped in swaps:
            t = _table(df, model, method, [base, swapped])
            if t.shape[1] < 2:
                continue
            r = paired_comparisons(t, base).iloc[0]
            mrows.append({"model": model, "swap": swapped, "unswapped": base, "n": int(r["n"]),
                          "acc_unswapped": r["acc_ref"], "acc_swapped": r["acc_cond"], "delta_pp": r["delta_pp"],
                          "b": int(r["b"]), "c": int(r["c"]), "p": r["p"]})
        rows += _with_holm(mrows)
    if not rows:
        raise ValueError(f"no {method} runs with any of the swaps {list(swaps)}")
    return pd.DataFrame(rows).set_index(["model", "swap"]).round({"acc_unswapped": 1, "acc_swapped": 1, "delta_pp": 1})


def plot_metadata_swap(table: pd.DataFrame, title: str) -> plt.Figure:
    """Paired bars (unswapped, swapped) per swap and model, with the McNemar p above each pair."""
    fig, ax = plt.subplots(figsize=(6.0, 3.2))
    labels = [f"{s}\n({m})" if table.index.get_level_values(0).nunique() > 1 else s for m, s in table.index]
    x = np.arange(len(table))
    ax.bar(x - 0.2, table["acc_unswapped"], 0.4, label="unswapped")
    ax.bar(x + 0.2, table["acc_swapped"], 0.4, label="metadata swapped")
    for i, (_, r) in enumerate(table.iterrows()):
        top = max(r["acc_unswapped"], r["acc_swapped"])
        ax.text(i, min(top + 3, 104), f"p={r['p']:.3g}", ha="center", fontsize=7)
    ax.set_xticks(x, labels)
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, 110)
    ax.set_title(title)
    ax.legend(frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return fig


def _acc_table(df: pd.DataFrame, method: str, conditions: Sequence[str], label: str) -> pd.DataFrame:
    sub = df[(df["method"] == method) & df["condition"].isin(conditions)]
    if sub.empty:
        raise ValueError(f"no {method} runs with any of {list(conditions)}")
    g = sub.groupby(["model", "condition"])["correct"]
    out = pd.DataFrame({"accuracy": g.mean().mul(100), "correct": g.sum().astype(int), "n": g.size()})
    order = [(m, c) for m in dict.fromkeys(sub["model"]) for c in conditions if (m, c) in out.index]
    out = out.loc[order].round({"accuracy": 1})
    out.index = out.index.set_names(["model", label])
    return out


def position_table(df: pd.DataFrame, method: str = "direct", positions: Sequence[str] = POSITIONS) -> pd.DataFrame:
    """Figure 6 (left): accuracy (%) by gold position in OO, with correct and n."""
    return _acc_table(df, method, positions, "position")


def position_pairs(df: pd.DataFrame, method: str = "direct", positions: Sequence[str] = POSITIONS) -> pd.DataFrame:
    """Every pair of gold positions on the same questions, per model: exact McNemar p, Holm over the pairs."""
    rows = []
    for model in dict.fromkeys(df["model"]):
        t = _table(df, model, method, positions)
        pairs = list(itertools.combinations(t.columns, 2))
        mrows = []
        for a, b in pairs:
            r = paired_comparisons(t[[a, b]], a).iloc[0]
            mrows.append({"model": model, "a": a, "b": b, "n": int(r["n"]), "acc_a": r["acc_ref"],
                          "acc_b": r["acc_cond"], "p": r["p"]})
        rows += _with_holm(mrows)
    if not rows:
        raise ValueError(f"no two gold positions with {method} runs")
    return pd.DataFrame(rows).set_index(["model", "a", "b"]).round({"acc_a": 1, "acc_b": 1})


def budget_table(df: pd.DataFrame, method: str = "direct", budgets: Sequence[str] = BUDGETS) -> pd.DataFrame:
    """Figure 6 (right): accuracy (%) by OO distractor budget, with correct and n."""
    return _acc_table(df, method, budgets, "budget")


def budget_cochran(df: pd.DataFrame, method: str = "direct", budgets: Sequence[str] = BUDGETS) -> pd.DataFrame:
    """Cochran's Q across the budgets on the questions every budget has, one row per model."""
    parts = []
    for model in dict.fromkeys(df["model"]):
        t = _table(df, model, method, budgets)
        if t.shape[1] >= 2:
            parts.append(cochran_table(t.astype(float)).assign(model=model).set_index("model"))
    if not parts:
        raise ValueError(f"no two budgets with {method} runs")
    return pd.concat(parts)


def plot_position_budget(positions: pd.DataFrame, budgets: pd.DataFrame, title: str) -> plt.Figure:
    """Two panels: accuracy by gold position and by distractor budget, one line per model."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(6.4, 2.8), sharey=True)
    for ax, table, xlabel in ((left, positions, "gold position in OO"), (right, budgets, "distractors in OO")):
        for model, part in table.groupby(level=0, sort=False):
            names = [c.split("=", 1)[1] for c in part.index.get_level_values(1)]
            ax.plot(names, part["accuracy"].to_numpy(), marker="o", label=model)
        ax.set_xlabel(xlabel)
        ax.set_ylim(0, 105)
    left.set_ylabel("accuracy (%)")
    right.legend(frameon=False, loc="lower right", fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig
