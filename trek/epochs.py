"""Epochs of a Wild run (``trek wild run --epochs N``): every question answered N times.

Layout: epoch 1 is the run directory itself, and epoch ``k > 1`` is a run directory of its own
inside it, ``RUN/epoch-k`` (:data:`trek.runs.EPOCH_DIR`). Each epoch is therefore a complete,
ordinary run: its answers are keyed by question id as in every run, it resumes, is graded and
traced by the usual commands, and ``--epochs 1`` is exactly the run of before. The epochs'
model calls are cache entries of their own (:attr:`trek.llm.client.LLMClient.epoch`).

:func:`epoch_accuracy` gives the accuracy of each epoch and pooled over them: the pooled row
scores each question by the mean of its epochs (as inspect_ai's ``mean`` epoch reducer does) and
its interval is the Wilson interval of that mean share over the questions (not over every
answer: a question's epochs are not independent samples; a mean of epochs varies no more than one
answer, so the interval is conservative).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from trek import runs

__all__ = ["epoch_dir", "epoch_dirs", "epoch_accuracy"]


def epoch_dir(run_dir: str | os.PathLike[str], epoch: int) -> Path:
    """The run directory of ``epoch`` (1: ``run_dir`` itself)."""
    if epoch < 1:
        raise ValueError(f"epochs are numbered from 1, not {epoch}")
    root = Path(run_dir)
    return root if epoch == 1 else root / runs.EPOCH_DIR.format(epoch)


def epoch_dirs(run_dir: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    """``(epoch, directory)`` of every epoch the run holds, in order: the run itself, then each
    ``epoch-k`` folder with a ``run.json``."""
    root = Path(run_dir)
    found = [(1, root)]
    prefix = runs.EPOCH_DIR.format("")
    for d in root.glob(runs.EPOCH_DIR.format("*")) if root.is_dir() else ():
        tail = d.name[len(prefix):]
        if tail.isdigit() and int(tail) > 1 and (d / runs.META).is_file():
            found.append((int(tail), d))
    return sorted(found)


def _row(label: str, n: int, correct: float, graded: int, low: float, high: float) -> dict[str, Any]:
    acc = 100.0 * correct / n if n else math.nan
    return {"epoch": label, "n": n, "graded": graded, "correct": correct, "accuracy": acc,
            "ci_low": low, "ci_high": high}


def _wilson(p: float, n: int, level: float) -> tuple[float, float]:
    """The Wilson score interval of a share ``p`` of ``n`` items (``p`` need not be k/n)."""
    from statistics import NormalDist

    z = NormalDist().inv_cdf(0.5 + level / 2)
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def epoch_accuracy(run_dir: str | os.PathLike[str], level: float = 0.95) -> Any:
    """One row per epoch (accuracy in percent over its whole question set, Wilson interval) and a
    ``pooled`` row (questions scored by the mean of their epochs; Wilson interval over questions).
    Columns: ``epoch``, ``n`` (questions), ``graded``, ``correct`` (pooled: the mean per question
    summed), ``accuracy``, ``ci_low``, ``ci_high``."""
    import pandas as pd

    from trek.stats import wilson_ci

    rows, scores = [], {}
    for k, d in epoch_dirs(run_dir):
        df = runs.frame(d, ["question_id", "outcome", "correct"])
        n, c = len(df), int(df["correct"].sum())
        lo, hi = wilson_ci(c, n, level) if n else (math.nan, math.nan)
        graded = int(df["outcome"].isin(("correct", "incorrect", "not_attempted")).sum())
        rows.append(_row(str(k), n, c, graded, 100.0 * lo, 100.0 * hi))
        for q, ok in zip(df["question_id"], df["correct"], strict=True):
            scores.setdefault(q, []).append(float(ok))
    if len(rows) > 1:
        means = [sum(v) / len(v) for v in scores.values()]
        n = len(means)
        low, high = _wilson(sum(means) / n, n, level) if n else (math.nan, math.nan)
        rows.append(_row("pooled", n, sum(means), sum(r["graded"] for r in rows), 100.0 * low, 100.0 * high))
    return pd.DataFrame(rows).set_index("epoch")
