"""The analysis layer: accuracy tables and paired comparisons built on :func:`trek.runs.frame`.

Accuracy is over **every question of a run's question set** (the paper reports it over the
144 shared questions). A question counts as correct only when its grade is ``correct``; an
unanswered question, a pending answer, a pending grade, an unparsed verdict, a wrong or a
not-attempted answer all count as not correct. Beside each accuracy the tables show the
counts behind it, so a gap is visible:

* ``n`` questions; ``answered`` (a final trajectory exists and is not pending); ``graded``
  (a decided grade: correct, incorrect or not attempted); ``undecided`` (the judge could not
  support a verdict: neither correct nor incorrect); ``unparsed``; ``pending`` (answer or
  grade); ``correct``;
* ``accuracy`` = ``100 * correct / n`` with a 95% interval; ``acc_graded`` =
  ``100 * correct / graded`` as an extra column, never the headline.

Table builders that compare runs (paired McNemar with Holm, Cochran's Q, the attribution
prevalence test) live here too; :mod:`trek.stats` keeps the pure functions over arrays.
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from trek import runs as _runs
from trek import stats

__all__ = [
    "COUNT_COLUMNS",
    "accuracy_by_dataset",
    "accuracy_by_run",
    "mentions_answer",
    "judge_check",
    "paired_comparisons",
    "cochran_table",
    "multilabel_prevalence_test",
]

COUNT_COLUMNS = ["n", "answered", "graded", "correct", "undecided", "unparsed", "pending"]
_COLUMNS = [*COUNT_COLUMNS, "accuracy", "ci_low", "ci_high", "acc_graded"]
_DECIDED = ("correct", "incorrect", "not_attempted")

RunLike = str | os.PathLike[str] | pd.DataFrame


def _frame(run: RunLike) -> pd.DataFrame:
    # a run directory: only the columns an accuracy table reads, a few bytes per question
    return run if isinstance(run, pd.DataFrame) else _runs.outcome_frame(run)


def _counts(df: pd.DataFrame) -> dict[str, int]:
    return {
        "n": len(df),
        "answered": int((df["answer_status"] == "ok").sum()),
        "graded": int(df["outcome"].isin(_DECIDED).sum()),
        "correct": int(df["correct"].sum()),
        "undecided": int((df["outcome"] == "undecided").sum()),
        "unparsed": int((df["outcome"] == "unparsed").sum()),
        "pending": int(((df["answer_status"] == "pending") | (df["outcome"] == "pending")).sum()),
    }


def accuracy_by_dataset(
    run: RunLike,
    *,
    level: float = 0.95,
    n_resamples: int = 10_000,
    seed: int | None = 0,
    ci: bool = True,
) -> pd.DataFrame:
    """Accuracy of one run per dataset, with ``micro`` and ``macro`` rows.

    Args:
        run: a run directory, or its :func:`trek.runs.frame`.
        level: confidence level of the intervals.
        n_resamples: bootstrap resamples for the macro interval.
        seed: seed of the macro bootstrap (the default 0 makes the table reproducible).
        ci: compute intervals (``False`` leaves ``ci_low``/``ci_high`` NaN; faster).

    Returns:
        A DataFrame indexed by dataset (sorted), then ``micro`` and ``macro`` (index name
        ``dataset``), with the columns of the module docstring, accuracies in percent. Dataset
        and micro intervals are Wilson score intervals, the macro one the Jeffreys interval of
        the mean of the dataset proportions (:func:`trek.stats.macro_jeffreys_ci`, via
        :func:`trek.stats.accuracy_ci_table`; ``n_resamples``/``seed`` only matter for its
        ``bootstrap`` alternative). ``micro`` pools every question; ``macro`` is the
        plain mean of the dataset accuracies. The count columns of ``macro`` repeat the totals.
    """
    df = _frame(run)
    datasets = sorted(df["dataset"].unique())
    rows: dict[str, dict[str, float]] = {}
    for d in datasets:
        rows[d] = _counts(df[df["dataset"] == d])
    rows["micro"] = _counts(df)
    rows["macro"] = dict(rows["micro"])
    for r in rows.values():
        r.update(accuracy=np.nan, ci_low=np.nan, ci_high=np.nan)
        r["acc_graded"] = 100.0 * r["correct"] / r["graded"] if r["graded"] else np.nan
    if len(df):
        y = df["correct"].to_numpy(dtype=bool)
        groups = df["dataset"].to_numpy(dtype=object)
        if ci:
            table = stats.accuracy_ci_table(y, groups, level, n_resamples=n_resamples, seed=seed)
            for label in table.index:
                for col in ("accuracy", "ci_low", "ci_high"):
                    rows[str(label)][col] = 100.0 * table.at[label, col]
        else:
            micro, macro = stats.micro_macro(y, groups)
            rows["micro"]["accuracy"], rows["macro"]["accuracy"] = 100.0 * micro, 100.0 * macro
            for d in datasets:
                rows[d]["accuracy"] = 100.0 * rows[d]["correct"] / rows[d]["n"]
        graded = [rows[d]["acc_graded"] for d in datasets if rows[d]["graded"]]
        rows["macro"]["acc_graded"] = float(np.mean(graded)) if graded else np.nan
    out = pd.DataFrame.from_dict(rows, orient="index")[_COLUMNS]
    out.index.name = "dataset"
    for col in COUNT_COLUMNS:
        out[col] = out[col].astype(np.int64)
    return out


def accuracy_by_run(
    runs: Mapping[str, RunLike], *, datasets: Iterable[str] | None = None
) -> pd.DataFrame:
    """Accuracy (percent, over every question) of several runs side by side.

    Returns one row per run label (index name ``run``, in the order given) with a column per
    dataset (``datasets`` in that order, default every dataset seen, sorted), ``micro``,
    ``macro``, and the counts ``n``, ``graded``, ``undecided``, ``unparsed`` and ``pending`` of the whole run.
    """
    per_run = {label: accuracy_by_dataset(r, ci=False) for label, r in runs.items()}
    if datasets is None:
        cols = sorted({d for t in per_run.values() for d in t.index if d not in ("micro", "macro")})
    else:
        cols = list(datasets)
    rows = {}
    for label, t in per_run.items():
        acc = t["accuracy"]
        row = {c: (float(acc[c]) if c in acc.index else np.nan) for c in [*cols, "micro", "macro"]}
        row.update({k: int(t.at["micro", k]) for k in ("n", "graded", "undecided", "unparsed", "pending")})
        rows[label] = row
    out = pd.DataFrame.from_dict(rows, orient="index", columns=[*cols, "micro", "macro", "n", "graded",
                                                                 "undecided", "unparsed", "pending"])
    out.index.name = "run"
    return out


# -- a sanity check of the judge -----------------------------------------------------------------
def mentions_answer(response: str | None, answers: Sequence[str]) -> bool:
    """True when some acceptable answer appears, as whole words, in the response.

    Both sides go through :func:`trek.graders.freshqa.normalize_answer` (case, punctuation,
    articles); an answer matches when its normalized words occur as a contiguous run of the
    normalized response's words. A crude, judge-free signal: it misses paraphrases and counts an
    answer that is mentioned only to be rejected, so it is a check on a judge, not a grader.
    """
    from trek.graders.freshqa import normalize_answer

    words = f" {normalize_answer(response)} "
    if not words.strip():
        return False
    return any(n and f" {n} " in words for n in (normalize_answer(a) for a in answers))


def _check_note(judged: np.ndarray, mentioned: np.ndarray) -> str:
    """Why the judge check's kappa is undefined ("" when it is defined)."""
    if stats.kappa_undefined(judged, mentioned) is None:
        return ""
    which = "every answer correct" if judged.all() else "no answer correct"
    return f"undefined: the judge and the mention check both call {which} (kappa 0/0)"


