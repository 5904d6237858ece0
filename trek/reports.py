"""Builders for the paper's tables and figures, one small function per artifact.

Notebooks stay thin: they hold a ``parameters`` cell and call these. Every builder returns a
pandas DataFrame (tables) or a matplotlib Figure (figures); saving is done by
:func:`trek.paper.save_table` and :func:`trek.plots.save_figure`.
"""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from trek.types import Question

__all__ = ["load_questions", "reference_years", "plot_reference_years"]


def load_questions(source: str = "mini", data_dir: str | os.PathLike[str] | None = None) -> list[Question]:
    """Questions of ``source``: ``"mini"`` (the bundled demo benchmark) or ``"wild"`` (TrekBench-Wild
    from ``data_dir`` / ``$TREK_DATA_DIR``)."""
    if source == "mini":
        from trek.datasets import mini

        return mini.load().questions
    if source == "wild":
        from trek.datasets import wild

        return wild.load(data_dir).questions
    raise ValueError(f"unknown question source {source!r}: use 'mini' or 'wild'")


def reference_years(questions: list[Question]) -> pd.DataFrame:
    """Table 10: questions per reference year (rows) and dataset (columns), with totals."""
    from trek.datasets.wild import year_distribution

    if not questions:
        raise ValueError("no questions to describe")
    df = year_distribution(questions)
    df["total"] = df.sum(axis=1)
    df.loc["total"] = df.sum(axis=0)
    return df


def plot_reference_years(table: pd.DataFrame, title: str) -> plt.Figure:
    """Stacked bars of :func:`reference_years` (without the total row and column)."""
    body = table.drop(index="total", errors="ignore").drop(columns="total", errors="ignore")
    fig, ax = plt.subplots()
    body.plot(kind="bar", stacked=True, ax=ax, width=0.75)
    ax.set_xlabel("reference year")
    ax.set_ylabel("questions")
    ax.set_title(title)
    ax.legend(title="dataset", frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.tick_params(axis="x", rotation=0)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    fig.tight_layout()
    return fig


def _as_path(p: str | os.PathLike[str]) -> Path:
    return Path(p)


# -- runs: Table 1 (accuracy) and Table 9 (paired significance) --------------------------------

def demo_runs_dir() -> Path:
    """Where ``make demo`` writes the demo runs (``build/demo-runs`` at the repository root)."""
    from trek.paper import repo_root

    return repo_root() / "build" / "demo-runs"


def discover_runs(
    runs: dict[str, str] | None = None, runs_dir: str | os.PathLike[str] | None = None
) -> dict[str, Path]:
    """``{label: run directory}``: ``runs`` as given, else every graded run under ``runs_dir``
    (default: the demo runs), labelled by folder name, in ``run.json``'s ``order`` then name."""
    import json

    if runs:
        out = {str(k): Path(v) for k, v in runs.items()}
        for label, p in out.items():
            if not (p / "grades.jsonl").exists():
                raise FileNotFoundError(f"run '{label}': {p / 'grades.jsonl'} does not exist (grade it with `trek grade`)")
        return out
    root = Path(runs_dir) if runs_dir else demo_runs_dir()
    if not root.is_dir():
        raise FileNotFoundError(
            f"no runs folder at {root}: run `make demo` for the offline demo runs, or give `runs` explicitly"
        )
    found = []
    for d in sorted(p for p in root.iterdir() if (p / "grades.jsonl").exists()):
        order = 0
        meta = d / "run.json"
        if meta.exists():
            order = json.loads(meta.read_text(encoding="utf-8")).get("config", {}).get("order", 0)
        found.append((order, d.name, d))
    if not found:
        raise FileNotFoundError(f"no graded runs (grades.jsonl) under {root}")
    return {name: d for _, name, d in sorted(found)}


def wild_accuracy(runs: dict[str, Path]) -> pd.DataFrame:
    """Table 1: accuracy (%) per dataset, micro and macro, one row per run."""
    from trek.analysis import accuracy_table

    return accuracy_table(runs, datasets=["freshqa", "infodeepseek", "sealqa"]).round(1)


def plot_wild_accuracy(table: pd.DataFrame, title: str) -> plt.Figure:
    """Grouped bars of :func:`wild_accuracy`: one group per dataset (plus micro, macro)."""
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    table.T.plot(kind="bar", ax=ax, width=0.8)
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, 100)
    ax.set_title(title)
    ax.tick_params(axis="x", rotation=0)
    ax.legend(title="run", frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return fig


def correctness_table(runs: dict[str, Path]) -> pd.DataFrame:
    """One row per question, one column per run: 1 correct, 0 wrong, NaN unparsed/pending/missing."""
    from trek.analysis import load_grades

    cols = {}
    for label, d in runs.items():
        cols[label] = {g.question_id: (np.nan if g.correct is None else float(g.correct)) for g in load_grades(d)}
    df = pd.DataFrame(cols)
    df.index.name = "question_id"
    return df.sort_index()


def significance(runs: dict[str, Path], reference: str | None = None) -> pd.DataFrame:
    """Table 9 shape: every run against ``reference`` (default: the first run) on shared
    questions: accuracies, difference in points, exact McNemar p and Holm-adjusted p."""
    from trek.stats import paired_comparisons

    table = correctness_table(runs)
    ref = reference or next(iter(runs))
    if ref not in table.columns:
        raise ValueError(f"reference run {ref!r} is not among the runs {list(table.columns)}")
    return paired_comparisons(table, ref).round({"acc_ref": 1, "acc_cond": 1, "delta_pp": 1})


def cochran(runs: dict[str, Path]) -> pd.DataFrame:
    """Cochran's Q across all runs on the questions every run decided (one-row DataFrame)."""
    from trek.stats import cochrans_q

    table = correctness_table(runs).dropna()
    if table.shape[1] < 2 or table.empty:
        raise ValueError("Cochran's Q needs at least two runs with shared decided questions")
    r = cochrans_q(table.to_numpy(dtype=int))
    return pd.DataFrame([{"runs": table.shape[1], "questions": table.shape[0], "Q": r.q, "df": r.df, "p": r.p}])
