"""Builders for the paper's tables and figures, one small function per artifact.

Notebooks stay thin: they hold a ``parameters`` cell and call these. Every builder returns a
pandas DataFrame (tables) or a matplotlib Figure (figures); saving is done by
:func:`trek.paper.save_table` and :func:`trek.plots.save_figure`.
"""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.ticker import MaxNLocator

from trek import runs as _runs
from trek.analysis import COUNT_COLUMNS, accuracy_by_run, cochran_table, paired_comparisons
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


# -- runs: Table 1 (accuracy) and the paired-runs table ----------------------------------------

def discover_runs(
    runs: dict[str, str] | None = None, runs_dir: str | os.PathLike[str] | None = None
) -> dict[str, Path]:
    """``{label: run directory}``: ``runs`` as given, else every graded run under ``runs_dir``
    (default: the recorded Wild runs, ``data/runs/wild``); see :func:`trek.runs.discover`."""
    from trek.paper import recorded_dir

    root = Path(runs_dir) if runs_dir else recorded_dir("wild")
    try:
        return _runs.discover(root, require=_runs.GRADES, runs=runs)
    except FileNotFoundError as e:
        raise FileNotFoundError(f"{e} (`make runs` records the bundled runs; grade your own with `trek grade`)") from None


def wild_accuracy(runs: dict[str, Path]) -> pd.DataFrame:
    """Table 1: accuracy (%) over every question, per dataset, micro and macro, one row per run,
    with the counts behind it (n, graded, unparsed, pending)."""
    return accuracy_by_run(runs, datasets=["freshqa", "infodeepseek", "sealqa"]).round(1)


def plot_wild_accuracy(table: pd.DataFrame, title: str) -> plt.Figure:
    """Grouped bars of :func:`wild_accuracy`: one group per dataset (plus micro, macro)."""
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    table.drop(columns=list(COUNT_COLUMNS), errors="ignore").T.plot(kind="bar", ax=ax, width=0.8)
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, 100)
    ax.set_title(title)
    ax.tick_params(axis="x", rotation=0)
    ax.legend(title="run", frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return fig


def significance(runs: dict[str, Path], reference: str | None = None) -> pd.DataFrame:
    """Every run against ``reference`` (default: the first run) on the same questions:
    accuracies, difference in points, exact McNemar p and Holm-adjusted p."""
    table = _runs.correctness(runs)
    ref = reference or next(iter(runs))
    if ref not in table.columns:
        raise ValueError(f"reference run {ref!r} is not among the runs {list(table.columns)}")
    return paired_comparisons(table, ref).round({"acc_ref": 1, "acc_cond": 1, "delta_pp": 1})


def cochran(runs: dict[str, Path]) -> pd.DataFrame:
    """Cochran's Q across all runs on the questions every run has (one-row DataFrame)."""
    return cochran_table(_runs.correctness(runs))
