"""Statistics used in the Trek analyses (paper appendix A.3/A.4 and B.7).

Everything here is a pure function over arrays: nothing reads files or keeps state. The
functions cover

* accuracy: :func:`accuracy`, :func:`micro_macro`, :func:`accuracy_ci_table`;
* confidence intervals: :func:`wilson_ci`, :func:`bootstrap_ci`;
* paired tests: :func:`mcnemar_exact`, :func:`mcnemar`, :func:`cochrans_q`;
* multiple testing: :func:`holm`;
* agreement: :func:`cohens_kappa` (with an interval: :func:`cohens_kappa_ci`), :func:`multilabel_kappa`;
* a judge's shares corrected by a reviewed sample: :func:`prediction_powered_share` (the share
  among the N traced cases; :func:`ppi_lambda`, the tuned weight of PPI++), :func:`ppi_mean` (the
  population rate), :func:`ppi_paired_difference` (two systems on the same questions, with a
  p-value), both stratified on request, and :func:`ppi_mean_ipw` / :func:`ppi_paired_difference_ipw`
  for reviews drawn with unequal probabilities.

Tables that compare runs (Table 9's paired comparisons, the attribution prevalence test) are
built from these in :mod:`trek.analysis`.

Where scipy or statsmodels already implements a procedure it is used, but the inputs are
checked first so that bad data fails with a :class:`ValueError` naming the argument instead of
producing NaN, a warning or a confusing message from deep inside a library.

Correctness vectors are 1-D arrays of 0/1 (any integer or float dtype) or booleans. Missing
grades (NaN/None) are always rejected: the caller decides how to treat unparsed or ungraded
items and must drop them before calling.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as _scipy_stats
from statsmodels.stats import contingency_tables as _sm_tables
from statsmodels.stats import inter_rater as _sm_inter_rater
from statsmodels.stats import multitest as _sm_multitest
from statsmodels.stats import proportion as _sm_proportion

__all__ = [
    "McNemarResult",
    "CochranResult",
    "accuracy",
    "micro_macro",
    "accuracy_ci_table",
    "wilson_ci",
    "macro_jeffreys_ci",
    "MACRO_INTERVALS",
    "bootstrap_ci",
    "mcnemar_exact",
    "mcnemar",
    "cochrans_q",
    "holm",
    "cohens_kappa",
    "cohens_kappa_ci",
    "kappa_undefined",
    "multilabel_kappa",
    "is_missing_scalar",
    "label_set",
    "prediction_powered_share",
    "ppi_lambda",
    "PPIResult",
    "PSEUDO_OBSERVATIONS",
    "ppi_mean",
    "ppi_paired_difference",
    "ppi_mean_ipw",
    "ppi_paired_difference_ipw",
    "ppi_reviews_needed",
]

SeedLike = int | np.random.Generator | np.random.SeedSequence | None

# Row labels appended to the per-group rows of :func:`accuracy_ci_table`.
_SUMMARY_ROWS = ("micro", "macro")


# ---------------------------------------------------------------------------
# Result types
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class McNemarResult:
    """Outcome of :func:`mcnemar` on two paired 0/1 vectors ``x`` and ``y``.

    Attributes:
        b: number of items where ``x`` is 1 and ``y`` is 0.
        c: number of items where ``x`` is 0 and ``y`` is 1.
        n: number of paired items.
        p: two-sided exact McNemar p-value (see :func:`mcnemar_exact`).
        acc_x: mean of ``x`` as a proportion in [0, 1].
        acc_y: mean of ``y`` as a proportion in [0, 1].
    """

    b: int
    c: int
    n: int
    p: float
    acc_x: float
    acc_y: float


@dataclass(frozen=True)
class CochranResult:
    """Outcome of :func:`cochrans_q`.

    Attributes:
        q: Cochran's Q statistic (0.0 in the degenerate all-constant case).
        df: degrees of freedom, ``conditions - 1``.
        p: p-value from the chi-square distribution with ``df`` degrees of freedom.
    """

    q: float
    df: int
    p: float


# ---------------------------------------------------------------------------
# Input checking helpers
# ---------------------------------------------------------------------------


def _as_array(values: Any, name: str) -> np.ndarray:
    """``np.asarray`` that turns numpy's own failures into a ValueError naming ``name``."""
    if values is None:
        raise ValueError(f"{name} must be an array-like, got None")
    if isinstance(values, str | bytes):
        raise ValueError(f"{name} must be an array-like of values, got a single string {values!r}")
    if isinstance(values, pd.DataFrame | pd.Series):
        values = values.to_numpy()
    elif isinstance(values, Iterable) and not hasattr(values, "__array__") and not hasattr(values, "__len__"):
        # Generators and other one-shot iterables.
        values = list(values)
    try:
        return np.asarray(values)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{name} could not be read as an array: {exc}") from exc


def _missing_mask(arr: np.ndarray) -> np.ndarray:
    """Boolean mask of NaN/None/pd.NA entries, for arrays of any dtype."""
    return np.asarray(pd.isna(arr), dtype=bool)


def _vector(values: Any, name: str) -> np.ndarray:
    """A non-empty 1-D array without missing entries."""
    arr = _as_array(values, name)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got an array of shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{name} is empty")
    n_missing = int(_missing_mask(arr).sum())
    if n_missing:
        raise ValueError(f"{name} contains {n_missing} missing value(s) (NaN/None); drop them before calling")
    return arr


def _to_binary(arr: np.ndarray, name: str) -> np.ndarray:
    """Check that a missing-free array holds only 0/1 (or booleans); return it as int64."""
    if arr.dtype == bool:
        return arr.astype(np.int64)
    if arr.dtype.kind in "iuf":
        ok = (arr == 0) | (arr == 1)
    elif arr.dtype.kind == "O":
        ok = np.array(
            [isinstance(v, bool | np.bool_ | numbers.Real) and v in (0, 1) for v in arr.ravel()],
            dtype=bool,
        ).reshape(arr.shape)
    else:
        raise ValueError(f"{name} must hold 0/1 or True/False values, got dtype {arr.dtype}")
    if not ok.all():
        bad = arr[~ok].ravel()
        raise ValueError(
            f"{name} must hold only 0/1 or True/False values; found {bad.size} other value(s), "
            f"e.g. {bad[0]!r}"
        )
    return arr.astype(np.float64).astype(np.int64)


def _binary_vector(values: Any, name: str) -> np.ndarray:
    """A non-empty 1-D int64 array of 0/1."""
    return _to_binary(_vector(values, name), name)


def _same_length(a: np.ndarray, b: np.ndarray, name_a: str, name_b: str) -> None:
    if a.shape[0] != b.shape[0]:
        raise ValueError(
            f"{name_a} and {name_b} must have the same length, got {a.shape[0]} and {b.shape[0]}"
        )


def _count(value: Any, name: str) -> int:
    """A non-negative integer count (integral floats such as 3.0 are accepted)."""
    integral = isinstance(value, numbers.Integral) or (
        isinstance(value, numbers.Real) and math.isfinite(float(value)) and float(value).is_integer()
    )
    if not integral:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    out = int(value)
    if out < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return out


def _level(level: Any) -> float:
    """A confidence level strictly between 0 and 1."""
    if not isinstance(level, numbers.Real) or not (0.0 < float(level) < 1.0):
        raise ValueError(f"level must be a number strictly between 0 and 1, got {level!r}")
    return float(level)


# ---------------------------------------------------------------------------
# Accuracy
# ---------------------------------------------------------------------------


def accuracy(correct: Any) -> float:
    """Fraction of correct items.

    Args:
        correct: 1-D array-like of length n >= 1 holding 0/1 (any numeric dtype) or booleans.
            NaN/None entries are rejected: unparsed or ungraded answers must be filtered out
            (or counted as wrong) by the caller before calling.

    Returns:
        The mean of ``correct`` as a Python float in [0, 1].

    Raises:
        ValueError: if ``correct`` is empty, not 1-D, has missing entries or values other than 0/1.
    """
    return float(_binary_vector(correct, "correct").mean())


