"""Accuracy tables from grades (the layout of the paper's Tables 1 and 4).

* :func:`load_grades` reads a run's ``grades.jsonl``;
* :func:`grades_frame` puts grades in a DataFrame, one row per grade;
* :func:`accuracy_by_dataset` gives, for one run, a row per dataset plus ``micro`` and
  ``macro``, with outcome counts, accuracy and 95% intervals;
* :func:`accuracy_table` gives one row per run and a column per dataset plus micro and macro.

How outcomes count: ``correct`` is a hit; ``incorrect`` and ``not_attempted`` are misses.
``unparsed`` (the judge's reply could not be read) and ``pending`` (the judge call failed)
grades are *not decided*: they are left out of the accuracy's numerator and denominator alike
and reported in their own columns, so a reader sees how many there are.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from trek import stats
from trek.types import Grade, read_jsonl

__all__ = [
    "GRADES_FILE",
    "OUTCOMES",
    "load_grades",
    "grades_frame",
    "accuracy_by_dataset",
    "accuracy_table",
]

GRADES_FILE = "grades.jsonl"
OUTCOMES = ("correct", "incorrect", "not_attempted", "unparsed", "pending")
_DECIDED = ("correct", "incorrect", "not_attempted")
_COLUMNS = ["n", *OUTCOMES, "decided", "accuracy", "ci_low", "ci_high"]

GradesLike = Iterable[Grade | Mapping[str, Any]] | str | os.PathLike[str]


def load_grades(run_dir: str | os.PathLike[str]) -> list[Grade]:
    """The grades of a run: ``<run_dir>/grades.jsonl`` (or the file itself when given a file)."""
    p = Path(run_dir)
    return read_jsonl(p / GRADES_FILE if p.is_dir() else p, Grade)


def _as_grades(grades: GradesLike) -> list[Grade]:
    if isinstance(grades, str | os.PathLike):
        return load_grades(grades)
    out = []
    for i, g in enumerate(grades):
        if isinstance(g, Grade):
            out.append(g)
        elif isinstance(g, Mapping):
            out.append(Grade.model_validate(g))
        else:
            raise ValueError(f"grades[{i}] must be a Grade or a mapping, got {type(g).__name__}")
    return out


def grades_frame(grades: GradesLike) -> pd.DataFrame:
    """One row per grade: question_id, dataset, outcome, correct (1/0/NaN), method, grader,
    grader_version, judge_model, response."""
    rows = [
        {
            "question_id": g.question_id,
            "dataset": g.dataset,
            "outcome": g.outcome,
            "correct": (np.nan if g.correct is None else float(g.correct)),
            "method": g.method,
            "grader": g.grader,
            "grader_version": g.grader_version,
            "judge_model": g.judge_model,
            "response": g.response,
        }
        for g in _as_grades(grades)
    ]
    cols = ["question_id", "dataset", "outcome", "correct", "method", "grader", "grader_version",
            "judge_model", "response"]
    return pd.DataFrame(rows, columns=cols)


def accuracy_by_dataset(
    grades: GradesLike,
    *,
    level: float = 0.95,
    n_resamples: int = 10_000,
    seed: int | None = 0,
    ci: bool = True,
) -> pd.DataFrame:
    """Accuracy of one run per dataset, with ``micro`` and ``macro`` summary rows.

    Args:
        grades: Grade records (or dicts, or a run directory / grades file).
        level: confidence level of the intervals.
        n_resamples: bootstrap resamples for the macro interval.
        seed: seed of the macro bootstrap (the default 0 makes the table reproducible).
        ci: compute intervals (``False`` leaves ``ci_low``/``ci_high`` as NaN; faster).

    Returns:
        A DataFrame indexed by dataset (sorted by name), then ``"micro"`` and ``"macro"`` (index
        name ``"dataset"``), with columns

        * ``n``: number of grades (every outcome);
        * ``correct``, ``incorrect``, ``not_attempted``, ``unparsed``, ``pending``: counts;
        * ``decided``: ``correct + incorrect + not_attempted``;
        * ``accuracy``: ``100 * correct / decided`` in percent. Unparsed and pending grades are
          excluded from the denominator (and of course from the numerator); they show up only
          in their own columns. NaN when a dataset has no decided grade;
        * ``ci_low``, ``ci_high``: the interval in percent, Wilson score for datasets and
          micro, a stratified bootstrap (:func:`trek.stats.accuracy_table`, resampling
          questions within each dataset, seeded) for macro.

        ``micro`` pools every decided grade, so large datasets weigh more. ``macro`` is the
        plain mean of the dataset accuracies, every dataset weighing the same; a dataset with no
        decided grade is left out of it. The count columns of ``macro`` repeat the totals.
    """
    gs = _as_grades(grades)
    datasets = sorted({g.dataset for g in gs})
    counts = {d: dict.fromkeys(OUTCOMES, 0) for d in datasets}
    for g in gs:
        counts[g.dataset][g.outcome] += 1

    rows: dict[str, dict[str, float]] = {}
    for d in datasets:
        c = counts[d]
        decided = sum(c[o] for o in _DECIDED)
        rows[d] = {"n": sum(c.values()), **c, "decided": decided}
    total = {k: sum(rows[d][k] for d in datasets) for k in ["n", *OUTCOMES, "decided"]}
    rows["micro"] = dict(total)
    rows["macro"] = dict(total)
    for r in rows.values():
        r.update(accuracy=np.nan, ci_low=np.nan, ci_high=np.nan)

    decided_grades = [g for g in gs if g.correct is not None]
    if decided_grades:
        y = np.array([int(bool(g.correct)) for g in decided_grades])
        groups = np.array([g.dataset for g in decided_grades], dtype=object)
        if ci:
            table = stats.accuracy_table(y, groups, level, n_resamples=n_resamples, seed=seed)
            for label in table.index:
                rows[str(label)].update(
                    accuracy=100.0 * table.at[label, "accuracy"],
                    ci_low=100.0 * table.at[label, "ci_low"],
                    ci_high=100.0 * table.at[label, "ci_high"],
                )
        else:
            micro, macro = stats.micro_macro(y, groups)
            rows["micro"]["accuracy"] = 100.0 * micro
            rows["macro"]["accuracy"] = 100.0 * macro
            for d in datasets:
                if rows[d]["decided"]:
                    rows[d]["accuracy"] = 100.0 * rows[d]["correct"] / rows[d]["decided"]

    out = pd.DataFrame.from_dict(rows, orient="index")[_COLUMNS]
    out.index.name = "dataset"
    for col in ["n", *OUTCOMES, "decided"]:
        out[col] = out[col].astype(np.int64)
    return out


def accuracy_table(
    runs: Mapping[str, GradesLike],
    *,
    datasets: Iterable[str] | None = None,
) -> pd.DataFrame:
    """Accuracy (percent) of several runs side by side: one row per run label.

    Args:
        runs: ``{label: run directory}`` (a grades file or a list of grades also works), in
            the row order wanted.
        datasets: dataset columns to show, in order (default: every dataset seen, sorted).

    Returns:
        A DataFrame indexed by run label (index name ``"run"``) with a column per dataset and
        the columns ``micro`` and ``macro``, each the accuracy in percent as in
        :func:`accuracy_by_dataset` (unparsed and pending grades excluded; NaN where a run has
        no decided grade of a dataset). Micro and macro are computed over the datasets that
        the run actually has.
    """
    per_run = {label: accuracy_by_dataset(g, ci=False) for label, g in runs.items()}
    if datasets is None:
        seen = {d for t in per_run.values() for d in t.index if d not in ("micro", "macro")}
        cols = sorted(seen)
    else:
        cols = list(datasets)
    rows = {}
    for label, t in per_run.items():
        acc = t["accuracy"]
        rows[label] = {c: (float(acc[c]) if c in acc.index else np.nan) for c in [*cols, "micro", "macro"]}
    out = pd.DataFrame.from_dict(rows, orient="index", columns=[*cols, "micro", "macro"])
    out.index.name = "run"
    return out
