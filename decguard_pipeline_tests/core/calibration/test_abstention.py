"""The guaranteed abstention threshold: the binomial tail against scipy, fixed-sequence
semantics on hand-made cases, and a simulation showing the risk bound holds in >= 1 − δ of
1,000 repetitions (where picking the threshold by its observed risk does not)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from decguard_pipeline.core.calibration.abstention import GRID, binomial_cdf, guaranteed_threshold


@pytest.mark.parametrize("p", [0.001, 0.05, 0.1, 0.3, 0.5, 0.9])
def test_binomial_tail_agrees_with_scipy(p):
    rng = np.random.default_rng(int(p * 1000))
    n = np.concatenate([np.arange(0, 40), rng.integers(40, 100_000, 400)])
    k = np.concatenate([rng.integers(-1, 41, 40), (n[40:] * rng.uniform(0, 0.5, 400)).astype(int)])
    got = binomial_cdf(k, n, p)
    want = stats.binom.cdf(k, n, p)
    tiny = want < 1e-290
    np.testing.assert_allclose(got[~tiny], want[~tiny], rtol=1e-9, atol=0)
    assert np.all(got[tiny] < 1e-280)


def test_binomial_tail_edges():
    assert binomial_cdf(np.array([0]), np.array([0]), 0.2)[0] == 1.0  # n = 0
    assert binomial_cdf(np.array([-1]), np.array([5]), 0.2)[0] == 0.0
    assert binomial_cdf(np.array([5]), np.array([5]), 0.2)[0] == 1.0
    assert binomial_cdf(np.array([0]), np.array([22]), 0.1)[0] == pytest.approx(0.9**22, rel=1e-13)


def test_needs_enough_cases_for_any_guarantee():
    # all right at confidence 0.9: zero errors certify risk <= 0.1 only once 0.9^n <= 0.1,
    # i.e. from n = 22 on
    for n, certified in ((21, False), (22, True)):
        a = guaranteed_threshold(np.full(n, 0.9), np.ones(n), alpha=0.1, delta=0.1)
        assert (a.threshold is not None) is certified
    a = guaranteed_threshold(np.full(22, 0.9), np.ones(22), alpha=0.1, delta=0.1)
    assert a.threshold == 0.0 and a.coverage == 1.0 and a.kept == 22  # every case kept
    assert a.selective_risk == 0.0 and a.p_value == pytest.approx(0.9**22)


def test_threshold_coverage_and_risk_on_a_hand_made_set():
    # 100 cases at 0.95 with 2 wrong, 100 at 0.6 with 40 wrong
    conf = np.r_[np.full(100, 0.95), np.full(100, 0.6)]
    right = np.r_[np.ones(98), np.zeros(2), np.ones(60), np.zeros(40)]
    a = guaranteed_threshold(conf, right, alpha=0.1, delta=0.1)
    # keeping the 0.95 cases: P(Bin(100, .1) <= 2) ~ 0.002 passes; adding the 0.6 cases
    # (42 wrong of 200) fails: the lowest threshold above 0.6 on the grid is 0.601
    assert a.threshold == 0.601 and a.kept == 100 and a.coverage == 0.5
    assert a.selective_risk == 0.02
    assert a.p_value == pytest.approx(stats.binom.cdf(2, 100, 0.1), rel=1e-12)


def test_fixed_sequence_stops_at_the_first_failure():
    # the 30 most confident cases are bad (5 wrong): the sequence stops there, even though
    # the 530 most confident together (5 wrong) would pass on their own
    conf = np.r_[np.full(30, 0.99), np.full(500, 0.8)]
    right = np.r_[np.zeros(5), np.ones(25), np.ones(500)]
    assert guaranteed_threshold(conf, right, alpha=0.1, delta=0.1).threshold is None
    assert guaranteed_threshold(conf, right, alpha=0.1, delta=0.1, thresholds=[0.8]).kept == 530


def test_edge_cases_and_invariances():
    assert guaranteed_threshold(np.zeros(0), np.zeros(0), alpha=0.1, delta=0.1).threshold is None
    rng = np.random.default_rng(0)
    conf = rng.uniform(0.5, 1, 300)
    assert guaranteed_threshold(conf, np.zeros(300), alpha=0.1, delta=0.1).threshold is None
    right = rng.uniform(size=300) < conf**0.3
    a = guaranteed_threshold(conf, right, alpha=0.1, delta=0.1)
    perm = rng.permutation(300)
    assert a == guaranteed_threshold(conf[perm], right[perm], alpha=0.1, delta=0.1)
    reversed_grid = guaranteed_threshold(conf, right, alpha=0.1, delta=0.1, thresholds=GRID[::-1])
    assert a == reversed_grid
    assert a.threshold is not None and a.selective_risk <= 0.1
    for bad in ({"alpha": 0.0, "delta": 0.1}, {"alpha": 0.1, "delta": 1.0}):
        with pytest.raises(ValueError, match="strictly"):
            guaranteed_threshold(conf, right, **bad)


def risk_above(threshold: float) -> float:
    """True selective risk of the simulated model: C ~ U(0.5, 1), P(right | C) = C."""
    lowest = max(threshold, 0.5)
    return (1 - lowest) / 2


def test_the_risk_bound_holds_in_at_least_1_minus_delta_of_1000_repetitions():
    alpha, delta, n, reps = 0.1, 0.1, 400, 1000
    # R(λ) = (1 - λ) / 2 above 0.5: exactly alpha at λ = 0.8 (coverage 0.4)
    rng = np.random.default_rng(2021)
    violated = guaranteed = naive_violated = 0
    coverage = []
    for _ in range(reps):
        conf = rng.uniform(0.5, 1, n)
        right = rng.uniform(size=n) < conf
        a = guaranteed_threshold(conf, right, alpha=alpha, delta=delta)
        if a.threshold is not None:
            guaranteed += 1
            violated += risk_above(a.threshold) > alpha
            coverage.append(a.coverage)
        # the naive rule: the lowest threshold whose observed risk is <= alpha
        order = np.argsort(-conf)
        wrong = np.cumsum(~right[order])
        kept = np.searchsorted(-conf[order], -GRID, side="right")
        ok = (kept > 0) & (wrong[np.maximum(kept - 1, 0)] <= alpha * kept)
        naive_violated += risk_above(GRID[np.flatnonzero(ok)[-1]]) > alpha
    assert violated <= delta * reps  # the guarantee
    assert naive_violated > 3 * delta * reps  # the test can tell a rule without one
    assert guaranteed >= 0.6 * reps  # and the guarantee is not bought by giving up
    assert 0.1 < float(np.mean(coverage)) < 0.4
    assert math.isclose(risk_above(0.8), alpha)