def judge_check(runs: Mapping[str, str | os.PathLike[str]]) -> pd.DataFrame:
    """How the judge's verdicts compare with :func:`mentions_answer`, one row per run.

    Over the questions of each run with a decided grade (correct, incorrect or not attempted):
    ``n``, ``judged_correct`` (%), ``mentions_answer`` (%), ``agreement`` (%), Cohen's
    ``kappa`` between the two (NaN when both give one verdict throughout) and ``kappa_note``
    (why it is undefined). A judge that calls answers
    correct far more often than they name an acceptable answer, with kappa near 0, is not
    reading them: its accuracy figures say little.
    """
    rows = {}
    for label, run_dir in runs.items():
        df = _runs.frame(run_dir)
        questions = _runs.load_questions(run_dir)
        df = df[df["outcome"].isin(_DECIDED)]
        judged = df["correct"].to_numpy(dtype=bool)
        mentioned = np.array([mentions_answer(a, questions[q].answers)
                              for q, a in zip(df["question_id"], df["answer"], strict=True)], dtype=bool)
        n = len(df)
        rows[label] = {
            "n": n,
            "judged_correct": 100 * judged.mean() if n else np.nan,
            "mentions_answer": 100 * mentioned.mean() if n else np.nan,
            "agreement": 100 * (judged == mentioned).mean() if n else np.nan,
            "kappa": stats.cohens_kappa(judged, mentioned) if n else np.nan,
            "kappa_note": _check_note(judged, mentioned) if n else "no answers",
        }
    out = pd.DataFrame.from_dict(rows, orient="index",
                                 columns=["n", "judged_correct", "mentions_answer", "agreement", "kappa", "kappa_note"])
    out.index.name = "run"
    return out


