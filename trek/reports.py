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
