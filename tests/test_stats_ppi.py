"""trek.stats.prediction_powered_share: PPI and PPI++ for a label share.

The reference is ppi-python's ``ppi_mean_ci`` (a test-only dependency: the ``test`` extra installs
it; the comparison skips when it is absent). The other tests work the formula out by hand.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from trek.stats import ppi_lambda, prediction_powered_share, wilson_ci

Z95 = 1.959963984540054


def _random_case(rng: np.random.Generator, big_n: int, n: int, prevalence: float, fp: float, fn: float):
    truth = rng.random(big_n) < prevalence
    judge = np.where(truth, rng.random(big_n) >= fn, rng.random(big_n) < fp)
    idx = rng.choice(big_n, size=n, replace=False)
    return judge.astype(int), judge[idx].astype(int), truth[idx].astype(int)


@pytest.mark.parametrize("tuned", [True, False])
def test_equals_ppi_python_on_random_inputs(tuned):
    ppi = pytest.importorskip("ppi_py", reason="ppi-python (the test extra) is not installed")
    rng = np.random.default_rng(41)
    compared = 0
    for _ in range(40):
        big_n = int(rng.integers(50, 3000))
        n = int(rng.integers(10, min(400, big_n)))
        f_all, f_n, y_n = _random_case(rng, big_n, n, rng.uniform(0.05, 0.6), rng.uniform(0, 0.4), rng.uniform(0, 0.5))
        alpha = float(rng.choice([0.05, 0.1, 0.2]))
        est, low, high = prediction_powered_share(f_all, f_n, y_n, alpha=alpha, tuned=tuned, small_sample=False)
        lam = None if tuned else 1.0
        ref_low, ref_high = ppi.ppi_mean_ci(y_n.astype(float), f_n.astype(float), f_all.astype(float),
                                            alpha=alpha, lam=lam)
        ref_est = ppi.ppi_mean_pointestimate(y_n.astype(float), f_n.astype(float), f_all.astype(float), lam=lam)
        assert est == pytest.approx(float(np.ravel(ref_est)[0]), abs=1e-12)
        assert low == pytest.approx(max(0.0, float(np.ravel(ref_low)[0])), abs=1e-12)
        assert high == pytest.approx(min(1.0, float(np.ravel(ref_high)[0])), abs=1e-12)
        compared += 1
    assert compared == 40


def test_untuned_by_hand():
    # N = 4 judge labels 1,1,0,0 (mean 0.5); reviewed: judge 1,0, human 1,1 -> rectifier y - f = 0,1.
    est, low, high = prediction_powered_share([1, 1, 0, 0], [1, 0], [1, 1], tuned=False, small_sample=False)
    assert est == pytest.approx(0.5 + 0.5)
    # se^2 = var(f_N)/N + var(rect)/n = 0.25/4 + 0.25/2 = 0.1875
    se = math.sqrt(0.1875)
    assert low == pytest.approx(1.0 - Z95 * se)
    assert high == 1.0  # clipped


def test_tuned_weight_by_hand():
    f_all = [1, 1, 1, 0, 0, 0, 0, 0]
    f_n, y_n = [1, 1, 0, 0], [1, 0, 0, 0]
    # cov_n(y, f) = mean((y - .25)(f - .5)) = (.75*.5 + (-.25)(.5) + (-.25)(-.5)*2)/4 = .125
    # pooled judge labels: 1,1,0,0,1,1,1,0,0,0,0,0 -> 5 ones of 12, var (ddof 1) = 12/11 * 5/12 * 7/12
    var_f = 12 / 11 * (5 / 12) * (7 / 12)
    expected = 0.125 / ((1 + 4 / 8) * var_f)
    assert ppi_lambda(f_all, f_n, y_n) == pytest.approx(expected)
    est, _, _ = prediction_powered_share(f_all, f_n, y_n, small_sample=False)
    assert est == pytest.approx(expected * 3 / 8 + (0.25 - expected * 0.5))


def test_constant_judge_gets_weight_zero_and_gives_the_human_mean():
    # The judge says 0 everywhere: no information, lam = 0 and the estimate is the human share.
    y_n = [1, 0, 0, 1, 0]
    est, low, high = prediction_powered_share([0] * 50, [0] * 5, y_n, small_sample=False)
    assert ppi_lambda([0] * 50, [0] * 5, y_n) == 0.0
    assert est == pytest.approx(0.4)
    se = math.sqrt(0.24 / 5)
    assert (low, high) == pytest.approx((max(0.0, 0.4 - Z95 * se), 0.4 + Z95 * se))
    assert low == 0.0  # clipped at 0
    # With the small-sample guards a weightless judge gives the human-only Wilson interval.
    assert prediction_powered_share([0] * 50, [0] * 5, y_n) == pytest.approx((0.4, *wilson_ci(2, 5)))


def test_small_sample_guard_keeps_width_when_the_review_holds_no_disagreement():
    # 30 reviewed cases on which human and judge agree: the plain interval is only the judge's
    # sampling error over N; the guarded one admits disagreements the sample happened not to hold.
    rng = np.random.default_rng(8)
    f_all = (rng.random(2000) < 0.5).astype(int)
    f_n = f_all[:30]
    _, p_low, p_high = prediction_powered_share(f_all, f_n, f_n, small_sample=False)
    est, low, high = prediction_powered_share(f_all, f_n, f_n)
    h_low, h_high = wilson_ci(int(f_n.sum()), 30)
    assert p_high - p_low < 0.08
    assert p_high - p_low < high - low < h_high - h_low
    # 0.5 added to each cell: values (1 - lam, 1, -lam, 0) with weights (k + .5, .5, .5, 30 - k + .5) / 32
    lam = ppi_lambda(f_all, f_n, f_n)
    k = int(f_n.sum())
    w = np.array([k + 0.5, 0.5, 0.5, 30 - k + 0.5]) / 32
    v = np.array([1 - lam, 1, -lam, 0])
    se = math.sqrt(lam**2 * f_all.var() / 2000 + (w @ (v - w @ v) ** 2) / 30)
    t = 2.045229642132703  # Student's t, 29 degrees of freedom, 97.5%
    assert (low, high) == pytest.approx((est - t * se, est + t * se))


def test_perfect_judge_on_agreeing_reviews_stays_near_the_judge_share():
    # Human == judge on the reviewed cases: the corrected share lies between the judge's share over
    # all cases and over the reviewed ones; with lam = 1 it is the judge's share exactly.
    rng = np.random.default_rng(3)
    f_all = (rng.random(500) < 0.3).astype(int)
    idx = rng.choice(500, 60, replace=False)
    f_n = f_all[idx]
    est_untuned, _, _ = prediction_powered_share(f_all, f_n, f_n, tuned=False)
    assert est_untuned == pytest.approx(f_all.mean())
    est, low, high = prediction_powered_share(f_all, f_n, f_n)
    lo_j, hi_j = sorted([f_all.mean(), f_n.mean()])
    assert lo_j - 1e-12 <= est <= hi_j + 1e-12
    assert low <= est <= high


def test_ppi_interval_no_wider_than_human_only_with_an_informative_judge():
    rng = np.random.default_rng(5)
    f_all, f_n, y_n = _random_case(rng, 2000, 100, 0.3, 0.05, 0.05)
    _, low, high = prediction_powered_share(f_all, f_n, y_n)
    h_low, h_high = wilson_ci(int(y_n.sum()), y_n.size)
    assert high - low < h_high - h_low


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (([], [1], [1]), "judge_all is empty"),
        (([1, 0], [1, 0], [1]), "judge_reviewed and human_reviewed must have the same length"),
        (([1, 0], [1], [2]), "human_reviewed must hold only 0/1"),
        (([1, None], [1], [1]), "judge_all contains 1 missing value"),
    ],
)
def test_bad_input_names_the_argument(args, message):
    with pytest.raises(ValueError, match=message):
        prediction_powered_share(*args)


@pytest.mark.parametrize("alpha", [0, 1, 1.5, "0.05"])
def test_bad_alpha(alpha):
    with pytest.raises(ValueError, match="level must be a number"):
        prediction_powered_share([1, 0], [1], [1], alpha=alpha)
