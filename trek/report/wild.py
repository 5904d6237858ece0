"""TrekBench-Wild: Table 1 (accuracy with 95% intervals), Table 10 (reference years) and the
paired comparisons between runs.

``tab1_wild_accuracy``     :func:`discover_runs`, :func:`wild_accuracy`, :func:`plot_wild_accuracy`
``tab10_reference_years``  :func:`load_questions`, :func:`reference_years`, :func:`plot_reference_years`
``tab_paired_runs``        :func:`significance`, :func:`cochran`
"""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator

from trek import runs as _runs
from trek.analysis import accuracy_by_dataset, cochran_table, paired_comparisons
from trek.report.figures import finish, grouped_bars, wrapped
from trek.report.palette import DATASETS, colours
from trek.report.paths import find_runs, recorded_dir, resolve
from trek.types import Question

__all__ = [
    "WILD_DATASETS", "CI_NOTE", "load_questions", "reference_years", "reference_years_title", "plot_reference_years",
    "discover_runs",
    "wild_accuracy", "plot_wild_accuracy", "significance", "cochran", "corrected_accuracy",
    "corrected_significance", "CORRECTED_NOTE",
]

#: How the corrected tables are made (for captions).
CORRECTED_NOTE = ("corrected for the judge's errors by a random human review of each run (prediction-powered "
                  "inference, PPI++; the population accuracy; 95% intervals)")

WILD_DATASETS = ("freshqa", "infodeepseek", "sealqa")
#: How Table 1's intervals are made (for captions).
CI_NOTE = ("95% intervals: Wilson score for each dataset and micro; for macro, the Jeffreys (Bayesian) "
           "interval of the mean of the per-dataset proportions")


def load_questions(source: str = "mini", data_dir: str | os.PathLike[str] | None = None) -> list[Question]:
    """Questions of ``source`` (:func:`trek.datasets.load_questions`): ``"mini"`` (the bundled demo
    benchmark) or ``"wild"`` (TrekBench-Wild); ``data_dir`` is read relative to the repository root."""
    from trek.datasets import load_questions as load

    return load(source, resolve(data_dir) if data_dir else None)


def reference_years(questions: list[Question]) -> pd.DataFrame:
    """Table 10: questions per reference year (rows) and dataset (columns), with totals."""
    from trek.datasets.wild import year_distribution

    if not questions:
        raise ValueError("no questions to describe")
    df = year_distribution(questions)
    df["total"] = df.sum(axis=1)
    df.loc["total"] = df.sum(axis=0)
    return df


def reference_years_title(questions: list[Question]) -> str:
    """Table 10's title naming the question set it counts: the paper's Table 10 counts
    TrekBench-Wild; on TrekBench-Mini (the default without the source datasets) the title says so
    and how to count Wild's instead."""
    from trek.report.titles import benchmark_of

    name = benchmark_of([q.id for q in questions], "TrekBench-Wild")
    title = f"Questions per reference year, {name} ({len(questions)} questions)"
    if name != "TrekBench-Wild":
        title += "; the paper's Table 10 counts TrekBench-Wild (questions=\"wild\", as `trek data info` prints)"
    return title


def plot_reference_years(table: pd.DataFrame, title: str) -> plt.Figure:
    """Stacked bars of :func:`reference_years` (without the total row and column), one colour
    per dataset from the palette."""
    body = table.drop(index="total", errors="ignore").drop(columns="total", errors="ignore")
    fig, ax = plt.subplots()
    colour = colours("dataset", body.columns)
    bottom = np.zeros(len(body))
    x = np.arange(len(body))
    for ds in body.columns:
        values = body[ds].to_numpy(dtype=float)
        ax.bar(x, values, 0.75, bottom=bottom, color=colour[ds], label=str(ds))
        bottom += values
    ax.set_xticks(x, [str(i) for i in body.index])
    ax.set_xlabel("reference year")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    width = fig.get_figwidth()
    return finish(fig, ax, title=wrapped(title, width, 10), ylabel="questions", ylim=(0, max(bottom.max(), 1) * 1.05),
                  legend="dataset", order=DATASETS)


# -- runs: Table 1 (accuracy) and the paired-runs table ----------------------------------------

def discover_runs(
    runs: dict[str, str] | None = None, runs_dir: str | os.PathLike[str] | None = None
) -> dict[str, Path]:
    """``{label: run directory}``: ``runs`` as given, else every graded run under ``runs_dir``
    (default: the recorded Wild runs, ``data/runs/wild``); see :func:`trek.runs.discover`.
    Relative paths are read from the repository root."""
    return find_runs(_runs.GRADES, runs, runs_dir, recorded_dir("wild"),
                     "`make runs` records the bundled runs, `trek wild run` and `trek grade` make and grade your own")