# -- paired comparisons --------------------------------------------------------------------------
def paired_comparisons(
    table: pd.DataFrame,
    reference: Hashable,
    conditions: Sequence[Hashable] | None = None,
) -> pd.DataFrame:
    """Each condition against a reference on the same questions (the layout of Table 9).

    Args:
        table: one row per question, one column per condition of 0/1 or booleans (NaN = the
            question is not available under that condition; such rows are dropped pairwise).
        reference: the reference column (e.g. ``"OO"``).
        conditions: columns to compare (default: every other column, in order).

    Returns:
        A DataFrame indexed by condition with ``n``, ``acc_ref`` and ``acc_cond`` (percent),
        ``delta_pp`` (``acc_cond - acc_ref``, the change from the reference in points, negative
        when the condition is lower: the one sign of every Δ in Trek's tables,
        :func:`trek.report.titles.delta_note`), ``b`` (reference
        right, condition wrong), ``c`` (the reverse), ``p`` (exact McNemar) and ``p_holm``
        (Holm across the compared conditions).
    """
    if not isinstance(table, pd.DataFrame):
        raise ValueError(f"table must be a pandas DataFrame, got {type(table).__name__}")
    if not table.columns.is_unique:
        raise ValueError("table has duplicate column names")
    if reference not in table.columns:
        raise ValueError(f"reference {reference!r} is not a column of table (columns: {list(table.columns)})")
    if conditions is None:
        conds = [col for col in table.columns if col != reference]
    else:
        if isinstance(conditions, str):
            raise ValueError("conditions must be a list of column names, not a single string")
        conds = list(conditions)
        missing = [col for col in conds if col not in table.columns]
        if missing:
            raise ValueError(f"conditions {missing!r} are not columns of table")
        if reference in conds:
            raise ValueError(f"conditions must not include the reference {reference!r}")
        if len(set(conds)) != len(conds):
            raise ValueError("conditions contains duplicates")
    if not conds:
        raise ValueError("conditions is empty: there is nothing to compare with the reference")
    rows = []
    for cond in conds:
        pair = table[[reference, cond]].dropna()
        if pair.empty:
            raise ValueError(f"no question has grades for both {reference!r} and {cond!r}")
        try:
            res = stats.mcnemar(pair[reference].to_numpy(), pair[cond].to_numpy())
        except ValueError as e:  # name the columns: x is the reference, y the condition
            raise ValueError(f"table[{reference!r}] (x) vs table[{cond!r}] (y): {e}") from None
        rows.append({
            "n": res.n, "acc_ref": 100.0 * res.acc_x, "acc_cond": 100.0 * res.acc_y,
            "delta_pp": 100.0 * (res.acc_y - res.acc_x), "b": res.b, "c": res.c, "p": res.p,
        })
    out = pd.DataFrame(rows, index=pd.Index(conds, name="condition"))
    out["p_holm"] = stats.holm(out["p"].to_numpy())
    return out


