"""trek.stats.ppi_mean, ppi_paired_difference and their stratified and inverse-probability forms.

The reference is ppi-python (the ``test`` extra; the comparisons skip when it is absent): with the
reviewed cases as its labelled set and the unreviewed ones as its unlabelled set, its
``ppi_mean_ci`` is :func:`ppi_mean` without the small-sample guards, and on the per-question
differences it is :func:`ppi_paired_difference`. glide-py (stratified and active designs) needs
Python 3.12 and is not a test dependency; the stratified and weighted forms are checked by hand.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from trek.stats import (
    PPIResult,
    ppi_mean,
    ppi_mean_ipw,
    ppi_paired_difference,
    ppi_paired_difference_ipw,
    prediction_powered_share,
    wilson_ci,
)

Z95 = 1.959963984540054


def _grades(rng, n, p, fp, fn):
    truth = (rng.random(n) < p).astype(int)
    u = rng.random(n)
    return truth, np.where(truth == 1, u >= fn, u < fp).astype(int)


def _split(rng, big_n, n):
    idx = rng.permutation(big_n)
    return idx[:n], idx[n:]


# -- ppi_mean ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("tuned", [True, False])
def test_ppi_mean_equals_ppi_python_with_disjoint_sets(tuned):
    ppi = pytest.importorskip("ppi_py", reason="ppi-python (the test extra) is not installed")
    rng = np.random.default_rng(51)
    for _ in range(30):
        big_n = int(rng.integers(40, 3000))
        n = int(rng.integers(5, big_n - 5))
        y, f = _grades(rng, big_n, rng.uniform(0.05, 0.6), rng.uniform(0, 0.4), rng.uniform(0, 0.4))
        rev, unrev = _split(rng, big_n, n)
        alpha = float(rng.choice([0.05, 0.1, 0.2]))
        est, low, high = ppi_mean(f[unrev], f[rev], y[rev], alpha=alpha, tuned=tuned, small_sample=False)
        lam = None if tuned else 1.0
        args = (y[rev].astype(float), f[rev].astype(float), f[unrev].astype(float))
        ref_low, ref_high = ppi.ppi_mean_ci(*args, alpha=alpha, lam=lam)
        ref_est = float(np.ravel(ppi.ppi_mean_pointestimate(*args, lam=lam))[0])
        assert est == pytest.approx(ref_est, abs=1e-12)
        assert low == pytest.approx(max(0.0, float(np.ravel(ref_low)[0])), abs=1e-12)
        assert high == pytest.approx(min(1.0, float(np.ravel(ref_high)[0])), abs=1e-12)


def test_ppi_mean_untuned_by_hand():
    # unreviewed judge 1,0,0,0,1,0,0,0: mean .25, variance .1875; reviewed judge 1,0,1,0,0,0 and
    # human 1,1,0,0,0,0: rectifier y - f = 0,1,-1,0,0,0, mean 0, variance 1/3.
    # Estimate .25 + 0; se^2 = .1875/8 + (1/3)/6; a 50% interval: z = 0.67449.
    est, low, high = ppi_mean([1, 0, 0, 0, 1, 0, 0, 0], [1, 0, 1, 0, 0, 0], [1, 1, 0, 0, 0, 0], alpha=0.5,
                              tuned=False, small_sample=False)
    half = 0.6744897501960817 * math.sqrt(0.1875 / 8 + (1 / 3) / 6)
    assert est == pytest.approx(0.25)
    assert (low, high) == pytest.approx((0.25 - half, 0.25 + half))
    # Clipped to [0, 1] at 95%.
    assert ppi_mean([1, 0, 0, 0], [1, 0, 1], [1, 1, 0], tuned=False, small_sample=False)[1:] == (0.0, 1.0)


def test_ppi_mean_tuned_weight_by_hand():
    # reviewed f 1,1,0,0 and y 1,0,0,0: cov_n = .125; all judge labels 1,1,0,0 + 1,0,0,0 -> 3 ones of 8,
    # variance (ddof 1) 8/7 * 3/8 * 5/8; n / N_u = 1. lam = .125 / (2 * var).
    var_f = 8 / 7 * 3 / 8 * 5 / 8
    lam = 0.125 / (2 * var_f)
    r = ppi_mean([1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 0, 0], small_sample=False, result=True)
    assert isinstance(r, PPIResult)
    assert r.lam == pytest.approx(lam)
    assert r.estimate == pytest.approx(lam * 0.25 + (0.25 - lam * 0.5))
    rect = np.array([1 - lam, -lam, 0, 0])
    assert r.se == pytest.approx(math.sqrt(lam**2 * 0.1875 / 4 + rect.var() / 4))


def test_ppi_mean_differs_from_the_traced_share_when_the_review_is_large():
    # The traced share counts the reviewed cases' judge labels twice over; the population rate's
    # interval is wider (it counts the N cases' own sampling) and its centre moves.
    rng = np.random.default_rng(2)
    y, f = _grades(rng, 200, 0.3, 0.1, 0.1)
    rev, unrev = _split(rng, 200, 150)
    _, s_low, s_high = prediction_powered_share(f, f[rev], y[rev], small_sample=False)
    _, p_low, p_high = ppi_mean(f[unrev], f[rev], y[rev], small_sample=False)
    assert p_high - p_low > s_high - s_low


def _wilson_t(k, n):
    # Wilson's score interval with Student's t quantile (n - 1 degrees of freedom) for z.
    from scipy.stats import t

    z, p = t.ppf(0.975, n - 1), k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def test_wilson_t_by_hand():
    # k = 2 of n = 5, t(4) = 2.7764451: centre (.4 + 7.7086/10) / (1 + 7.7086/5) = .4607,
    # half 2.7764451 * sqrt(.048 + 7.7086/100) / 2.5417 = .3863.
    assert ppi_mean([1] * 20, [1] * 5, [1, 0, 0, 1, 0])[1:] == pytest.approx((0.0743, 0.8470), abs=1e-4)
    assert _wilson_t(2, 5) == pytest.approx((0.0743, 0.8470), abs=1e-4)


def test_ppi_mean_guard_falls_back_to_wilson_and_is_never_wider():
    rng = np.random.default_rng(9)
    for _ in range(40):
        big_n = int(rng.integers(30, 500))
        n = int(rng.integers(3, big_n // 2))
        y, f = _grades(rng, big_n, rng.uniform(0.05, 0.5), rng.uniform(0, 0.3), rng.uniform(0, 0.3))
        rev, unrev = _split(rng, big_n, n)
        r = ppi_mean(f[unrev], f[rev], y[rev], result=True)
        h_low, h_high = _wilson_t(int(y[rev].sum()), n)
        assert r.high - r.low <= h_high - h_low + 1e-12
        if r.human_only:
            assert (r.estimate, r.low, r.high) == pytest.approx((y[rev].mean(), h_low, h_high))
    # A judge that says 1 everywhere gets no weight: the review's own share and interval.
    assert ppi_mean([1] * 20, [1] * 5, [1, 0, 0, 1, 0]) == pytest.approx((0.4, *_wilson_t(2, 5)))


def test_ppi_mean_census_is_the_review_alone():
    assert ppi_mean([], [1, 0, 1, 1], [1, 0, 0, 1]) == pytest.approx((0.5, *_wilson_t(2, 4)))


def test_ppi_mean_no_wider_than_human_only_with_a_good_judge():
    rng = np.random.default_rng(5)
    y, f = _grades(rng, 2000, 0.3, 0.03, 0.03)
    rev, unrev = _split(rng, 2000, 100)
    r = ppi_mean(f[unrev], f[rev], y[rev], result=True)
    h_low, h_high = wilson_ci(int(y[rev].sum()), 100)  # even the normal-quantile Wilson interval
    assert not r.human_only and r.lam > 0.5
    assert r.high - r.low < 0.8 * (h_high - h_low)


# -- stratified ----------------------------------------------------------------------------------------------
def test_stratified_mean_combines_the_strata_by_size():
    rng = np.random.default_rng(13)
    y1, f1 = _grades(rng, 300, 0.2, 0.1, 0.1)
    y2, f2 = _grades(rng, 100, 0.6, 0.05, 0.2)
    r1, u1 = _split(rng, 300, 40)
    r2, u2 = _split(rng, 100, 30)
    parts = [ppi_mean(f1[u1], f1[r1], y1[r1], small_sample=False, result=True),
             ppi_mean(f2[u2], f2[r2], y2[r2], small_sample=False, result=True)]
    f_u = np.concatenate([f1[u1], f2[u2]])
    f_n = np.concatenate([f1[r1], f2[r2]])
    y_n = np.concatenate([y1[r1], y2[r2]])
    s_u = ["a"] * u1.size + ["b"] * u2.size
    s_n = ["a"] * r1.size + ["b"] * r2.size
    r = ppi_mean(f_u, f_n, y_n, small_sample=False, strata_unreviewed=s_u, strata_reviewed=s_n, result=True)
    assert r.estimate == pytest.approx(0.75 * parts[0].estimate + 0.25 * parts[1].estimate)
    se = math.sqrt(0.75**2 * parts[0].se ** 2 + 0.25**2 * parts[1].se ** 2)
    assert r.se == pytest.approx(se)
    assert (r.low, r.high) == pytest.approx((r.estimate - Z95 * se, r.estimate + Z95 * se))
    assert [s[0] for s in r.strata] == ["a", "b"] and r.strata[0][1] == pytest.approx(0.75)
    # Known population sizes replace the counts as weights.
    r2 = ppi_mean(f_u, f_n, y_n, small_sample=False, strata_unreviewed=s_u, strata_reviewed=s_n,
                  stratum_sizes={"a": 1, "b": 1}, result=True)
    assert r2.estimate == pytest.approx(0.5 * parts[0].estimate + 0.5 * parts[1].estimate)
    # With the guards: Welch-Satterthwaite degrees of freedom, never wider than the review alone.
    g = ppi_mean(f_u, f_n, y_n, strata_unreviewed=s_u, strata_reviewed=s_n, result=True)
    assert 29 <= g.df <= 68


def test_stratified_needs_a_reviewed_case_per_stratum_and_both_labels():
    with pytest.raises(ValueError, match="stratum 'b' has no reviewed case"):
        ppi_mean([1, 0, 1], [1, 0], [1, 1], strata_unreviewed=["a", "b", "b"], strata_reviewed=["a", "a"])
    with pytest.raises(ValueError, match="give both strata_unreviewed and strata_reviewed"):
        ppi_mean([1, 0, 1], [1, 0], [1, 1], strata_reviewed=["a", "a"])
    with pytest.raises(ValueError, match=r"strata_reviewed must be 1-D with one stratum per case \(2\)"):
        ppi_mean([1, 0, 1], [1, 0], [1, 1], strata_unreviewed=["a"] * 3, strata_reviewed=["a"])
    with pytest.raises(ValueError, match="stratum_sizes has no size for stratum 'a'"):
        ppi_mean([1], [1, 0], [1, 1], strata_unreviewed=["a"], strata_reviewed=["a", "a"], stratum_sizes={})


# -- paired difference ---------------------------------------------------------------------------------------
def _pairs(rng, big_n, pa=0.5, pb=0.5, fav=(0.25, 0.05, 0.05, 0.05)):
    p11 = pa * pb + 0.1
    k = rng.choice(4, size=big_n, p=[p11, pa - p11, pb - p11, 1 - pa - pb + p11])
    ya, yb = (k <= 1).astype(int), ((k == 0) | (k == 2)).astype(int)
    u, v = rng.random(big_n), rng.random(big_n)
    fa = np.where(ya == 1, u >= fav[1], u < fav[0]).astype(int)
    fb = np.where(yb == 1, v >= fav[3], v < fav[2]).astype(int)
    return ya, yb, fa, fb


def test_paired_difference_equals_ppi_python_on_the_differences():
    ppi = pytest.importorskip("ppi_py", reason="ppi-python (the test extra) is not installed")
    rng = np.random.default_rng(17)
    for _ in range(20):
        big_n = int(rng.integers(60, 2000))
        n = int(rng.integers(10, big_n - 10))
        ya, yb, fa, fb = _pairs(rng, big_n)
        rev, unrev = _split(rng, big_n, n)
        r = ppi_paired_difference(fa[unrev], fb[unrev], fa[rev], fb[rev], ya[rev], yb[rev], small_sample=False,
                                  result=True)
        args = ((ya - yb)[rev].astype(float), (fa - fb)[rev].astype(float), (fa - fb)[unrev].astype(float))
        ref_low, ref_high = ppi.ppi_mean_ci(*args, alpha=0.05)
        assert (r.low, r.high) == pytest.approx((float(np.ravel(ref_low)[0]), float(np.ravel(ref_high)[0])),
                                                abs=1e-12)
        # ppi-python's p-value tunes its weight unclipped; given the same weight it is the same test.
        ref_p = float(np.ravel(ppi.ppi_mean_pval(*args, null=0, lam=r.lam))[0])
        assert r.p_value == pytest.approx(ref_p, abs=1e-12)


def test_paired_difference_by_hand():
    # Unreviewed: judge A 1,1,0,1 and B 0,1,0,0 -> g = 1,0,0,1 (mean .5, variance .25).
    # Reviewed: judge A 1,0,1 / B 1,0,0 -> g = 0,0,1; human A 1,0,0 / B 1,1,0 -> d = 0,-1,0.
    # Plain PPI: d - g = 0,-1,-1 (mean -2/3, variance 2/9). Estimate .5 - 2/3 = -1/6.
    est, low, high, p = ppi_paired_difference([1, 1, 0, 1], [0, 1, 0, 0], [1, 0, 1], [1, 0, 0], [1, 0, 0],
                                              [1, 1, 0], tuned=False, small_sample=False)
    se = math.sqrt(0.25 / 4 + (2 / 9) / 3)
    assert est == pytest.approx(-1 / 6)
    assert (low, high) == pytest.approx((-1 / 6 - Z95 * se, -1 / 6 + Z95 * se))
    from scipy.stats import norm

    assert p == pytest.approx(2 * norm.sf((1 / 6) / se))


def test_paired_p_value_agrees_with_the_interval():
    rng = np.random.default_rng(23)
    seen = set()
    for _ in range(60):
        big_n = int(rng.integers(50, 600))
        n = int(rng.integers(8, big_n // 2))
        ya, yb, fa, fb = _pairs(rng, big_n, pa=float(rng.choice([0.5, 0.7])))
        rev, unrev = _split(rng, big_n, n)
        est, low, high, p = ppi_paired_difference(fa[unrev], fb[unrev], fa[rev], fb[rev], ya[rev], yb[rev])
        assert low <= est <= high
        if low > -1 and high < 1:  # (clipping can hide the edge)
            assert (p < 0.05) == (not low <= 0 <= high)
        seen.add(p < 0.05)
    assert seen == {True, False}


def test_paired_difference_with_a_favouring_judge_keeps_the_null():
    # No true difference, a judge that passes A's wrong answers 5 times as often as B's: the judge-only
    # difference is about +.1; the corrected interval holds 0.
    from trek.stats import mcnemar

    rng = np.random.default_rng(29)
    rejected = judge_only = 0
    for _ in range(40):
        ya, yb, fa, fb = _pairs(rng, 1000)
        rev, unrev = _split(rng, 1000, 200)
        p = ppi_paired_difference(fa[unrev], fb[unrev], fa[rev], fb[rev], ya[rev], yb[rev])[3]
        rejected += p < 0.05
        judge_only += mcnemar(fa, fb).p < 0.05
    assert judge_only >= 36
    assert rejected <= 6  # 2 expected at 5%


def test_paired_difference_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="judge_a_rev and judge_b_rev must have the same length"):
        ppi_paired_difference([1], [1], [1, 0], [1], [1, 0], [1])
    with pytest.raises(ValueError, match="human_b_rev must hold only 0/1"):
        ppi_paired_difference([1], [1], [1], [1], [1], [2])
    with pytest.raises(ValueError, match="level must be a number"):
        ppi_paired_difference([1], [1], [1], [1], [1], [1], alpha=1.0)


# -- inverse-probability weights -----------------------------------------------------------------------------
def test_ipw_by_hand():
    # f = 1,0,1,0; reviewed 0 and 2 (human 1 and 0), each drawn with probability .5; lam = 1:
    # terms f + 2 (y - f) on reviewed, f elsewhere: 1, 0, -1, 0 -> mean 0, variance (ddof 1) 2/3.
    est, low, high = ppi_mean_ipw([1, 0, 1, 0], [1, None, 0, None], [0.5] * 4, tuned=False, small_sample=False)
    assert est == pytest.approx(0.0)
    assert (low, high) == pytest.approx((0.0, Z95 * math.sqrt(2 / 3 / 4)))


def test_ipw_with_equal_probabilities_is_the_ppi_point_estimate():
    rng = np.random.default_rng(31)
    y, f = _grades(rng, 500, 0.3, 0.1, 0.1)
    rev, _ = _split(rng, 500, 100)
    human = np.full(500, np.nan)
    human[rev] = y[rev]
    est = ppi_mean_ipw(f, human, np.full(500, 0.2), tuned=False)[0]
    assert est == pytest.approx(prediction_powered_share(f, f[rev], y[rev], tuned=False)[0])


def test_ipw_unequal_probabilities_unbiased_over_draws():
    # Cases the judge calls positive are reviewed 4 times as often; the weighted estimate stays centred.
    rng = np.random.default_rng(37)
    ests = []
    for _ in range(300):
        y, f = _grades(rng, 400, 0.3, 0.15, 0.15)
        pi = np.where(f == 1, 0.4, 0.1)
        reviewed = rng.random(400) < pi
        human = np.where(reviewed, y, np.nan)
        ests.append(ppi_mean_ipw(f, human, pi)[0] - y.mean())
    assert abs(np.mean(ests)) < 0.01


def test_ipw_paired_and_bad_input():
    rng = np.random.default_rng(41)
    ya, yb, fa, fb = _pairs(rng, 600)
    pi = np.where(fa != fb, 0.5, 0.1)
    reviewed = rng.random(600) < pi
    ha, hb = np.where(reviewed, ya, np.nan), np.where(reviewed, yb, np.nan)
    est, low, high, p = ppi_paired_difference_ipw(fa, fb, ha, hb, pi)
    assert low <= est <= high and 0 <= p <= 1
    with pytest.raises(ValueError, match=r"inclusion\[1\] is 0.0"):
        ppi_mean_ipw([1, 0], [1, None], [0.5, 0.0])
    with pytest.raises(ValueError, match="human holds no reviewed case"):
        ppi_mean_ipw([1, 0], [None, None], [0.5, 0.5])
    with pytest.raises(ValueError, match=r"human_a and human_b must be reviewed on the same questions; .*\[1\]"):
        ppi_paired_difference_ipw([1, 0], [1, 0], [1, 0], [1, None], [0.5, 0.5])


# -- planning ------------------------------------------------------------------------------------------------
def test_reviews_needed_review_alone_is_the_smallest_n_that_reaches_the_width():
    from scipy.stats import t

    from trek.stats import ppi_reviews_needed

    alone, _ = ppi_reviews_needed(0.05, 5000, [[0.7, 0.0], [0.0, 0.3]])

    def half(n):  # Student's t and the rate with one pseudo-observation each way, as the guards
        w = (0.3 * n + 1) / (n + 2)
        return t.ppf(0.975, n - 1) * math.sqrt(w * (1 - w) / n)

    assert half(alone) <= 0.05 < half(alone - 1)
    assert 300 < alone < 350  # about 1.96^2 * .21 / .05^2 = 323


def test_reviews_needed_falls_with_a_better_judge_and_matches_the_review_alone_for_a_useless_one():
    from trek.stats import ppi_reviews_needed

    good = ppi_reviews_needed(0.05, 2000, [[0.68, 0.02], [0.02, 0.28]])
    fair = ppi_reviews_needed(0.05, 2000, [[0.63, 0.07], [0.07, 0.23]])
    useless = ppi_reviews_needed(0.05, 2000, [[0.7 * 0.6, 0.7 * 0.4], [0.3 * 0.6, 0.3 * 0.4]])  # independent
    assert good[0] == fair[0] == useless[0]
    assert good[1] < fair[1] < good[0]
    assert useless[1] == useless[0]  # lam = 0: the review alone
    assert ppi_reviews_needed(0.01, 100, [[0.5, 0.0], [0.0, 0.5]]) == (None, None)
    with pytest.raises(ValueError, match="joint must be a 2 x 2 table"):
        ppi_reviews_needed(0.05, 100, [[0.5, 0.5]])
    with pytest.raises(ValueError, match="half-width must lie strictly between 0 and 1"):
        ppi_reviews_needed(5, 100, [[0.5, 0.0], [0.0, 0.5]])