def wild_accuracy(runs: dict[str, Path], datasets: tuple[str, ...] | None = None) -> pd.DataFrame:
    """Table 1: accuracy (%) over every question with its 95% interval, per dataset, micro and
    macro, one row per run (in the given order).

    Columns are a MultiIndex: ``(dataset, "acc" | "low" | "high")`` for each of ``datasets``
    (default: TrekBench-Wild's three, then every other dataset any run holds, such as ``custom``
    for an import of one's own questions, in order of first appearance; NaN where the run has no
    question of it), ``micro`` and ``macro`` (see :data:`CI_NOTE`), then
    ``("questions", "n" | "graded" | "undecided" | "unparsed" | "pending")``: the counts of the whole run.
    """
    tables = {label: accuracy_by_dataset(d) for label, d in runs.items()}
    if datasets is None:
        found = [str(ds) for t in tables.values() for ds in t.index if ds not in ("micro", "macro")]
        datasets = tuple(dict.fromkeys([*WILD_DATASETS, *found]))
    rows = {}
    for label, t in tables.items():
        row: dict[tuple[str, str], float] = {}
        for ds in (*datasets, "micro", "macro"):
            have = ds in t.index
            for col, name in (("accuracy", "acc"), ("ci_low", "low"), ("ci_high", "high")):
                row[(ds, name)] = float(t.at[ds, col]) if have else np.nan
        for col in ("n", "graded", "undecided", "unparsed", "pending"):
            row[("questions", col)] = int(t.at["micro", col])
        rows[label] = row
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.columns = pd.MultiIndex.from_tuples(out.columns)
    out.index.name = "run"
    counts = [c for c in out.columns if c[0] == "questions"]
    out[counts] = out[counts].astype(int)
    return out.round(1)


def plot_wild_accuracy(table: pd.DataFrame, title: str) -> plt.Figure:
    """Grouped bars of :func:`wild_accuracy`: one group per run (its questions ``n`` under it), one
    bar per dataset (plus micro and macro) in the palette's colour, with its 95% interval as an
    error bar."""
    groups = [g for g in dict.fromkeys(table.columns.get_level_values(0)) if g != "questions"]
    groups = [g for g in groups if table[(g, "acc")].notna().any()]
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    acc = {g: table[(g, "acc")].to_numpy(dtype=float) for g in groups}
    err = {g: np.vstack([acc[g] - table[(g, "low")].to_numpy(dtype=float),
                         table[(g, "high")].to_numpy(dtype=float) - acc[g]]) for g in groups}
    n = table[("questions", "n")].astype(int)

    def under(run: str) -> str:  # n, and the questions without a decided grade (counted as not correct)
        gaps = [f"{int(table.at[run, ('questions', k)])} {k}" for k in ("undecided", "unparsed", "pending")
                if ("questions", k) in table.columns and int(table.at[run, ("questions", k)])]
        return f"{run}\nn={n[run]}" + (f"\n({', '.join(gaps)})" if gaps else "")

    grouped_bars(ax, [under(run) for run in table.index], acc, colours("dataset", groups), err)
    return finish(fig, ax, title=wrapped(title, 5.2, 10), ylabel="accuracy (%), 95% interval", ylim=(0, 105),
                  legend="dataset", order=groups)  # the table's order: Wild's datasets, any other, micro, macro


def significance(runs: dict[str, Path], reference: str | None = None) -> pd.DataFrame:
    """Every run against ``reference`` (default: the first run) on the same questions:
    accuracies, difference in points, exact McNemar p and Holm-adjusted p."""
    if len(runs) < 2:
        raise ValueError(f"paired comparisons need at least two runs, got {len(runs)}: {list(runs)}")
    table = _runs.correctness(runs)
    ref = reference or next(iter(runs))
    if ref not in table.columns:
        raise ValueError(f"reference run {ref!r} is not among the runs {list(table.columns)}")
    return paired_comparisons(table, ref).round({"acc_ref": 1, "acc_cond": 1, "delta_pp": 1})


def cochran(runs: dict[str, Path]) -> pd.DataFrame:
    """Cochran's Q across all runs on the questions every run has (one-row DataFrame)."""
    return cochran_table(_runs.correctness(runs))


def _reviews(runs: dict[str, Path], human: dict[str, str | os.PathLike[str]]) -> dict[str, object]:
    from trek.grade_review import read_grade_review

    unknown = sorted(set(human) - set(runs))
    if unknown:
        raise ValueError(f"human names run(s) {unknown} that are not among the runs {sorted(runs)}")
    if not human:
        raise ValueError("human names no review file")
    return {run: read_grade_review(human[run], runs[run]) for run in runs if run in human}


def corrected_accuracy(runs: dict[str, Path], human: dict[str, str | os.PathLike[str]]) -> pd.DataFrame:
    """Table 1 corrected by a random review of each run's grades (``human``: ``{run label: filled
    trek grade review file}``): per run with a review and dataset, the judge's accuracy and the
    corrected one with their intervals, and the review's own, in % (:func:`trek.grade_review.corrected_accuracy`)."""
    from trek.grade_review import corrected_accuracy as corrected

    reviews = _reviews(runs, human)
    out = pd.concat([corrected(runs[run], review).assign(run=run) for run, review in reviews.items()])
    cols = ["judge_accuracy", "judge_low", "judge_high", "corrected_accuracy", "low", "high", "human_only_accuracy",
            "human_low", "human_high"]
    out[cols] = (100 * out[cols]).round(1)
    return out.set_index(["run", "dataset"])[["n", "n_reviewed", *cols, "lambda"]].round({"lambda": 2})


def corrected_significance(runs: dict[str, Path], human: dict[str, str | os.PathLike[str]]) -> pd.DataFrame:
    """The paired-runs table corrected by the reviews: every pair of runs with a review (reviewed on
    one draw), the judge-only difference with its exact McNemar p and the corrected difference with
    its interval and p-value, in points, Holm across the pairs (:func:`trek.grade_review.compare_runs`)."""
    from trek.grade_review import compare_runs

    reviews = _reviews(runs, human)
    out = compare_runs({run: runs[run] for run in reviews}, reviews)
    cols = ["judge_difference", "corrected_difference", "low", "high"]
    out[cols] = (100 * out[cols]).round(1)
    return out.round({"lambda": 2})