def cochran_table(table: pd.DataFrame) -> pd.DataFrame:
    """Cochran's Q across the columns of a question × condition 0/1 table, on the rows every
    column has (one-row DataFrame: ``conditions``, ``questions``, ``Q``, ``df``, ``p``)."""
    complete = table.dropna()
    if complete.shape[1] < 2 or complete.empty:
        raise ValueError("Cochran's Q needs at least two conditions with shared questions")
    r = stats.cochrans_q(complete.to_numpy(dtype=int))
    return pd.DataFrame([{"conditions": complete.shape[1], "questions": complete.shape[0],
                          "Q": r.q, "df": r.df, "p": r.p}])


# -- attribution prevalence ------------------------------------------------------------------------
def multilabel_prevalence_test(
    attributions: Iterable[Mapping[str, Any]] | pd.DataFrame,
    post: Sequence[str] | str,
    upstream: Sequence[str] | str,
    model_key: str = "model",
    labels_key: str = "labels",
) -> pd.DataFrame:
    """Per model: are cases carrying a ``post`` label more common than cases carrying an
    ``upstream`` label? Exact McNemar over the same cases (a case may carry both), Holm across
    models.

    Args:
        attributions: one mapping (or DataFrame row) per case with ``model_key`` and
            ``labels_key`` (a collection of label strings, possibly empty).
        post, upstream: the two disjoint label families (a string is one label). TrekTrace
            passes its own label names (see :mod:`trek.trace.labels`).

    Returns:
        A DataFrame indexed by model (first appearance) with ``n``, ``n_post``, ``n_upstream``,
        ``post_pct``, ``upstream_pct``, ``b`` (post only), ``c`` (upstream only), ``p`` and
        ``p_holm``.
    """
    post_labels = set(_label_group(post, "post"))
    upstream_labels = set(_label_group(upstream, "upstream"))
    overlap = post_labels & upstream_labels
    if overlap:
        raise ValueError(f"post and upstream must be disjoint, both contain {sorted(overlap)}")
    if isinstance(attributions, pd.DataFrame):
        for key in (model_key, labels_key):
            if key not in attributions.columns:
                raise ValueError(f"attributions has no column {key!r}")
        records: list[Any] = attributions.to_dict("records")
    elif attributions is None or isinstance(attributions, str | bytes | Mapping):
        raise ValueError("attributions must be an iterable of mappings (one per case) or a DataFrame")
    else:
        records = list(attributions)
    if not records:
        raise ValueError("attributions is empty")
    per_model: dict[Hashable, list[tuple[bool, bool]]] = {}
    for i, rec in enumerate(records):
        if not isinstance(rec, Mapping):
            raise ValueError(f"attributions[{i}] must be a mapping, got {type(rec).__name__}")
        for key in (model_key, labels_key):
            if key not in rec:
                raise ValueError(f"attributions[{i}] has no key {key!r}")
        model = rec[model_key]
        if stats.is_missing_scalar(model) or not isinstance(model, Hashable):
            raise ValueError(f"attributions[{i}] has a missing or unhashable model name ({model_key!r})")
        labels = stats.label_set(rec[labels_key], f"attributions[{i}][{labels_key!r}]")
        per_model.setdefault(model, []).append((bool(labels & post_labels), bool(labels & upstream_labels)))
    rows = []
    for flags in per_model.values():
        has_post = np.array([f[0] for f in flags])
        has_up = np.array([f[1] for f in flags])
        res = stats.mcnemar(has_post, has_up)
        rows.append({
            "n": res.n, "n_post": int(has_post.sum()), "n_upstream": int(has_up.sum()),
            "post_pct": 100.0 * res.acc_x, "upstream_pct": 100.0 * res.acc_y,
            "b": res.b, "c": res.c, "p": res.p,
        })
    out = pd.DataFrame(rows, index=pd.Index(list(per_model), name="model"))
    out["p_holm"] = stats.holm(out["p"].to_numpy())
    return out


def _label_group(value: Any, name: str) -> tuple[Hashable, ...]:
    if isinstance(value, str):
        return (value,)
    try:
        out = tuple(value)
    except TypeError as exc:
        raise ValueError(f"{name} must be a label or a collection of labels, got {value!r}") from exc
    if not out:
        raise ValueError(f"{name} must name at least one label")
    return out