def _group_codes(groups: Any, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Check ``groups`` against a length-``n`` correctness vector; return (codes, labels).

    ``codes`` is an int array of length n; ``labels`` holds the distinct labels in order of
    first appearance, so ``labels[codes[i]]`` is the label of item i.
    """
    arr = _vector(groups, "groups")
    if arr.shape[0] != n:
        raise ValueError(f"correct and groups must have the same length, got {n} and {arr.shape[0]}")
    codes, labels = pd.factorize(arr, sort=False)
    return np.asarray(codes, dtype=np.int64), np.asarray(labels, dtype=object)


def _macro_from_codes(correct: np.ndarray, codes: np.ndarray, n_groups: int) -> float:
    """Unweighted mean of per-group means (every group is assumed non-empty)."""
    sizes = np.bincount(codes, minlength=n_groups)
    hits = np.bincount(codes, weights=correct, minlength=n_groups)
    return float(np.mean(hits / sizes))


def micro_macro(correct: Any, groups: Any) -> tuple[float, float]:
    """Micro and macro accuracy over groups (e.g. datasets or question categories).

    Args:
        correct: 1-D array-like of n >= 1 values in {0, 1} (or booleans), no NaN/None.
        groups: 1-D array-like of n hashable group labels (strings, ints, ...), no NaN/None.

    Returns:
        ``(micro, macro)`` as floats in [0, 1]. ``micro`` is the mean over all n items, so
        large groups weigh more; ``macro`` is the plain mean of the per-group accuracies, so
        every group weighs the same.

    Raises:
        ValueError: on empty input, mismatched lengths, missing values or non-0/1 ``correct``.
    """
    y = _binary_vector(correct, "correct")
    codes, labels = _group_codes(groups, y.shape[0])
    return float(y.mean()), _macro_from_codes(y, codes, len(labels))


#: How the macro row's interval is made: ``jeffreys`` (default, :func:`macro_jeffreys_ci`) or
#: ``bootstrap`` (the stratified percentile bootstrap, zero-width when every group is all right or
#: all wrong).
MACRO_INTERVALS = ("jeffreys", "bootstrap")


def macro_jeffreys_ci(ks: Sequence[int], ns: Sequence[int], level: float = 0.95) -> tuple[float, float]:
    """A Bayesian interval for the plain mean of several groups' proportions (macro accuracy).

    Each group's proportion gets its Jeffreys posterior Beta(k + 1/2, n - k + 1/2); the macro
    accuracy is their mean, whose posterior mean and variance follow exactly (the groups are
    independent); the interval is the central ``level`` interval of the Beta with those two
    moments. With one group it is that group's Jeffreys interval. It never has zero width: a group
    of 6 answers that are all wrong still leaves its proportion uncertain, where a bootstrap that
    resamples within groups sees no variation at all.

    Raises:
        ValueError: on no groups, a group with ``n < 1``, ``k`` outside [0, n] or a bad ``level``.
    """
    level = _level(level)
    if len(ks) != len(ns) or not len(ns):
        raise ValueError("macro_jeffreys_ci needs one k and one n per group, and at least one group")
    means, variances = [], []
    for k, n in zip(ks, ns, strict=True):
        k_i, n_i = _count(k, "k"), _count(n, "n")
        if n_i == 0 or k_i > n_i:
            raise ValueError(f"each group needs 0 <= k <= n and n >= 1, got k={k_i}, n={n_i}")
        a, b = k_i + 0.5, n_i - k_i + 0.5
        means.append(a / (a + b))
        variances.append(a * b / ((a + b) ** 2 * (a + b + 1)))
    g = len(ns)
    mean = float(np.mean(means))
    var = float(np.sum(variances)) / g**2
    common = mean * (1 - mean) / var - 1
    alpha = 1.0 - level
    low, high = _scipy_stats.beta.ppf([alpha / 2, 1 - alpha / 2], mean * common, (1 - mean) * common)
    # As for one group's Jeffreys interval: 0 below when no group has a success, 1 above when no
    # group has a failure (the interval then contains the estimate).
    if not any(ks):
        low = 0.0
    if all(int(k) == int(n) for k, n in zip(ks, ns, strict=True)):
        high = 1.0
    return float(np.clip(low, 0.0, 1.0)), float(np.clip(high, 0.0, 1.0))


def accuracy_ci_table(
    correct: Any,
    groups: Any,
    level: float = 0.95,
    *,
    n_resamples: int = 10_000,
    seed: SeedLike = 0,
    macro_interval: str = "jeffreys",
) -> pd.DataFrame:
    """Per-group accuracy with confidence intervals, plus micro and macro summary rows.

    Args:
        correct: 1-D array-like of n >= 1 values in {0, 1} (or booleans), no NaN/None.
        groups: 1-D array-like of n hashable group labels, no NaN/None. No group may be
            called ``"micro"`` or ``"macro"`` (those names are taken by the summary rows).
        level: confidence level of every interval, strictly between 0 and 1.
        n_resamples: number of bootstrap resamples for the macro interval (``bootstrap`` only).
        seed: seed (or ``numpy.random.Generator``) for the macro bootstrap. The default of 0
            makes the table reproducible; pass ``None`` for fresh randomness.
        macro_interval: ``jeffreys`` (default) or ``bootstrap`` (:data:`MACRO_INTERVALS`).

    Returns:
        A DataFrame indexed by group label (groups in order of first appearance, then the rows
        ``"micro"`` and ``"macro"``; index name ``"group"``) with columns

        * ``n`` (int): number of items; for ``"macro"`` the total number of items;
        * ``k`` (nullable Int64): number of correct items; ``<NA>`` for ``"macro"`` (no ratio of counts);
        * ``accuracy`` (float): proportion in [0, 1] (not percent);
        * ``ci_low``, ``ci_high`` (float): interval bounds as proportions.

        Group rows and ``"micro"`` use the Wilson score interval (:func:`wilson_ci`). The
        ``"macro"`` row uses the Jeffreys interval of the mean of the group proportions
        (:func:`macro_jeffreys_ci`), never of zero width; with ``macro_interval="bootstrap"`` a
        stratified percentile bootstrap (:func:`bootstrap_ci` with ``groups``: each resample
        redraws, with replacement, the same number of items from within each group), which has
        zero width when every group is all right or all wrong.

    Raises:
        ValueError: on the same bad input as :func:`micro_macro`, a bad ``level`` or
            ``n_resamples``, or a group named ``"micro"``/``"macro"``.
    """
    level = _level(level)
    y = _binary_vector(correct, "correct")
    codes, labels = _group_codes(groups, y.shape[0])
    clashes = [lab for lab in labels if isinstance(lab, str) and lab in _SUMMARY_ROWS]
    if clashes:
        raise ValueError(f"groups may not use the reserved labels 'micro'/'macro', found {clashes[0]!r}")

    rows: list[dict[str, Any]] = []
    index: list[Hashable] = []
    for g, label in enumerate(labels):
        sel = y[codes == g]
        n_g, k_g = int(sel.size), int(sel.sum())
        low, high = wilson_ci(k_g, n_g, level)
        rows.append({"n": n_g, "k": k_g, "accuracy": k_g / n_g, "ci_low": low, "ci_high": high})
        index.append(label)

    n, k = int(y.size), int(y.sum())
    low, high = wilson_ci(k, n, level)
    rows.append({"n": n, "k": k, "accuracy": k / n, "ci_low": low, "ci_high": high})
    index.append("micro")

    n_groups = len(labels)
    macro = _macro_from_codes(y, codes, n_groups)
    if macro_interval not in MACRO_INTERVALS:
        raise ValueError(f"macro_interval must be one of {', '.join(MACRO_INTERVALS)}, not {macro_interval!r}")
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive integer, got {n_resamples!r}")
    if macro_interval == "jeffreys":
        low, high = macro_jeffreys_ci([int(y[codes == g].sum()) for g in range(n_groups)],
                                      [int((codes == g).sum()) for g in range(n_groups)], level)
    else:
        # Stratified resamples keep every item inside its own group, so the original codes still
        # describe the resampled vector and the macro statistic can reuse them.
        low, high = bootstrap_ci(
            y,
            statistic=lambda v: _macro_from_codes(v, codes, n_groups),
            n_resamples=n_resamples,
            level=level,
            seed=seed,
            groups=codes,
        )
    rows.append({"n": n, "k": pd.NA, "accuracy": macro, "ci_low": low, "ci_high": high})
    index.append("macro")

    table = pd.DataFrame(rows, index=pd.Index(index, name="group", dtype=object))
    table["n"] = table["n"].astype(np.int64)
    table["k"] = table["k"].astype("Int64")
    return table


# ---------------------------------------------------------------------------
# Confidence intervals
# ---------------------------------------------------------------------------


def wilson_ci(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion k/n.

    Args:
        k: number of successes, an integer with 0 <= k <= n.
        n: number of trials, an integer >= 1.
        level: confidence level strictly between 0 and 1.

    Returns:
        ``(low, high)`` as floats, clipped to [0, 1]. Computed by
        ``statsmodels.stats.proportion.proportion_confint(method="wilson")``.

    Raises:
        ValueError: if ``n`` is 0, ``k`` or ``n`` is negative or not an integer, ``k > n`` or
            ``level`` is outside (0, 1).
    """
    k_i = _count(k, "k")
    n_i = _count(n, "n")
    if n_i == 0:
        raise ValueError("n must be at least 1 (no trials, so the proportion is undefined)")
    if k_i > n_i:
        raise ValueError(f"k must not exceed n, got k={k_i} and n={n_i}")
    alpha = 1.0 - _level(level)
    low, high = _sm_proportion.proportion_confint(k_i, n_i, alpha=alpha, method="wilson")
    return float(np.clip(low, 0.0, 1.0)), float(np.clip(high, 0.0, 1.0))


def bootstrap_ci(
    values: Any,
    statistic: Callable[[np.ndarray], float] = np.mean,
    n_resamples: int = 10_000,
    level: float = 0.95,
    seed: SeedLike = None,
    groups: Any = None,
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval for ``statistic(values)``.

    Each resample draws n items with replacement; the interval bounds are the
    ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles (linear interpolation) of the
    statistic over the resamples.

    Args:
        values: 1-D array-like of n >= 1 finite numbers (e.g. 0/1 correctness), no NaN/None.
        statistic: function mapping a 1-D float array of length n to a number. Defaults to
            ``np.mean``.
        n_resamples: number of resamples, an integer >= 1.
        level: confidence level strictly between 0 and 1.
        seed: ``None`` (fresh entropy), an int or ``SeedSequence`` (the same seed always gives
            the same interval), or a ``numpy.random.Generator`` (used as is and advanced).
        groups: optional 1-D array-like of n hashable stratum labels, no NaN/None. When given,
            the resampling is stratified: position i is refilled with a random item from the
            stratum of item i. Stratum sizes therefore never change, and the resampled array
            still lines up with the original ``groups``, so ``statistic`` may close over them
            (this is how :func:`accuracy_ci_table` gets a macro-accuracy interval).

    Returns:
        ``(low, high)`` as floats.

    Raises:
        ValueError: if ``values`` is empty, not 1-D, non-numeric or has NaN/inf; if
            ``groups`` has the wrong length or missing labels; if ``statistic`` is not
            callable; or if ``n_resamples``/``level`` are out of range.
    """
    arr = _vector(values, "values")
    if arr.dtype == bool:
        arr = arr.astype(np.float64)
    try:
        x = arr.astype(np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"values must be numeric, got dtype {arr.dtype}") from exc
    if not np.isfinite(x).all():
        raise ValueError("values must be finite (found inf)")
    if not callable(statistic):
        raise ValueError(f"statistic must be callable, got {statistic!r}")
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, numbers.Integral) or n_resamples < 1:
        raise ValueError(f"n_resamples must be a positive integer, got {n_resamples!r}")
    level = _level(level)

    n = x.shape[0]
    if groups is None:
        codes = np.zeros(n, dtype=np.int64)
    else:
        g = _vector(groups, "groups")
        _same_length(x, g, "values", "groups")
        codes = np.asarray(pd.factorize(g, sort=False)[0], dtype=np.int64)

    # Items sorted by stratum; stratum s occupies order[start[s] : start[s] + size[s]].
    order = np.argsort(codes, kind="stable")
    sizes = np.bincount(codes)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    pos_start = starts[codes]
    pos_size = sizes[codes]

    rng = np.random.default_rng(seed)
    stats_out = np.empty(int(n_resamples), dtype=np.float64)
    for r in range(int(n_resamples)):
        idx = order[pos_start + rng.integers(0, pos_size)]
        stats_out[r] = float(statistic(x[idx]))
    alpha = 1.0 - level
    low, high = np.quantile(stats_out, [alpha / 2.0, 1.0 - alpha / 2.0])
    return float(low), float(high)


# ---------------------------------------------------------------------------
# Paired tests
# ---------------------------------------------------------------------------


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar test on the discordant counts of a paired 2x2 table.

    Under the null hypothesis each discordant pair is equally likely to go either way, so
    ``b ~ Binomial(b + c, 0.5)``; the p-value is the two-sided exact binomial test
    (``scipy.stats.binomtest``), which for p = 0.5 equals ``min(1, 2 * P(X <= min(b, c)))``.

    Args:
        b: number of pairs where the first condition is correct and the second wrong
            (non-negative integer).
        c: number of pairs where the first condition is wrong and the second correct
            (non-negative integer).

    Returns:
        The p-value as a float in (0, 1]. With no discordant pairs (``b + c == 0``) there is
        no evidence of a difference and the result is 1.0.

    Raises:
        ValueError: if ``b`` or ``c`` is negative or not an integer.
    """
    b_i = _count(b, "b")
    c_i = _count(c, "c")
    if b_i + c_i == 0:
        return 1.0
    p = _scipy_stats.binomtest(b_i, b_i + c_i, 0.5, alternative="two-sided").pvalue
    return float(min(1.0, p))


def mcnemar(x: Any, y: Any) -> McNemarResult:
    """Exact McNemar test for two paired 0/1 outcome vectors.

    Args:
        x: 1-D array-like of n >= 1 values in {0, 1} (or booleans), no NaN/None; outcomes of
            the first condition.
        y: same shape and content rules as ``x``; outcomes of the second condition on the same
            items in the same order.

    Returns:
        A :class:`McNemarResult` with the discordant counts ``b`` (x=1, y=0) and ``c``
        (x=0, y=1), ``n``, the two-sided exact p-value and both accuracies as proportions.

    Raises:
        ValueError: on empty input, mismatched lengths, missing values or non-0/1 values.
    """
    xa = _binary_vector(x, "x")
    ya = _binary_vector(y, "y")
    _same_length(xa, ya, "x", "y")
    b = int(np.sum((xa == 1) & (ya == 0)))
    c = int(np.sum((xa == 0) & (ya == 1)))
    return McNemarResult(
        b=b,
        c=c,
        n=int(xa.size),
        p=mcnemar_exact(b, c),
        acc_x=float(xa.mean()),
        acc_y=float(ya.mean()),
    )


def cochrans_q(matrix: Any) -> CochranResult:
    """Cochran's Q test that several paired binary conditions share one success rate.

    With N the total number of successes, C_j the column totals, R_i the row totals and k the
    number of conditions, ``Q = (k - 1) * (k * sum(C_j**2) - N**2) / (k * N - sum(R_i**2))``,
    compared against a chi-square distribution with k - 1 degrees of freedom
    (``statsmodels.stats.contingency_tables.cochrans_q``).

    Args:
        matrix: 2-D array-like (or DataFrame) of shape (subjects, conditions) with
            subjects >= 1 and conditions >= 2, holding 0/1 or booleans and no NaN/None. Row i
            holds the outcomes of every condition on subject (question) i.

    Returns:
        A :class:`CochranResult` ``(q, df, p)``. When every row is constant (each subject is
        solved by all conditions or by none), the denominator is zero and Q is undefined; the
        data carry no evidence of a difference, so this case returns ``q=0.0`` and ``p=1.0``.

    Raises:
        ValueError: if ``matrix`` is not 2-D, is empty, has fewer than two columns, or holds
            missing or non-0/1 values.
    """
    arr = _as_array(matrix, "matrix")
    if arr.ndim != 2:
        raise ValueError(f"matrix must be 2-D (subjects, conditions), got an array of shape {arr.shape}")
    if arr.shape[0] == 0:
        raise ValueError("matrix is empty (no subjects)")
    if arr.shape[1] < 2:
        raise ValueError(f"matrix must have at least 2 conditions (columns), got {arr.shape[1]}")
    n_missing = int(_missing_mask(arr).sum())
    if n_missing:
        raise ValueError(f"matrix contains {n_missing} missing value(s) (NaN/None); drop those rows first")
    x = _to_binary(arr, "matrix")
    k = x.shape[1]
    df = k - 1
    row_totals = x.sum(axis=1)
    if np.all((row_totals == 0) | (row_totals == k)):
        return CochranResult(q=0.0, df=df, p=1.0)
    # statsmodels treats the largest observed value as "success"; with a non-constant row
    # present both 0 and 1 occur, so that value is 1.
    res = _sm_tables.cochrans_q(x)
    return CochranResult(q=float(res.statistic), df=int(res.df), p=float(res.pvalue))


# ---------------------------------------------------------------------------
# Multiple testing
# ---------------------------------------------------------------------------


def holm(pvalues: Any) -> np.ndarray:
    """Holm step-down adjustment of a family of p-values.

    The i-th smallest of m p-values is multiplied by ``m - i + 1``, a running maximum keeps the
    adjusted values monotone in the order of the raw ones, and the result is capped at 1
    (``statsmodels.stats.multitest.multipletests(method="holm")``).

    Args:
        pvalues: 1-D array-like of m >= 1 floats in [0, 1], no NaN/None.

    Returns:
        A float64 array of shape (m,) with the adjusted p-values in the same order as the input.

    Raises:
        ValueError: if ``pvalues`` is empty, not 1-D, has missing values or values outside [0, 1].
    """
    arr = _vector(pvalues, "pvalues")
    try:
        p = arr.astype(np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"pvalues must be numeric, got dtype {arr.dtype}") from exc
    if np.any((p < 0.0) | (p > 1.0)):
        raise ValueError(f"pvalues must lie in [0, 1], got min {p.min()!r} and max {p.max()!r}")
    adjusted = _sm_multitest.multipletests(p, method="holm")[1]
    return np.minimum(np.asarray(adjusted, dtype=np.float64), 1.0)


# ---------------------------------------------------------------------------
# Agreement
# ---------------------------------------------------------------------------


def cohens_kappa(labels_a: Any, labels_b: Any) -> float:
    """Cohen's kappa between two raters who labelled the same items.

    ``kappa = (p_o - p_e) / (1 - p_e)``, where ``p_o`` is the observed share of items with equal
    labels and ``p_e = sum_c p_a(c) * p_b(c)`` is the agreement expected from each rater's own
    label frequencies (``statsmodels.stats.inter_rater.cohens_kappa`` on the confusion table).

    Args:
        labels_a: 1-D array-like of n >= 1 categorical labels (strings, ints, bools, ...) from
            the first rater, no NaN/None.
        labels_b: 1-D array-like of n labels from the second rater, same items in the same order.

    Returns:
        Kappa as a float in [-1, 1]; 1.0 for perfect agreement. If the expected agreement is 1
        (both raters give every item the same single label) kappa is 0/0: **undefined**, NaN
        (:func:`kappa_undefined` gives the reason to show beside it). Agreement on such items
        says nothing about the raters' ability to tell the labels apart, so it is not read as 1.

    Raises:
        ValueError: on empty input, mismatched lengths or missing labels.
    """
    a = _vector(labels_a, "labels_a").astype(object)
    b = _vector(labels_b, "labels_b").astype(object)
    _same_length(a, b, "labels_a", "labels_b")
    return _kappa_from_codes(a, b)


def kappa_undefined(labels_a: Any, labels_b: Any) -> str | None:
    """Why Cohen's kappa of these two raters is undefined, or None when it is defined: both gave
    one single label to every item (chance agreement 1, kappa 0/0). Arguments as
    :func:`cohens_kappa`."""
    a = _vector(labels_a, "labels_a").astype(object)
    b = _vector(labels_b, "labels_b").astype(object)
    _same_length(a, b, "labels_a", "labels_b")
    values = pd.unique(np.concatenate([a, b]))
    if len(values) == 1:
        return f"undefined: both raters gave {values[0]!r} to every item (chance agreement 1, kappa 0/0)"
    return None


def cohens_kappa_ci(labels_a: Any, labels_b: Any, level: float = 0.95) -> tuple[float, float, float]:
    """Cohen's kappa with a normal-approximation confidence interval: ``(kappa, low, high)``.

    The standard error is the large-sample one of Fleiss, Cohen and Everitt (1969), as
    ``statsmodels.stats.inter_rater.cohens_kappa`` computes it; the interval is
    ``kappa -/+ z * se`` with ``z`` the normal quantile of ``(1 + level) / 2``, clipped to
    [-1, 1]. Arguments and the kappa are those of :func:`cohens_kappa`. When kappa is 0/0 (both
    raters used one single label), when one rater used one single label (kappa is then 0 whatever
    the other did, so an interval would only show rounding noise) or when its standard error is 0,
    there is no interval: ``low`` and ``high`` are NaN. (Few items give wide, approximate intervals; the counts belong beside them.)
    """
    lev = _level(level)
    a = _vector(labels_a, "labels_a").astype(object)
    b = _vector(labels_b, "labels_b").astype(object)
    _same_length(a, b, "labels_a", "labels_b")
    kappa = _kappa_from_codes(a, b)
    codes, uniques = pd.factorize(np.concatenate([a, b]), sort=False)
    n, m = a.shape[0], len(uniques)
    if m == 1:
        return kappa, float("nan"), float("nan")
    table = np.zeros((m, m), dtype=np.int64)
    np.add.at(table, (codes[:n], codes[n:]), 1)
    if (table.sum(axis=1) > 0).sum() == 1 or (table.sum(axis=0) > 0).sum() == 1:
        return kappa, float("nan"), float("nan")  # a rater gave one label throughout: kappa 0 by construction
    with np.errstate(all="ignore"):
        se = float(_sm_inter_rater.cohens_kappa(table).std_kappa)
    if not np.isfinite(se) or se == 0:
        return kappa, float("nan"), float("nan")
    z = float(_scipy_stats.norm.ppf((1 + lev) / 2))
    return kappa, max(-1.0, kappa - z * se), min(1.0, kappa + z * se)


def _kappa_from_codes(a: np.ndarray, b: np.ndarray) -> float:
    codes, uniques = pd.factorize(np.concatenate([a, b]), sort=False)
    n, m = a.shape[0], len(uniques)
    table = np.zeros((m, m), dtype=np.int64)
    np.add.at(table, (codes[:n], codes[n:]), 1)
    if m == 1:  # both raters used one single label throughout: kappa is 0/0, undefined
        return float("nan")
    expected = table.sum(axis=1) @ table.sum(axis=0)
    if expected == n * n:
        return float("nan")
    return float(_sm_inter_rater.cohens_kappa(table, return_results=False))


def is_missing_scalar(value: Any) -> bool:
    """True for None, NaN, pd.NA and NaT; False for anything else (including containers)."""
    if value is None:
        return True
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def label_set(item: Any, where: str) -> frozenset:
    """One item's labels as a frozenset; strings and missing values are rejected.

    ``where`` names the offending entry in error messages, e.g. ``"sets_a[3]"``.
    """
    if isinstance(item, str | bytes):
        raise ValueError(
            f"{where} must be a set or list of labels, got the string {item!r} "
            "(wrap a single label in a list)"
        )
    if is_missing_scalar(item):
        raise ValueError(f"{where} is missing; use an empty set for an item without labels")
    if isinstance(item, Mapping) or not isinstance(item, Iterable):
        raise ValueError(f"{where} must be a set or list of labels, got {type(item).__name__}")
    try:
        return frozenset(item.tolist() if isinstance(item, np.ndarray) else item)
    except TypeError as exc:
        raise ValueError(f"{where} holds an unhashable label: {exc}") from exc


def _label_sets(sets: Any, name: str) -> list[frozenset]:
    if sets is None or isinstance(sets, str | bytes | Mapping):
        raise ValueError(f"{name} must be a sequence of label sets, one per item")
    if isinstance(sets, pd.Series):
        sets = sets.tolist()
    items = list(sets)
    if not items:
        raise ValueError(f"{name} is empty")
    return [label_set(item, f"{name}[{i}]") for i, item in enumerate(items)]


def multilabel_kappa(sets_a: Any, sets_b: Any, labels: Sequence[Hashable]) -> float:
    """Cohen's kappa for multi-label attributions, over one yes/no decision per (item, label).

    Each rater assigns every item a set of labels (possibly empty). The sets are expanded into
    ``n_items * len(labels)`` binary decisions "does this item carry this label?" and
    :func:`cohens_kappa` is computed over those decisions.

    Args:
        sets_a: sequence of n >= 1 label collections (set, frozenset, list, tuple or 1-D array)
            from the first rater, one per item.
        sets_b: sequence of n label collections from the second rater, same items in the same
            order.
        labels: the full, non-empty label vocabulary without duplicates. Every label used in
            ``sets_a`` or ``sets_b`` must appear here (this catches typos).

    Returns:
        Kappa as a float; NaN (undefined, as :func:`cohens_kappa`) when every decision of both
        raters is the same one.

    Raises:
        ValueError: on empty input, mismatched lengths, a string where a set is expected,
            missing items, an empty/duplicated vocabulary or labels outside the vocabulary.
    """
    if labels is None or isinstance(labels, str | bytes):
        raise ValueError("labels must be a sequence of label names, not a single string")
    vocab = list(labels)
    if not vocab:
        raise ValueError("labels is empty")
    if len(set(vocab)) != len(vocab):
        raise ValueError("labels contains duplicates")
    a_sets = _label_sets(sets_a, "sets_a")
    b_sets = _label_sets(sets_b, "sets_b")
    if len(a_sets) != len(b_sets):
        raise ValueError(f"sets_a and sets_b must have the same length, got {len(a_sets)} and {len(b_sets)}")
    known = set(vocab)
    for name, sets in (("sets_a", a_sets), ("sets_b", b_sets)):
        for i, s in enumerate(sets):
            unknown = s - known
            if unknown:
                raise ValueError(
                    f"{name}[{i}] has label(s) not in labels: {', '.join(sorted(map(repr, unknown)))}"
                )
    a = np.array([lab in s for s in a_sets for lab in vocab], dtype=object)
    b = np.array([lab in s for s in b_sets for lab in vocab], dtype=object)
    return _kappa_from_codes(a, b)


# ---------------------------------------------------------------------------
# Prediction-powered inference of a share
# ---------------------------------------------------------------------------


def ppi_lambda(judge_all: Any, judge_reviewed: Any, human_reviewed: Any) -> float:
    """The PPI++ weight of the judge for a mean (power tuning, Angelopoulos et al. 2023).

    The variance of ``lam * mean(judge_all) + mean(human - lam * judge)`` is smallest at
    ``cov(human, judge) / ((1 + n / N) * var(judge))``: the covariance over the ``n`` reviewed
    cases (divided by n), the variance over the judge's labels of the reviewed and of all ``N``
    cases pooled (divided by ``n + N - 1``), as ppi-python estimates them. The weight is clipped
    to [0, 1]: 0 leaves the human labels alone, 1 is plain PPI. A judge that gives every case the
    same label carries no information and gets 0. Arguments as :func:`prediction_powered_share`.
    """
    f_all, f_n, y_n = _ppi_inputs(judge_all, judge_reviewed, human_reviewed)
    return _ppi_lambda(f_all.astype(np.float64), f_n.astype(np.float64), y_n.astype(np.float64))


def _ppi_inputs(judge_all: Any, judge_reviewed: Any, human_reviewed: Any) -> tuple[np.ndarray, ...]:
    f_all = _binary_vector(judge_all, "judge_all")
    f_n = _binary_vector(judge_reviewed, "judge_reviewed")
    y_n = _binary_vector(human_reviewed, "human_reviewed")
    _same_length(f_n, y_n, "judge_reviewed", "human_reviewed")
    return f_all, f_n, y_n


def _ppi_lambda(f_all: np.ndarray, f_n: np.ndarray, y_n: np.ndarray) -> float:
    n, big_n = f_n.size, f_all.size
    pooled = np.concatenate([f_n, f_all])
    var_f = float(pooled.var(ddof=1)) if pooled.size > 1 else 0.0
    if var_f == 0.0:
        return 0.0
    cov = float(np.mean((y_n - y_n.mean()) * (f_n - f_n.mean())))
    return float(np.clip(cov / ((1.0 + n / big_n) * var_f), 0.0, 1.0))


def prediction_powered_share(
    judge_all: Any,
    judge_reviewed: Any,
    human_reviewed: Any,
    alpha: float = 0.05,
    tuned: bool = True,
    *,
    small_sample: bool = True,
    with_weight: bool = False,
) -> tuple[float, ...]:
    """A judge's share corrected by a random reviewed sample: ``(estimate, low, high)``.

    Prediction-powered inference (PPI; Angelopoulos, Bates, Fannjiang, Jordan and Zrnic, *Science*
    2023) for the mean of a 0/1 label. With ``f`` the judge's label and ``y`` the human's, the
    estimate is ``lam * mean_N(f) + mean_n(y - lam * f)``: the judge's share over every case plus
    the mean human-minus-judge difference on the reviewed ones. Its standard error is
    ``sqrt(var_N(lam * f) / N + var_n(y - lam * f) / n)`` (variances divided by the count) and the
    interval is ``estimate -/+ z * se`` with ``z`` the normal quantile of ``1 - alpha / 2``,
    clipped to [0, 1]. ``tuned=False`` is plain PPI (``lam = 1``); ``tuned=True`` is PPI++ with
    the weight of :func:`ppi_lambda`. Valid whatever the judge's errors, provided the reviewed
    cases are a uniformly random sample of the traced ones.

    ``small_sample=False`` gives exactly that normal-approximation interval (ppi-python's
    ``ppi_mean_ci``). It covers too rarely when the review is small: with a good judge the n
    reviewed cases often hold no disagreement at all, the rectifier's variance is then estimated
    as 0 and the interval shrinks to the judge's own (``benchmarks/ppi_coverage.py``: 70% coverage
    at n = 30). ``small_sample=True`` (the default) adds two guards:

    * the rectifier's variance is computed over the reviewed (human, judge) 2x2 table with 0.5
      added to each of its four cells (the pseudo-counts of Agresti and Min's interval for paired
      proportions), so a sample without disagreements still admits some, and the quantile is
      Student's t with n - 1 degrees of freedom (the tuned weight is estimated from the same few
      cases);
    * where the judge gets no weight (``lam`` 0: it carries no information, or disagrees with the
      reviewer more often than chance) or the interval is wider than the human-only Wilson
      interval, the human-only share and its Wilson interval are returned: a review is never made
      less precise by the judge.

    Args:
        judge_all: the judge's 0/1 (or booleans) on every one of the N traced cases.
        judge_reviewed: the judge's 0/1 on the n reviewed cases.
        human_reviewed: the human's 0/1 on the same n cases, in the same order.
        alpha: 1 minus the confidence level, strictly between 0 and 1.
        tuned: PPI++ (the tuned weight) when true, plain PPI when false.
        small_sample: the two guards above (default) or the plain normal interval.
        with_weight: also return the weight the result used (0 where the human-only interval
            was returned), as a fourth value.

    Returns:
        ``(estimate, low, high)`` as floats (``(estimate, low, high, lam)`` with
        ``with_weight``); the estimate is not clipped (it can leave [0, 1] by a little when the
        sample is small), the bounds are.

    Raises:
        ValueError: on empty input, missing or non-0/1 values, ``judge_reviewed`` and
            ``human_reviewed`` of different lengths, or a bad ``alpha``.
    """
    level = _level(1.0 - alpha if isinstance(alpha, numbers.Real) else alpha)
    f_all, f_n, y_n = (a.astype(np.float64) for a in _ppi_inputs(judge_all, judge_reviewed, human_reviewed))
    lam = _ppi_lambda(f_all, f_n, y_n) if tuned else 1.0
    rect = y_n - lam * f_n
    estimate = float(lam * f_all.mean() + rect.mean())
    if small_sample:
        # Rectifier values of the four (human, judge) cells, each count plus 0.5.
        values = np.array([1.0 - lam, 1.0, -lam, 0.0])
        counts = np.array([np.sum((y_n == 1) & (f_n == 1)), np.sum((y_n == 1) & (f_n == 0)),
                           np.sum((y_n == 0) & (f_n == 1)), np.sum((y_n == 0) & (f_n == 0))]) + 0.5
        w = counts / counts.sum()
        rect_var = float(w @ (values - w @ values) ** 2)
    else:
        rect_var = float(rect.var())
    se = math.sqrt(float((lam * f_all).var()) / f_all.size + rect_var / rect.size)
    q = 0.5 + level / 2.0
    # Student's t with n - 1 degrees of freedom for a small review (the normal quantile as n grows).
    z = float(_scipy_stats.t.ppf(q, rect.size - 1)) if small_sample and rect.size > 1 else float(_scipy_stats.norm.ppf(q))
    low, high = max(0.0, estimate - z * se), min(1.0, estimate + z * se)
    if small_sample:
        h_low, h_high = wilson_ci(int(y_n.sum()), int(y_n.size), level)
        if lam == 0.0 or high - low > h_high - h_low:
            return (float(y_n.mean()), h_low, h_high, 0.0)[: 4 if with_weight else 3]
    return (estimate, low, high, lam)[: 4 if with_weight else 3]


# ---------------------------------------------------------------------------
# Prediction-powered inference of a population rate and of a paired difference
# ---------------------------------------------------------------------------

#: Pseudo-observations spread evenly over the (human, judge) value pairs of the reviewed cases
#: when the rectifier's variance is estimated with the small-sample guard: 2 in all, so 0.5 a cell
#: for a 0/1 rate (Agresti and Min's paired-proportion pseudo-counts) and 2/9 a cell for a
#: difference of two 0/1 labels (values -1, 0, 1).
PSEUDO_OBSERVATIONS = 2.0

_RATE_SUPPORT = (0.0, 1.0)
_DIFFERENCE_SUPPORT = (-1.0, 0.0, 1.0)


@dataclass(frozen=True)
class PPIResult:
    """Everything :func:`ppi_mean` and :func:`ppi_paired_difference` computed.

    ``estimate``, ``low``, ``high`` as the tuple they return (bounds clipped to the range the
    quantity can take); ``se`` the standard error; ``df`` the degrees of freedom of the Student's t
    quantile (``inf``: the normal quantile); ``p_value`` the two-sided p-value of "the quantity is
    0" (a difference; NaN for a rate); ``lam`` the judge's weight (per stratum in ``strata``; 0 for
    the human-only fallback); ``human_only`` whether the small-sample guard returned the review's
    own interval; ``n_reviewed`` and ``n_unreviewed`` the counts; ``strata`` one
    ``(name, weight, estimate, se, lam, n_reviewed, n_unreviewed)`` per stratum, empty unstratified.
    """

    estimate: float
    low: float
    high: float
    se: float
    df: float
    p_value: float
    lam: float
    human_only: bool
    n_reviewed: int
    n_unreviewed: int
    strata: tuple[tuple[Any, ...], ...] = ()


def _guarded_rect_var(y: np.ndarray, f: np.ndarray, lam: float, support: Sequence[float]) -> float:
    """Variance of ``y - lam * f`` over the reviewed (human, judge) table with
    :data:`PSEUDO_OBSERVATIONS` spread over its cells (``support``: the values one label takes)."""
    cells = [(a, b) for a in support for b in support]
    counts = np.array([np.sum((y == a) & (f == b)) for a, b in cells], dtype=np.float64)
    counts += PSEUDO_OBSERVATIONS / len(cells)
    values = np.array([a - lam * b for a, b in cells])
    w = counts / counts.sum()
    return float(w @ (values - w @ values) ** 2)


def _disjoint_lambda(y_n: np.ndarray, f_n: np.ndarray, f_u: np.ndarray) -> float:
    """PPI++'s weight for a mean from a reviewed and a disjoint unreviewed set (ppi-python's
    ``cov_n(y, f) / ((1 + n / N_u) * var(f))``, the judge's variance pooled over both sets)."""
    if f_u.size == 0:
        return 0.0
    pooled = np.concatenate([f_n, f_u])
    var_f = float(pooled.var(ddof=1)) if pooled.size > 1 else 0.0
    if var_f <= 0.0:
        return 0.0
    cov = float(np.mean((y_n - y_n.mean()) * (f_n - f_n.mean())))
    return float(np.clip(cov / ((1.0 + y_n.size / f_u.size) * var_f), 0.0, 1.0))


@dataclass(frozen=True)
class _Part:
    estimate: float
    var: float  # of the estimate
    lam: float
    n: int
    n_u: int


def _part(y_n: np.ndarray, f_n: np.ndarray, f_u: np.ndarray, *, tuned: bool, small_sample: bool,
          support: Sequence[float], lam: float | None = None) -> _Part:
    """The PPI (or PPI++) estimate of a mean and its variance from one reviewed and one disjoint
    unreviewed set; ``lam`` fixes the weight (0: the reviewed cases alone)."""
    if lam is None:
        lam = (_disjoint_lambda(y_n, f_n, f_u) if tuned else 1.0) if f_u.size else 0.0
    rect = y_n - lam * f_n
    estimate = float(rect.mean() + (lam * f_u.mean() if f_u.size else 0.0))
    if small_sample:
        pooled = np.concatenate([f_n, f_u])
        judge_var = float(pooled.var(ddof=1)) if pooled.size > 1 else 0.0
        rect_var = _guarded_rect_var(y_n, f_n, lam, support)
    else:
        judge_var = float(f_u.var()) if f_u.size else 0.0
        rect_var = float(rect.var())
    var = rect_var / y_n.size + (lam**2 * judge_var / f_u.size if f_u.size else 0.0)
    return _Part(estimate, var, float(lam), int(y_n.size), int(f_u.size))


def _quantile(level: float, df: float) -> float:
    q = 0.5 + level / 2.0
    return float(_scipy_stats.norm.ppf(q)) if math.isinf(df) else float(_scipy_stats.t.ppf(q, df))


def _two_sided_p(estimate: float, se: float, df: float) -> float:
    if se <= 0.0:
        return 1.0 if estimate == 0.0 else 0.0
    stat = abs(estimate) / se
    return float(2.0 * (_scipy_stats.norm.sf(stat) if math.isinf(df) else _scipy_stats.t.sf(stat, df)))


def _welch_df(parts: Sequence[_Part], weights: Sequence[float]) -> float:
    """Welch-Satterthwaite degrees of freedom of ``sum(w_k^2 var_k)`` (each stratum n_k - 1, at least 1)."""
    v = [w**2 * p.var for p, w in zip(parts, weights, strict=True)]
    den = sum(x**2 / max(p.n - 1, 1) for x, p in zip(v, parts, strict=True))
    return float(sum(v) ** 2 / den) if den > 0 else float(max(sum(p.n for p in parts) - 1, 1))


def _strata_codes(strata: Any, n: int, name: str) -> np.ndarray:
    arr = _vector(strata, name) if n else _as_array(strata, name)
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(f"{name} must be 1-D with one stratum per case ({n}), got shape {arr.shape}")
    return arr


def _stratify(ys: Sequence[np.ndarray], fs_n: Sequence[np.ndarray], fs_u: Sequence[np.ndarray],
              strata_unreviewed: Any, strata_reviewed: Any, stratum_sizes: Mapping | None
              ) -> list[tuple[Any, float, list[np.ndarray], list[np.ndarray], list[np.ndarray]]]:
    """Split the arrays by stratum: ``[(name, weight, ys, fs_n, fs_u)]``, weights summing to 1."""
    if (strata_unreviewed is None) != (strata_reviewed is None):
        raise ValueError("give both strata_unreviewed and strata_reviewed, or neither")
    s_n = _strata_codes(strata_reviewed, ys[0].size, "strata_reviewed")
    s_u = _strata_codes(strata_unreviewed, fs_u[0].size, "strata_unreviewed")
    names = sorted(set(s_n.tolist()) | set(s_u.tolist()), key=str)
    out = []
    for k in names:
        m_n, m_u = s_n == k, s_u == k
        if not m_n.any():
            raise ValueError(f"stratum {k!r} has no reviewed case; review at least one case in every stratum")
        out.append((k, float(m_n.sum() + m_u.sum()), [y[m_n] for y in ys], [f[m_n] for f in fs_n],
                    [f[m_u] for f in fs_u]))
    if stratum_sizes is not None:
        missing = [k for k in names if k not in stratum_sizes]
        if missing:
            raise ValueError(f"stratum_sizes has no size for stratum {missing[0]!r}")
        sizes = []
        for k in names:
            size = stratum_sizes[k]
            if not isinstance(size, numbers.Real) or not float(size) > 0:
                raise ValueError(f"stratum_sizes[{k!r}] must be a positive number, got {size!r}")
            sizes.append(float(size))
        out = [(k, s, *rest) for (k, _, *rest), s in zip(out, sizes, strict=True)]
    total = sum(w for _, w, *_ in out)
    return [(k, w / total, *rest) for k, w, *rest in out]


def _ppi(y_n: np.ndarray, f_n: np.ndarray, f_u: np.ndarray, *, level: float, tuned: bool, small_sample: bool,
         support: Sequence[float], bounds: tuple[float, float], strata: tuple[Any, Any] | None,
         stratum_sizes: Mapping | None, wilson: bool) -> PPIResult:
    """The shared body of :func:`ppi_mean` and :func:`ppi_paired_difference` (one y, one f)."""
    lo_b, hi_b = bounds

    def finish(parts: list[_Part], weights: list[float], human_only: bool, names: list[Any]) -> PPIResult:
        est = float(sum(w * p.estimate for p, w in zip(parts, weights, strict=True)))
        se = math.sqrt(sum(w**2 * p.var for p, w in zip(parts, weights, strict=True)))
        if not small_sample:
            df = math.inf
        elif len(parts) == 1:
            df = float(max(parts[0].n - 1, 1))
        else:
            df = _welch_df(parts, weights)
        half = _quantile(level, df) * se
        p = _two_sided_p(est, se, df) if lo_b < 0 else float("nan")
        lam = parts[0].lam if len(parts) == 1 else float(sum(w * q.lam for q, w in zip(parts, weights, strict=True)))
        rows = tuple((k, w, q.estimate, math.sqrt(q.var), q.lam, q.n, q.n_u)
                     for k, w, q in zip(names, weights, parts, strict=True)) if names != [None] else ()
        return PPIResult(est, max(lo_b, est - half), min(hi_b, est + half), se, df, p, lam, human_only,
                         int(y_n.size), int(f_u.size), rows)

    if strata is None:
        groups = [(None, 1.0, [y_n], [f_n], [f_u])]
    else:
        groups = _stratify([y_n], [f_n], [f_u], strata[0], strata[1], stratum_sizes)
    names = [g[0] for g in groups]
    weights = [g[1] for g in groups]
    parts = []
    for _, _, (y, ), (fn, ), (fu, ) in groups:
        parts.append(_part(y, fn, fu, tuned=tuned, small_sample=small_sample, support=support))
    result = finish(parts, weights, False, names)
    if not small_sample:
        return result
    # The review's own interval, where the judge adds nothing or would widen it.
    if wilson and strata is None:
        h_low, h_high = _wilson_t(int(y_n.sum()), int(y_n.size), level)
        if result.lam == 0.0 or result.high - result.low > h_high - h_low:
            part = _part(y_n, f_n, f_u, tuned=tuned, small_sample=True, support=support, lam=0.0)
            return PPIResult(float(y_n.mean()), h_low, h_high, math.sqrt(part.var), float(max(y_n.size - 1, 1)),
                             float("nan"), 0.0, True, int(y_n.size), int(f_u.size))
        return result
    human = finish([_part(y, fn, fu, tuned=tuned, small_sample=True, support=support, lam=0.0)
                    for _, _, (y, ), (fn, ), (fu, ) in groups], weights, True, names)
    if all(p.lam == 0.0 for p in parts) or result.high - result.low > human.high - human.low:
        return human
    return result


def _wilson_t(k: int, n: int, level: float) -> tuple[float, float]:
    """Wilson's score interval for k of n with Student's t quantile (n - 1 degrees of freedom) in
    place of the normal one: the review-only interval of the small-sample guard. The normal
    quantile's coverage dips to 0.92 at some (n, rate) pairs below n = 100 (0.919 at n = 5 and a
    10% rate, 0.923 at n = 25 and 30%); with t it stays at 0.936 or more at rates 0.1 to 0.5 for
    the sizes checked, n = 5, 10, 20, 25, 30, 50, 90, 100, 180 (exact binomial sums)."""
    z = _quantile(level, float(max(n - 1, 1)))
    p = k / n
    d = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / d
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, centre - half), min(1.0, centre + half)


def _rate_inputs(judge_unreviewed: Any, judge_reviewed: Any, human_reviewed: Any,
                 names: tuple[str, str, str] = ("judge_unreviewed", "judge_reviewed", "human_reviewed"),
                 ) -> tuple[np.ndarray, ...]:
    f_n = _binary_vector(judge_reviewed, names[1]).astype(np.float64)
    y_n = _binary_vector(human_reviewed, names[2]).astype(np.float64)
    _same_length(f_n, y_n, names[1], names[2])
    f_u = _binary_vector(judge_unreviewed, names[0]).astype(np.float64) \
        if _as_array(judge_unreviewed, names[0]).size else np.zeros(0)
    return f_u, f_n, y_n


def _alpha_level(alpha: Any) -> float:
    return _level(1.0 - alpha if isinstance(alpha, numbers.Real) else alpha)


def ppi_mean(
    judge_unreviewed: Any,
    judge_reviewed: Any,
    human_reviewed: Any,
    alpha: float = 0.05,
    *,
    tuned: bool = True,
    small_sample: bool = True,
    strata_unreviewed: Any = None,
    strata_reviewed: Any = None,
    stratum_sizes: Mapping | None = None,
    result: bool = False,
) -> tuple[float, float, float] | PPIResult:
    """The population rate of a 0/1 label from a judge on every case and a person on a random
    sample of them: ``(estimate, low, high)``.

    The N cases are taken to be drawn from the population the questions come from, and the n
    reviewed ones a uniformly random sample of them; the ``N - n`` unreviewed ones are the rest
    (the two sets are disjoint). With ``f`` the judge's label and ``y`` the person's, the estimate
    is ``lam * mean_unreviewed(f) + mean_reviewed(y - lam * f)`` and its standard error
    ``sqrt(lam^2 var(f) / (N - n) + var(y - lam * f) / n)``: the two means come from independent
    samples, so nothing is left out, whatever share of N the review is. This is PPI with disjoint
    labelled and unlabelled sets (ppi-python's ``ppi_mean_ci`` with the reviewed cases as the
    labelled set and the unreviewed ones as the unlabelled set). ``tuned`` gives PPI++'s weight
    (``cov(y, f) / ((1 + n / (N - n)) var(f))``, clipped to [0, 1]); ``tuned=False`` is ``lam = 1``.

    ``small_sample=True`` (the default) adds the guards of :func:`prediction_powered_share`: the
    rectifier's variance over the reviewed (human, judge) table with :data:`PSEUDO_OBSERVATIONS`
    spread over its cells, the judge's variance over all N labels, Student's t with n - 1 degrees
    of freedom, and the review's own interval where the judge gets no weight or would widen the
    interval: Wilson's with Student's t quantile in place of the normal one (whose coverage dips to
    0.92 for some small reviews). ``small_sample=False`` is the plain normal interval (equal to
    ppi-python's).

    **Stratified** (``strata_unreviewed`` and ``strata_reviewed``: a stratum name per case, e.g.
    the dataset): the estimate is ``sum_k w_k * estimate_k`` with each stratum's own tuned weight
    and ``w_k`` its share of the N cases (or of ``stratum_sizes``, ``{name: size}``, when the
    population's strata sizes are known); the variance ``sum_k w_k^2 var_k``; the t quantile takes
    Welch-Satterthwaite's degrees of freedom. Every stratum needs a reviewed case. The guard falls
    back to the stratified review-only interval (each stratum's reviewed mean, variance with the
    pseudo-observations).

    Args:
        judge_unreviewed: the judge's 0/1 on the ``N - n`` cases nobody reviewed (may be empty: a
            census, then the review alone counts).
        judge_reviewed: the judge's 0/1 on the n reviewed cases.
        human_reviewed: the person's 0/1 on the same n cases, in the same order.
        alpha: 1 minus the confidence level.
        result: return the :class:`PPIResult` (weight, standard error, strata) instead of the tuple.

    Returns:
        ``(estimate, low, high)``; bounds clipped to [0, 1], the estimate not.

    Raises:
        ValueError: on empty reviewed input, missing or non-0/1 values, mismatched lengths, a
            stratum without a reviewed case or a bad ``alpha``.
    """
    level = _alpha_level(alpha)
    f_u, f_n, y_n = _rate_inputs(judge_unreviewed, judge_reviewed, human_reviewed)
    strata = None if strata_unreviewed is None and strata_reviewed is None else (strata_unreviewed, strata_reviewed)
    r = _ppi(y_n, f_n, f_u, level=level, tuned=tuned, small_sample=small_sample, support=_RATE_SUPPORT,
             bounds=(0.0, 1.0), strata=strata, stratum_sizes=stratum_sizes, wilson=True)
    return r if result else (r.estimate, r.low, r.high)


def ppi_paired_difference(
    judge_a_unrev: Any,
    judge_b_unrev: Any,
    judge_a_rev: Any,
    judge_b_rev: Any,
    human_a_rev: Any,
    human_b_rev: Any,
    alpha: float = 0.05,
    *,
    tuned: bool = True,
    small_sample: bool = True,
    strata_unreviewed: Any = None,
    strata_reviewed: Any = None,
    stratum_sizes: Mapping | None = None,
    result: bool = False,
) -> tuple[float, float, float, float] | PPIResult:
    """Two systems on the same questions: the difference of their population rates (A minus B),
    corrected for the judge's errors by a random review: ``(estimate, low, high, p_value)``.

    Per question the person's difference ``d = y_a - y_b`` and the judge's ``g = f_a - f_b``
    (each -1, 0 or 1) are a pair, and the estimate is :func:`ppi_mean`'s for the mean of ``d``
    with ``g`` as the prediction (one weight for the difference; support -1..1, so the guard's
    pseudo-observations spread over the 3 x 3 table of (d, g)). The p-value is the two-sided test
    of "no difference" from the same estimate and standard error (Student's t with the guards,
    normal without), so it is below ``alpha`` exactly when the interval leaves out 0. Where the
    guard falls back (the judge adds nothing or would widen the interval) the review's own paired
    difference and its interval are returned. The reviewed questions must be a uniformly random
    sample of the N; the unreviewed ones are the rest. Stratification as :func:`ppi_mean`.

    Args:
        judge_a_unrev: the judge's 0/1 grades of system A on the ``N - n`` unreviewed questions.
        judge_b_unrev: the judge's 0/1 grades of system B on the same questions, same order.
        judge_a_rev: the judge's 0/1 grades of A on the n reviewed questions.
        judge_b_rev: the judge's 0/1 grades of B on the same questions, same order.
        human_a_rev: the person's 0/1 grades of A on the same questions.
        human_b_rev: the person's 0/1 grades of B on the same questions.
        alpha: 1 minus the confidence level.
        result: return the :class:`PPIResult` instead of the tuple.

    Returns:
        ``(estimate, low, high, p_value)``; bounds clipped to [-1, 1].

    Raises:
        ValueError: as :func:`ppi_mean`, naming the argument.
    """
    level = _alpha_level(alpha)
    fa_u, fa_n, ya_n = _rate_inputs(judge_a_unrev, judge_a_rev, human_a_rev,
                                    ("judge_a_unrev", "judge_a_rev", "human_a_rev"))
    fb_u, fb_n, yb_n = _rate_inputs(judge_b_unrev, judge_b_rev, human_b_rev,
                                    ("judge_b_unrev", "judge_b_rev", "human_b_rev"))
    _same_length(fa_n, fb_n, "judge_a_rev", "judge_b_rev")
    _same_length(fa_u, fb_u, "judge_a_unrev", "judge_b_unrev")
    strata = None if strata_unreviewed is None and strata_reviewed is None else (strata_unreviewed, strata_reviewed)
    r = _ppi(ya_n - yb_n, fa_n - fb_n, fa_u - fb_u, level=level, tuned=tuned, small_sample=small_sample,
             support=_DIFFERENCE_SUPPORT, bounds=(-1.0, 1.0), strata=strata, stratum_sizes=stratum_sizes,
             wilson=False)
    return r if result else (r.estimate, r.low, r.high, r.p_value)


def _ipw_inputs(judge: Any, human: Any, inclusion: Any, name_j: str, name_h: str
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(judge 0/1, human 0/1 with 0 where unreviewed, reviewed mask, inclusion probabilities)."""
    f = _binary_vector(judge, name_j).astype(np.float64)
    h = _as_array(human, name_h)
    if h.ndim != 1:
        raise ValueError(f"{name_h} must be 1-D, got an array of shape {h.shape}")
    _same_length(f, h, name_j, name_h)
    reviewed = ~_missing_mask(h)
    if not reviewed.any():
        raise ValueError(f"{name_h} holds no reviewed case (every value is missing)")
    y = np.zeros(f.size)
    y[reviewed] = _to_binary(h[reviewed], name_h)
    pi = _as_array(inclusion, "inclusion")
    if pi.ndim != 1 or pi.shape[0] != f.size:
        raise ValueError(f"inclusion must be 1-D with one probability per case ({f.size}), got shape {pi.shape}")
    if pi.dtype.kind not in "iuf" or _missing_mask(pi).any():
        raise ValueError("inclusion must hold numbers (each case's probability of being reviewed)")
    pi = pi.astype(np.float64)
    bad = ~((pi > 0.0) & (pi <= 1.0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"inclusion[{i}] is {float(pi[i])!r}; every case needs a probability in (0, 1] of being reviewed")
    return f, y, reviewed, pi


def _ipw(y: np.ndarray, f: np.ndarray, reviewed: np.ndarray, pi: np.ndarray, *, level: float, tuned: bool,
         small_sample: bool, bounds: tuple[float, float]) -> PPIResult:
    xi = reviewed.astype(np.float64)
    a = f * (1.0 - xi / pi)
    b = xi * y / pi
    lam = 1.0
    if tuned:
        var_a = float(a.var(ddof=1)) if a.size > 1 else 0.0
        lam = float(np.clip(-np.cov(a, b)[0, 1] / var_a, 0.0, 1.0)) if var_a > 0 else 0.0
    z = lam * a + b
    n_rev = int(reviewed.sum())
    est = float(z.mean())
    se = float(z.std(ddof=1) / math.sqrt(z.size)) if z.size > 1 else 0.0
    df = float(max(n_rev - 1, 1)) if small_sample else math.inf
    half = _quantile(level, df) * se
    p = _two_sided_p(est, se, df) if bounds[0] < 0 else float("nan")
    return PPIResult(est, max(bounds[0], est - half), min(bounds[1], est + half), se, df, p, lam, lam == 0.0,
                     n_rev, int(z.size - n_rev))


def ppi_mean_ipw(judge: Any, human: Any, inclusion: Any, alpha: float = 0.05, *, tuned: bool = True,
                 small_sample: bool = True, result: bool = False) -> tuple[float, float, float] | PPIResult:
    """:func:`ppi_mean` for a review whose cases were drawn with unequal probabilities (an active
    or otherwise non-uniform design): ``(estimate, low, high)``.

    Case ``i`` of the N was reviewed with probability ``inclusion[i]`` (each drawn independently).
    The estimate is the mean over all N cases of ``lam * f_i + (r_i / p_i) (y_i - lam * f_i)``
    (``r_i`` 1 for a reviewed case, ``p_i`` its probability): inverse-probability weighting of the
    rectifier (Zrnic and Candes' active inference). Its standard error is the standard deviation of
    those N terms over sqrt(N), which counts the N cases' own sampling, so it is the population
    rate's. ``tuned`` picks the weight that makes those terms' variance smallest (clipped to
    [0, 1]); ``lam = 0`` is the Horvitz-Thompson mean of the review alone. With ``small_sample``
    the quantile is Student's t with (reviewed cases - 1) degrees of freedom. With equal
    probabilities ``n / N`` the estimate is :func:`prediction_powered_share`'s point estimate.

    Args:
        judge: the judge's 0/1 on every one of the N cases.
        human: the person's 0/1 on the reviewed cases and NaN/None on the others (length N).
        inclusion: each case's probability of having been drawn for review, in (0, 1].
        alpha: 1 minus the confidence level.
        result: return the :class:`PPIResult` instead of the tuple.

    Raises:
        ValueError: on mismatched lengths, no reviewed case, non-0/1 values or a probability
            outside (0, 1] (naming the case).
    """
    level = _alpha_level(alpha)
    f, y, reviewed, pi = _ipw_inputs(judge, human, inclusion, "judge", "human")
    r = _ipw(y, f, reviewed, pi, level=level, tuned=tuned, small_sample=small_sample, bounds=(0.0, 1.0))
    return r if result else (r.estimate, r.low, r.high)


def ppi_paired_difference_ipw(judge_a: Any, judge_b: Any, human_a: Any, human_b: Any, inclusion: Any,
                              alpha: float = 0.05, *, tuned: bool = True, small_sample: bool = True,
                              result: bool = False) -> tuple[float, float, float, float] | PPIResult:
    """:func:`ppi_paired_difference` for a non-uniform review design, as :func:`ppi_mean_ipw`:
    ``(estimate, low, high, p_value)`` for A's rate minus B's. ``human_a`` and ``human_b`` hold
    NaN/None on the same unreviewed questions."""
    level = _alpha_level(alpha)
    fa, ya, rev_a, pi = _ipw_inputs(judge_a, human_a, inclusion, "judge_a", "human_a")
    fb, yb, rev_b, _ = _ipw_inputs(judge_b, human_b, inclusion, "judge_b", "human_b")
    _same_length(fa, fb, "judge_a", "judge_b")
    if not np.array_equal(rev_a, rev_b):
        i = int(np.flatnonzero(rev_a != rev_b)[0])
        raise ValueError(f"human_a and human_b must be reviewed on the same questions; they differ at [{i}]")
    r = _ipw(ya - yb, fa - fb, rev_a, pi, level=level, tuned=tuned, small_sample=small_sample, bounds=(-1.0, 1.0))
    return r if result else (r.estimate, r.low, r.high, r.p_value)


def ppi_reviews_needed(half_width: float, big_n: int, joint: Any, alpha: float = 0.05) -> tuple[int | None, int | None]:
    """How many random reviews a rate's 95% (``1 - alpha``) interval needs to reach ``+/- half_width``:
    ``(by the review alone, by ppi_mean)``, ``None`` where no review of at most ``big_n`` cases does.

    ``joint`` is the 2 x 2 table of (person, judge) probabilities, ``joint[y][f]`` (from a pilot
    review, or assumed). For ``n`` reviews of ``big_n`` cases the review alone has half-width
    ``z sqrt(p (1 - p) / n)``, and ppi_mean (PPI++ with the weight ``lam`` that is best at that n)
    ``z sqrt(lam^2 var(f) / (N - n) + var(y - lam f) / n)``, with the variances as the
    small-sample guards estimate them (:data:`PSEUDO_OBSERVATIONS` spread over the table) and
    Student's t with n - 1 degrees of freedom for z; the smallest n that reaches the half-width
    is returned for each. The plan is for the expected table; a review's own interval varies.
    """
    p = _as_array(joint, "joint").astype(np.float64)
    if p.shape != (2, 2) or (p < 0).any() or not math.isclose(float(p.sum()), 1.0, abs_tol=1e-9):
        raise ValueError("joint must be a 2 x 2 table of probabilities (person by judge) summing to 1")
    if not (isinstance(half_width, numbers.Real) and 0 < float(half_width) < 1):
        raise ValueError(f"the half-width must lie strictly between 0 and 1, got {half_width!r}")
    big_n = _count(big_n, "big_n")
    if big_n < 2:
        raise ValueError("big_n must be at least 2")
    level = 1.0 - _alpha_level_from(alpha)
    py, pf = float(p[1].sum()), float(p[:, 1].sum())
    var_f = pf * (1 - pf)
    cov = float(p[1, 1]) - py * pf
    human = ppi = None
    for n in range(1, big_n + 1):
        z = _quantile(level, float(max(n - 1, 1)))
        # as the guards estimate them: PSEUDO_OBSERVATIONS spread over the four cells
        w = (n * p + PSEUDO_OBSERVATIONS / 4) / (n + PSEUDO_OBSERVATIONS)
        wy = float(w[1].sum())
        if human is None and z * math.sqrt(wy * (1 - wy) / n) <= half_width:
            human = n
        if ppi is None:
            nu = big_n - n
            lam = float(np.clip(cov / ((1 + n / nu) * var_f), 0, 1)) if nu and var_f > 0 else 0.0
            values = np.array([[0.0, -lam], [1.0, 1.0 - lam]])
            rect_var = float((w * (values - (w * values).sum()) ** 2).sum())
            var = rect_var / n + (lam**2 * var_f / nu if nu else 0.0)
            if z * math.sqrt(var) <= half_width:
                ppi = n
        if human is not None and ppi is not None:
            break
    return human, ppi


def _alpha_level_from(alpha: Any) -> float:
    return 1.0 - _alpha_level(alpha)
