"""Tests for trek.stats.

Expected numbers are worked out by hand in the comments next to each assertion, so a test
fails if the implementation drifts from the textbook formula rather than merely from itself.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from trek import stats
from trek.stats import (
    CochranResult,
    McNemarResult,
    accuracy,
    accuracy_ci_table,
    bootstrap_ci,
    cochrans_q,
    cohens_kappa,
    holm,
    kappa_undefined,
    macro_jeffreys_ci,
    mcnemar,
    mcnemar_exact,
    micro_macro,
    multilabel_kappa,
    wilson_ci,
)

# Two-sided 95% normal quantile and its square, used in the hand-worked Wilson bounds.
Z95 = 1.959963984540054
Z95_SQ = Z95**2  # 3.841458820694124


# ---------------------------------------------------------------------------
# accuracy
# ---------------------------------------------------------------------------


def test_accuracy_mean_of_ints_and_bools():
    # 3 correct out of 4 -> 0.75
    assert accuracy([1, 0, 1, 1]) == pytest.approx(0.75)
    assert accuracy(np.array([True, False, False, False])) == pytest.approx(0.25)
    assert accuracy(pd.Series([1.0, 1.0])) == pytest.approx(1.0)
    assert isinstance(accuracy([1, 0]), float)


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ([], "correct is empty"),
        ([1, np.nan, 0], r"correct contains 1 missing value"),
        ([1, None, 0], r"correct contains 1 missing value"),
        (pd.Series([1, None], dtype="Int64"), r"correct contains 1 missing value"),
        ([1, 2, 0], r"correct must hold only 0/1"),
        ([0.5, 1.0], r"correct must hold only 0/1"),
        (["1", "0"], r"correct must hold 0/1 or True/False values, got dtype"),
        ([[1, 0], [0, 1]], r"correct must be 1-D"),
        (1, r"correct must be 1-D"),
        (None, r"correct must be an array-like, got None"),
        ("10", r"correct must be an array-like of values, got a single string"),
    ],
)
def test_accuracy_rejects_bad_input(bad, message):
    with pytest.raises(ValueError, match=message):
        accuracy(bad)


# ---------------------------------------------------------------------------
# micro / macro
# ---------------------------------------------------------------------------

# Group A: 4 items, all correct -> 1.0; group B: 2 items, none correct -> 0.0.
# micro = 4 / 6 = 0.6667 (items weigh equally); macro = (1.0 + 0.0) / 2 = 0.5 (groups weigh equally).
CORRECT = [1, 1, 1, 1, 0, 0]
GROUPS = ["A", "A", "A", "A", "B", "B"]


def test_micro_macro_differ_on_unbalanced_groups():
    micro, macro = micro_macro(CORRECT, GROUPS)
    assert micro == pytest.approx(4 / 6)
    assert macro == pytest.approx(0.5)


def test_micro_macro_with_three_groups():
    # A: 1/2 = 0.5, B: 2/2 = 1.0, C: 0/1 = 0.0
    # micro = 3/5 = 0.6, macro = 1.5/3 = 0.5
    micro, macro = micro_macro([1, 0, 1, 1, 0], [1, 1, 2, 2, 3])
    assert micro == pytest.approx(0.6)
    assert macro == pytest.approx(0.5)


def test_micro_macro_rejects_bad_input():
    with pytest.raises(ValueError, match=r"correct and groups must have the same length, got 6 and 5"):
        micro_macro(CORRECT, GROUPS[:5])
    with pytest.raises(ValueError, match=r"groups contains 1 missing value"):
        micro_macro(CORRECT, ["A", "A", None, "A", "B", "B"])
    with pytest.raises(ValueError, match=r"groups must be 1-D"):
        micro_macro(CORRECT, np.array(GROUPS).reshape(2, 3))
    with pytest.raises(ValueError, match=r"correct must hold only 0/1"):
        micro_macro([1, 1, 1, 1, 0, 3], GROUPS)


# ---------------------------------------------------------------------------
# accuracy_ci_table
# ---------------------------------------------------------------------------


def test_accuracy_ci_table_rows_and_intervals():
    table = accuracy_ci_table(CORRECT, GROUPS, seed=0, n_resamples=2000)
    assert list(table.index) == ["A", "B", "micro", "macro"]
    assert table.index.name == "group"
    assert list(table.columns) == ["n", "k", "accuracy", "ci_low", "ci_high"]
    assert list(table["n"]) == [4, 2, 6, 6]
    assert list(table["k"].iloc[:3]) == [4, 0, 4]
    assert pd.isna(table.loc["macro", "k"])
    assert list(table["accuracy"]) == pytest.approx([1.0, 0.0, 4 / 6, 0.5])

    # Wilson with k = n: low = n / (n + z^2) = 4 / 7.8415 = 0.5101, high = 1.
    assert table.loc["A", "ci_low"] == pytest.approx(4 / (4 + Z95_SQ))
    assert table.loc["A", "ci_high"] == pytest.approx(1.0)
    # Wilson with k = 0: low = 0, high = z^2 / (n + z^2) = 3.8415 / 5.8415 = 0.6576.
    assert table.loc["B", "ci_low"] == pytest.approx(0.0)
    assert table.loc["B", "ci_high"] == pytest.approx(Z95_SQ / (2 + Z95_SQ))
    # micro row is Wilson on the pooled counts.
    assert (table.loc["micro", "ci_low"], table.loc["micro", "ci_high"]) == pytest.approx(wilson_ci(4, 6))
    # The default macro interval is the Jeffreys one: wide although each group is constant.
    assert (table.loc["macro", "ci_low"], table.loc["macro", "ci_high"]) == pytest.approx(
        macro_jeffreys_ci([4, 0], [4, 2]))
    assert table.loc["macro", "ci_low"] < 0.5 < table.loc["macro", "ci_high"]
    # The stratified bootstrap: each group is constant, so every resample keeps A at 1.0 and B at
    # 0.0 and the macro accuracy is exactly 0.5 in every resample: the interval collapses.
    boot = accuracy_ci_table(CORRECT, GROUPS, seed=0, n_resamples=2000, macro_interval="bootstrap")
    assert boot.loc["macro", "ci_low"] == pytest.approx(0.5)
    assert boot.loc["macro", "ci_high"] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="macro_interval"):
        accuracy_ci_table(CORRECT, GROUPS, macro_interval="normal")


def test_the_macro_jeffreys_interval_of_one_group_is_its_jeffreys_interval():
    from statsmodels.stats.proportion import proportion_confint

    for k, n in [(1, 6), (2, 6), (5, 6), (13, 40)]:
        assert macro_jeffreys_ci([k], [n]) == pytest.approx(proportion_confint(k, n, method="jeffreys"))
    # at the edges the bound on the side of the estimate is the estimate itself
    assert macro_jeffreys_ci([0], [6]) == pytest.approx((0.0, proportion_confint(0, 6, method="jeffreys")[1]))
    assert macro_jeffreys_ci([6], [6]) == pytest.approx((proportion_confint(6, 6, method="jeffreys")[0], 1.0))


@pytest.mark.parametrize("ks, ns", [([0, 0, 0], [12, 12, 12]), ([2], [6]), ([0, 2, 0], [12, 12, 10]),
                                    ([12, 12], [12, 12]), ([1, 5, 9], [10, 10, 10])])
def test_no_zero_width_macro_interval_beside_a_positive_width_micro_one(ks, ns):
    correct = [x for k, n in zip(ks, ns, strict=True) for x in [1] * k + [0] * (n - k)]
    groups = [g for g, n in enumerate(ns) for _ in range(n)]
    table = accuracy_ci_table(correct, groups)
    micro_width = table.loc["micro", "ci_high"] - table.loc["micro", "ci_low"]
    macro_width = table.loc["macro", "ci_high"] - table.loc["macro", "ci_low"]
    assert micro_width > 0 and macro_width > 0.01
    assert table.loc["macro", "ci_low"] <= table.loc["macro", "accuracy"] <= table.loc["macro", "ci_high"]


def test_the_macro_jeffreys_interval_rejects_bad_input():
    with pytest.raises(ValueError, match="one k and one n"):
        macro_jeffreys_ci([], [])
    with pytest.raises(ValueError, match="0 <= k <= n"):
        macro_jeffreys_ci([3], [2])


def test_accuracy_ci_table_macro_bootstrap_is_seeded():
    correct = [1, 0, 1, 1, 0, 1, 0, 0, 1, 1, 0, 1]
    groups = ["x"] * 5 + ["y"] * 4 + ["z"] * 3
    first = accuracy_ci_table(correct, groups, seed=3, n_resamples=500, macro_interval="bootstrap")
    again = accuracy_ci_table(correct, groups, seed=3, n_resamples=500, macro_interval="bootstrap")
    pd.testing.assert_frame_equal(first, again)
    low, high = first.loc["macro", ["ci_low", "ci_high"]]
    # x = [1,0,1,1,0] -> 3/5, y = [1,0,0,1] -> 2/4, z = [1,0,1] -> 2/3
    # macro = (0.6 + 0.5 + 0.6667) / 3 = 0.5889; the interval must contain it and have width.
    assert first.loc["macro", "accuracy"] == pytest.approx((3 / 5 + 2 / 4 + 2 / 3) / 3)
    assert low < first.loc["macro", "accuracy"] < high


def test_accuracy_ci_table_rejects_bad_input():
    with pytest.raises(ValueError, match=r"reserved labels 'micro'/'macro', found 'micro'"):
        accuracy_ci_table([1, 0], ["micro", "other"])
    with pytest.raises(ValueError, match=r"level must be a number strictly between 0 and 1"):
        accuracy_ci_table(CORRECT, GROUPS, level=95)
    with pytest.raises(ValueError, match=r"n_resamples must be a positive integer"):
        accuracy_ci_table(CORRECT, GROUPS, n_resamples=0)
    with pytest.raises(ValueError, match=r"correct and groups must have the same length"):
        accuracy_ci_table(CORRECT, GROUPS[:-1])
    with pytest.raises(ValueError, match=r"correct is empty"):
        accuracy_ci_table([], [])


# ---------------------------------------------------------------------------
# wilson_ci
# ---------------------------------------------------------------------------


def test_wilson_ci_half_proportion():
    # p = 0.5, n = 10: centre = (p + z^2/2n) / (1 + z^2/n) = 0.5;
    # half width = z * sqrt(p(1-p)/n + z^2/(4n^2)) / (1 + z^2/n)
    #            = 1.96 * sqrt(0.025 + 0.009604) / 1.384146 = 0.26341
    # -> (0.23659, 0.76341)
    low, high = wilson_ci(5, 10)
    assert low == pytest.approx(0.2366, abs=1e-4)
    assert high == pytest.approx(0.7634, abs=1e-4)


def test_wilson_ci_edges_and_level():
    # k = 0: (0, z^2 / (n + z^2)); k = n: (n / (n + z^2), 1)
    assert wilson_ci(0, 10) == pytest.approx((0.0, Z95_SQ / (10 + Z95_SQ)))
    assert wilson_ci(10, 10) == pytest.approx((10 / (10 + Z95_SQ), 1.0))
    # Integral floats are accepted as counts.
    assert wilson_ci(5.0, 10.0) == pytest.approx(wilson_ci(5, 10))
    # A lower level gives a strictly narrower interval around the same centre.
    low90, high90 = wilson_ci(5, 10, level=0.90)
    low95, high95 = wilson_ci(5, 10)
    assert low95 < low90 < 0.5 < high90 < high95


@pytest.mark.parametrize(
    ("k", "n", "level", "message"),
    [
        (0, 0, 0.95, r"n must be at least 1"),
        (11, 10, 0.95, r"k must not exceed n, got k=11 and n=10"),
        (-1, 10, 0.95, r"k must be a non-negative integer, got -1"),
        (1, -10, 0.95, r"n must be a non-negative integer, got -10"),
        (2.5, 10, 0.95, r"k must be a non-negative integer, got 2.5"),
        (2, float("nan"), 0.95, r"n must be a non-negative integer, got nan"),
        ("2", 10, 0.95, r"k must be a non-negative integer, got '2'"),
        (2, 10, 0.0, r"level must be a number strictly between 0 and 1, got 0.0"),
        (2, 10, 1.0, r"level must be a number strictly between 0 and 1, got 1.0"),
    ],
)
def test_wilson_ci_rejects_bad_input(k, n, level, message):
    with pytest.raises(ValueError, match=message):
        wilson_ci(k, n, level)


# ---------------------------------------------------------------------------
# bootstrap_ci
# ---------------------------------------------------------------------------

VALUES = [0.3, 1.7, 2.2, 5.9, 3.1, 4.4, 0.8, 9.6]


def test_bootstrap_same_seed_same_interval():
    first = bootstrap_ci(VALUES, n_resamples=500, seed=11)
    second = bootstrap_ci(VALUES, n_resamples=500, seed=11)
    assert first == second
    # A Generator seeded the same way draws the same stream.
    assert bootstrap_ci(VALUES, n_resamples=500, seed=np.random.default_rng(11)) == first


def test_bootstrap_different_seed_different_interval():
    assert bootstrap_ci(VALUES, n_resamples=500, seed=1) != bootstrap_ci(VALUES, n_resamples=500, seed=2)


def test_bootstrap_two_point_mean():
    # Resampling [0, 1] twice gives means 0, 0.5, 1 with probabilities 1/4, 1/2, 1/4, so the
    # 2.5% and 97.5% percentiles are 0 and 1.
    assert bootstrap_ci([0, 1], n_resamples=2000, seed=0) == pytest.approx((0.0, 1.0))


def test_bootstrap_constant_values_and_custom_statistic():
    assert bootstrap_ci([2.0, 2.0, 2.0], n_resamples=50, seed=0) == pytest.approx((2.0, 2.0))
    # max of any resample of [1, 1, 1] is 1.
    assert bootstrap_ci([1, 1, 1], statistic=np.max, n_resamples=50, seed=0) == pytest.approx((1.0, 1.0))


def test_bootstrap_stratified_keeps_group_sizes():
    values = [1, 1, 1, 0, 0, 0, 0, 0]
    groups = ["a", "a", "a", "b", "b", "b", "b", "b"]
    # Within each stratum the values are constant, and a stratified resample redraws 3 items from
    # "a" and 5 from "b", so the mean is 3/8 = 0.375 in every resample.
    assert bootstrap_ci(values, n_resamples=300, seed=0, groups=groups) == pytest.approx((0.375, 0.375))
    # Without strata the 3/5 split varies and the interval has width.
    low, high = bootstrap_ci(values, n_resamples=300, seed=0)
    assert low < 0.375 < high


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"values": []}, r"values is empty"),
        ({"values": [1.0, np.nan]}, r"values contains 1 missing value"),
        ({"values": [1.0, np.inf]}, r"values must be finite"),
        ({"values": ["a", "b"]}, r"values must be numeric"),
        ({"values": [[1.0, 2.0]]}, r"values must be 1-D"),
        ({"values": [1.0, 2.0], "n_resamples": 0}, r"n_resamples must be a positive integer, got 0"),
        ({"values": [1.0, 2.0], "n_resamples": 10.5}, r"n_resamples must be a positive integer"),
        ({"values": [1.0, 2.0], "level": 1.5}, r"level must be a number strictly between 0 and 1"),
        ({"values": [1.0, 2.0], "statistic": "mean"}, r"statistic must be callable"),
        (
            {"values": [1.0, 2.0], "groups": ["a"]},
            r"values and groups must have the same length, got 2 and 1",
        ),
        ({"values": [1.0, 2.0], "groups": ["a", None]}, r"groups contains 1 missing value"),
    ],
)
def test_bootstrap_rejects_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        bootstrap_ci(**kwargs)


# ---------------------------------------------------------------------------
# McNemar
# ---------------------------------------------------------------------------


def test_mcnemar_exact_hand_values():
    # b=0, c=5: 2 * P(X <= 0 | n=5) = 2 * 0.5^5 = 0.0625
    assert mcnemar_exact(0, 5) == pytest.approx(0.0625)
    assert mcnemar_exact(5, 0) == pytest.approx(0.0625)
    # b=1, c=9: 2 * (C(10,0) + C(10,1)) / 2^10 = 2 * 11 / 1024 = 0.021484375
    assert mcnemar_exact(1, 9) == pytest.approx(22 / 1024)
    # b=13, c=2: 2 * (1 + 15 + 105) / 2^15 = 242 / 32768 = 0.0073853
    assert mcnemar_exact(13, 2) == pytest.approx(242 / 32768)
    # no discordant pairs -> 1; balanced discordant pairs -> capped at 1
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(3, 3) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("b", "c", "message"),
    [
        (-1, 3, r"b must be a non-negative integer, got -1"),
        (3, -2, r"c must be a non-negative integer, got -2"),
        (2.5, 3, r"b must be a non-negative integer, got 2.5"),
        (3, "4", r"c must be a non-negative integer, got '4'"),
        (None, 4, r"b must be a non-negative integer, got None"),
    ],
)
def test_mcnemar_exact_rejects_bad_counts(b, c, message):
    with pytest.raises(ValueError, match=message):
        mcnemar_exact(b, c)


def test_mcnemar_paired_vectors():
    x = [1, 1, 1, 1, 1, 1, 0]
    y = [0, 0, 0, 0, 0, 1, 0]
    # b (x=1, y=0) = items 0-4 = 5; c (x=0, y=1) = 0; p = 2 * 0.5^5 = 0.0625
    res = mcnemar(x, y)
    assert res == McNemarResult(
        b=5, c=0, n=7, p=pytest.approx(0.0625), acc_x=pytest.approx(6 / 7), acc_y=pytest.approx(1 / 7)
    )
    with pytest.raises(AttributeError):
        res.b = 1  # frozen
    # Swapping the arguments swaps b and c and leaves p unchanged.
    swapped = mcnemar(y, x)
    assert (swapped.b, swapped.c, swapped.p) == (0, 5, pytest.approx(0.0625))


def test_mcnemar_rejects_bad_input():
    with pytest.raises(ValueError, match=r"x and y must have the same length, got 3 and 2"):
        mcnemar([1, 0, 1], [1, 0])
    with pytest.raises(ValueError, match=r"y must hold only 0/1"):
        mcnemar([1, 0], [1, 2])
    with pytest.raises(ValueError, match=r"x contains 1 missing value"):
        mcnemar([1, np.nan], [1, 0])
    with pytest.raises(ValueError, match=r"x is empty"):
        mcnemar([], [])


# ---------------------------------------------------------------------------
# Cochran's Q
# ---------------------------------------------------------------------------


def test_cochrans_q_hand_computed():
    matrix = [
        [1, 0, 0],
        [1, 1, 0],
        [1, 1, 1],
        [0, 1, 0],
    ]
    # k = 3, column totals C = [3, 3, 1], N = 7, row totals R = [1, 2, 3, 1]
    # sum C^2 = 9 + 9 + 1 = 19, sum R^2 = 1 + 4 + 9 + 1 = 15
    # Q = (k-1) [k sum C^2 - N^2] / (k N - sum R^2) = 2 (57 - 49) / (21 - 15) = 16/6 = 2.6667
    # df = 2, and the chi-square(2) survival function is exp(-Q/2) = exp(-4/3) = 0.26360
    res = cochrans_q(matrix)
    assert isinstance(res, CochranResult)
    assert res.q == pytest.approx(8 / 3)
    assert res.df == 2
    assert res.p == pytest.approx(math.exp(-4 / 3))


def test_cochrans_q_two_conditions_matches_mcnemar_chi2():
    # With k = 2, Q = (b - c)^2 / (b + c). Here b = 3 ([1, 0] rows), c = 1, so Q = 4/4 = 1.
    # Constant rows ([1, 1] and [0, 0]) do not change Q.
    matrix = np.array([[1, 0], [1, 0], [1, 0], [0, 1], [1, 1], [0, 0]], dtype=bool)
    res = cochrans_q(matrix)
    assert res.q == pytest.approx(1.0)
    assert res.df == 1
    # chi-square(1) survival at 1 = erfc(1 / sqrt(2)) = 0.31731
    assert res.p == pytest.approx(math.erfc(1 / math.sqrt(2)))


def test_cochrans_q_degenerate_constant_rows():
    # Every subject solved by all or none of the conditions: Q is 0/0, reported as q=0, p=1.
    assert cochrans_q([[1, 1, 1], [0, 0, 0]]) == CochranResult(q=0.0, df=2, p=1.0)
    assert cochrans_q(np.zeros((4, 2))) == CochranResult(q=0.0, df=1, p=1.0)
    assert cochrans_q(np.ones((4, 3))) == CochranResult(q=0.0, df=2, p=1.0)


def test_cochrans_q_accepts_dataframe():
    frame = pd.DataFrame({"a": [1, 1, 1, 0], "b": [0, 1, 1, 1], "c": [0, 0, 1, 0]})
    assert cochrans_q(frame).q == pytest.approx(8 / 3)


@pytest.mark.parametrize(
    ("matrix", "message"),
    [
        ([1, 0, 1], r"matrix must be 2-D \(subjects, conditions\), got an array of shape \(3,\)"),
        (np.zeros((0, 3)), r"matrix is empty"),
        ([[1], [0]], r"matrix must have at least 2 conditions \(columns\), got 1"),
        ([[1, np.nan], [0, 1]], r"matrix contains 1 missing value"),
        ([[1, 2], [0, 1]], r"matrix must hold only 0/1"),
        (None, r"matrix must be an array-like, got None"),
    ],
)
def test_cochrans_q_rejects_bad_input(matrix, message):
    with pytest.raises(ValueError, match=message):
        cochrans_q(matrix)


# ---------------------------------------------------------------------------
# Holm
# ---------------------------------------------------------------------------


def test_holm_known_vector():
    # Sorted: 0.005 * 4 = 0.02, 0.01 * 3 = 0.03, 0.03 * 2 = 0.06, 0.04 * 1 = 0.04 -> raised to
    # 0.06 by the running maximum. Back in input order: [0.03, 0.06, 0.06, 0.02].
    adjusted = holm([0.01, 0.04, 0.03, 0.005])
    assert isinstance(adjusted, np.ndarray)
    np.testing.assert_allclose(adjusted, [0.03, 0.06, 0.06, 0.02])


def test_holm_caps_at_one_and_single_value():
    # 0.5 * 2 = 1.0, 0.6 * 1 = 0.6 -> running max 1.0
    np.testing.assert_allclose(holm([0.6, 0.5]), [1.0, 1.0])
    # 0.4 * 3 = 1.2 -> capped at 1
    assert holm([0.4, 0.9, 0.95]).max() == pytest.approx(1.0)
    np.testing.assert_allclose(holm([0.2]), [0.2])


@pytest.mark.parametrize(
    ("pvalues", "message"),
    [
        ([], r"pvalues is empty"),
        ([0.1, 1.5], r"pvalues must lie in \[0, 1\]"),
        ([-0.1, 0.5], r"pvalues must lie in \[0, 1\]"),
        ([0.1, np.nan], r"pvalues contains 1 missing value"),
        ([[0.1, 0.2]], r"pvalues must be 1-D"),
        (["a", "b"], r"pvalues must be numeric"),
    ],
)
def test_holm_rejects_bad_input(pvalues, message):
    with pytest.raises(ValueError, match=message):
        holm(pvalues)


# ---------------------------------------------------------------------------
# Cohen's kappa
# ---------------------------------------------------------------------------


def test_cohens_kappa_two_by_two_by_hand():
    # 10 items; 2x2 table (rows: rater A, columns: rater B)
    #            B=yes  B=no
    #   A=yes      4      1
    #   A=no       2      3
    # p_o = (4 + 3) / 10 = 0.7
    # p_e = P_A(yes) P_B(yes) + P_A(no) P_B(no) = 0.5 * 0.6 + 0.5 * 0.4 = 0.5
    # kappa = (0.7 - 0.5) / (1 - 0.5) = 0.4
    a = ["yes"] * 4 + ["yes"] * 1 + ["no"] * 2 + ["no"] * 3
    b = ["yes"] * 4 + ["no"] * 1 + ["yes"] * 2 + ["no"] * 3
    assert cohens_kappa(a, b) == pytest.approx(0.4)
    # Kappa is symmetric in the raters.
    assert cohens_kappa(b, a) == pytest.approx(0.4)


def test_cohens_kappa_special_cases():
    assert cohens_kappa([1, 2, 3, 1], [1, 2, 3, 1]) == pytest.approx(1.0)
    # Both raters constant and equal: p_e = 1, kappa = 0/0 is undefined (NaN), not 1.
    assert math.isnan(cohens_kappa(["x", "x", "x"], ["x", "x", "x"]))
    assert math.isnan(cohens_kappa([False] * 5, [False] * 5))
    assert "0/0" in kappa_undefined(["x", "x"], ["x", "x"]) and "'x'" in kappa_undefined(["x"], ["x"])
    assert kappa_undefined(["x", "x"], ["x", "y"]) is None and kappa_undefined(["x", "x"], ["y", "y"]) is None
    # One rater constant, the other not: p_o = p_e, kappa 0 (defined).
    assert cohens_kappa(["x", "x", "x", "x"], ["x", "y", "x", "x"]) == pytest.approx(0.0)
    # Constant but different: p_o = 0, p_e = 1*0 + 0*1 = 0 -> kappa = 0.
    assert cohens_kappa(["x", "x"], ["y", "y"]) == pytest.approx(0.0)
    # Total disagreement on a balanced pair: p_o = 0, p_e = 0.5 -> kappa = -1.
    assert cohens_kappa([1, 0], [0, 1]) == pytest.approx(-1.0)


def test_cohens_kappa_rejects_bad_input():
    with pytest.raises(ValueError, match=r"labels_a and labels_b must have the same length, got 3 and 2"):
        cohens_kappa(["a", "b", "c"], ["a", "b"])
    with pytest.raises(ValueError, match=r"labels_a is empty"):
        cohens_kappa([], [])
    with pytest.raises(ValueError, match=r"labels_b contains 1 missing value"):
        cohens_kappa(["a", "b"], ["a", None])
    with pytest.raises(ValueError, match=r"labels_a must be 1-D"):
        cohens_kappa([["a", "b"]], ["a", "b"])


def test_multilabel_kappa_by_hand():
    # Vocabulary [X, Y]; decisions flattened as (item, label):
    #   item 1: A {X}    B {X}   -> (1, 1), (0, 0)
    #   item 2: A {X, Y} B {X}   -> (1, 1), (1, 0)
    #   item 3: A {}     B {Y}   -> (0, 0), (0, 1)
    # A = [1,0,1,1,0,0], B = [1,0,1,0,0,1]; agreements at positions 0, 1, 2, 4 -> p_o = 4/6.
    # P_A(1) = P_B(1) = 3/6 -> p_e = 0.25 + 0.25 = 0.5; kappa = (2/3 - 1/2) / (1/2) = 1/3.
    sets_a = [{"X"}, ["X", "Y"], set()]
    sets_b = [("X",), frozenset({"X"}), np.array(["Y"])]
    assert multilabel_kappa(sets_a, sets_b, ["X", "Y"]) == pytest.approx(1 / 3)
    assert multilabel_kappa(sets_a, sets_a, ["X", "Y"]) == pytest.approx(1.0)


def test_multilabel_kappa_rejects_bad_input():
    with pytest.raises(ValueError, match=r"sets_b\[1\] has label\(s\) not in labels: 'Z'$"):
        multilabel_kappa([{"X"}, {"Y"}], [{"X"}, {"Z"}], ["X", "Y"])
    with pytest.raises(ValueError, match=r"sets_a\[0\] must be a set or list of labels, got the string 'X'"):
        multilabel_kappa(["X", {"Y"}], [{"X"}, {"Y"}], ["X", "Y"])
    with pytest.raises(ValueError, match=r"sets_a\[1\] is missing"):
        multilabel_kappa([{"X"}, None], [{"X"}, {"Y"}], ["X", "Y"])
    with pytest.raises(ValueError, match=r"sets_a and sets_b must have the same length, got 2 and 1"):
        multilabel_kappa([{"X"}, {"Y"}], [{"X"}], ["X", "Y"])
    with pytest.raises(ValueError, match=r"sets_a is empty"):
        multilabel_kappa([], [], ["X"])
    with pytest.raises(ValueError, match=r"labels is empty"):
        multilabel_kappa([{"X"}], [{"X"}], [])
    with pytest.raises(ValueError, match=r"labels contains duplicates"):
        multilabel_kappa([{"X"}], [{"X"}], ["X", "X"])
    with pytest.raises(ValueError, match=r"labels must be a sequence of label names, not a single string"):
        multilabel_kappa([{"X"}], [{"X"}], "X")


def test_public_api_is_listed():
    for name in stats.__all__:
        assert hasattr(stats, name), name
