"""Smooth ECE against Apple's relplot (the reference implementation) on generated data, its
behaviour on data of known calibration, the bootstrap interval and the reliability curve."""

from __future__ import annotations

import numpy as np
import pytest
import relplot
from relplot.estimators import KernelSmoother
from relplot.kernels import ReflectedGaussianKernel

from decguard_pipeline.core.calibration.smooth import (
    _Grid,
    _smooth_direct,
    smooth_ece,
    smooth_ece_at,
    smooth_ece_bandwidth,
)
from decguard_pipeline.core.calibration.smooth_bootstrap import smooth_calibration
from decguard_pipeline_tests.support.calibration_data import LINKS, binary_cases

TOL = 1e-9


def datasets():
    rng = np.random.default_rng(20231)
    for n in (1, 2, 7, 50, 500, 5000):
        for kind in ("calibrated", "over", "under"):
            c, right = binary_cases(rng, n, kind)
            yield f"{kind}-{n}", c, right.astype(float)
    c, right = binary_cases(rng, 300, "over")
    yield "ties", np.round(c, 1), right.astype(float)
    yield "zeros-and-ones", np.array([0.0, 1.0, 1.0, 0.0, 0.5, 1.0]), np.array([0, 1, 0, 1, 1, 1.0])
    yield "all-right-certain", np.ones(20), np.ones(20)
    yield "all-wrong-certain", np.ones(20), np.zeros(20)
    yield "all-right-unsure", np.full(40, 0.6), np.ones(40)
    c = rng.uniform(0.0, 1.0, 40_000)  # calibrated and large: σ* < 0.01, finer grids
    yield "large", c, (rng.uniform(size=c.size) < c).astype(float)


CASES = list(datasets())


@pytest.mark.parametrize(("name", "f", "y"), CASES, ids=[c[0] for c in CASES])
def test_agrees_with_relplot_smece_and_its_bandwidth(name, f, y):
    want, want_sigma = relplot.smECE(f, y, return_width=True)
    sigma, value = smooth_ece_bandwidth(f, y)
    assert sigma == want_sigma  # the same bisection: a multiple of 2**-10
    assert value == pytest.approx(want, abs=TOL)
    assert smooth_ece(f, y) == value


@pytest.mark.parametrize("sigma", [0.3, 0.05, 0.013, 0.0071, 0.003])
def test_fixed_bandwidth_agrees_with_relplot(sigma):
    rng = np.random.default_rng(7)
    c, right = binary_cases(rng, 3000, "over")
    assert smooth_ece_at(c, right, sigma) == pytest.approx(
        relplot.smECE_sigma(c, right.astype(float), sigma), abs=TOL
    )


@pytest.mark.parametrize("name", ["over-500", "under-5000", "ties", "zeros-and-ones", "large"])
def test_curve_and_density_agree_with_relplot(name):
    _, f, y = next(c for c in CASES if c[0] == name)
    result = smooth_calibration(f, y, n_bootstrap=0)
    mesh = np.asarray(result.curve.mesh)
    kernel = ReflectedGaussianKernel(result.bandwidth)
    want = KernelSmoother(kernel).fit(f.reshape(-1, 1), y).predict(mesh.reshape(-1, 1))
    np.testing.assert_allclose(result.curve.accuracy, want, rtol=0, atol=TOL)
    np.testing.assert_allclose(result.curve.density, kernel.kde(f, mesh), rtol=TOL, atol=TOL)
    assert result.curve.lower is None and result.low is None


def test_known_calibration():
    rng = np.random.default_rng(11)
    values = {}
    for kind in ("calibrated", "over", "under"):
        c, right = binary_cases(rng, 20_000, kind)
        values[kind] = smooth_ece(c, right)
        true_ece = float(np.mean(np.abs(c - LINKS[kind](c))))
        if kind == "calibrated":
            assert values[kind] < 0.015  # noise floor only
        else:  # kernel smoothing shaves a little off the true mean |f - E[y|f]|
            assert true_ece - 0.01 < values[kind] < true_ece + 0.005
    assert values["over"] > 10 * values["calibrated"]


def test_curve_shows_the_kind_of_miscalibration():
    rng = np.random.default_rng(5)
    curves = {}
    for kind in ("calibrated", "over", "under"):
        c, right = binary_cases(rng, 50_000, kind, low=0.0)
        curves[kind] = smooth_calibration(c, right, n_bootstrap=0).curve
    mesh = np.asarray(curves["calibrated"].mesh)
    inner = (mesh > 0.2) & (mesh < 0.8)
    accuracy = {kind: np.asarray(curve.accuracy) for kind, curve in curves.items()}
    # calibrated: on the diagonal (σ* is small, so the curve is barely blurred)
    assert np.max(np.abs(accuracy["calibrated"][inner] - mesh[inner])) < 0.03
    # over-confident: right less often than claimed; under-confident: more often
    assert np.all(accuracy["over"][inner] < mesh[inner] - 0.05)
    assert np.all(accuracy["under"][inner] > mesh[inner] + 0.05)
    density = np.asarray(curves["calibrated"].density)
    assert np.trapezoid(density, mesh) == pytest.approx(1.0, abs=0.01)  # uniform forecasts
    assert np.all(np.abs(density[inner] - 1.0) < 0.1)


def test_order_of_cases_does_not_matter():
    rng = np.random.default_rng(3)
    c, right = binary_cases(rng, 777, "under")
    perm = rng.permutation(c.size)
    assert smooth_ece(c[perm], right[perm]) == pytest.approx(smooth_ece(c, right), abs=1e-14)


def test_edge_cases():
    assert smooth_ece(np.zeros(0), np.zeros(0)) is None
    assert smooth_calibration(np.zeros(0), np.zeros(0)) is None
    assert smooth_ece_at(np.zeros(0), np.zeros(0), 0.1) is None
    # certain and right: no residual anywhere; the bisection walks down until the next
    # midpoint, 2**-10, falls below 0.001 (counted as below the fixed point)
    sigma, value = smooth_ece_bandwidth(np.ones(5), np.ones(5))
    assert (sigma, value) == (2**-9, 0.0)
    # certain and always wrong: the maximum, at the widest kernel
    sigma, value = smooth_ece_bandwidth(np.ones(5), np.zeros(5))
    assert sigma == 1.0 and 0.9995 < value <= 1.0  # the density floor shaves ~1e-4
    with pytest.raises(ValueError, match="within"):
        smooth_ece(np.array([1.2]), np.array([1]))
    with pytest.raises(ValueError, match="0/1"):
        smooth_ece(np.array([0.5]), np.array([2]))
    with pytest.raises(ValueError, match="values"):
        smooth_ece(np.array([0.5, 0.6]), np.array([1]))


def test_bootstrap_is_seeded_and_brackets_sensibly():
    rng = np.random.default_rng(8)
    c, right = binary_cases(rng, 400, "over")
    a = smooth_calibration(c, right, seed=1)
    assert a == smooth_calibration(c, right, seed=1)  # same seed, same everything
    b = smooth_calibration(c, right, seed=2)
    assert (a.low, a.high) != (b.low, b.high)
    assert a.value == b.value and a.curve.accuracy == b.curve.accuracy
    assert 0 <= a.low < a.value < a.high
    assert all(lo <= hi for lo, hi in zip(a.curve.lower, a.curve.upper, strict=True))
    # ten times the cases: a markedly narrower interval
    c, right = binary_cases(rng, 4000, "over")
    wide = smooth_calibration(c, right, seed=1)
    assert (wide.high - wide.low) < 0.6 * (a.high - a.low)


def test_bootstrap_of_one_case_or_identical_cases_is_the_point():
    for f, y in ((np.array([0.7]), np.array([1])), (np.full(30, 0.8), np.ones(30))):
        result = smooth_calibration(f, y, n_bootstrap=50)
        assert result.low == pytest.approx(result.value, abs=1e-12)
        assert result.high == pytest.approx(result.value, abs=1e-12)


def test_interval_covers_the_truth_for_a_miscalibrated_model():
    # smECE's population value at n = 200k stands in for the truth
    rng = np.random.default_rng(21)
    truth = smooth_ece(*binary_cases(rng, 200_000, "over"))
    covered = 0
    for seed in range(20):
        c, right = binary_cases(np.random.default_rng(100 + seed), 300, "over")
        r = smooth_calibration(c, right, n_bootstrap=100, seed=seed)
        covered += r.low <= truth <= r.high
    assert covered >= 16  # nominal 95 %: 19 of 20 expected (P(<= 15) is 1.6 % if exact)


def test_fft_smoothing_equals_direct_convolution():
    rng = np.random.default_rng(2)
    for m in (1001, 1280, 2561):  # odd and even grid sizes
        masses = rng.uniform(size=(2, 3, m))
        grid = _Grid(masses)
        for sigma in (0.5, 0.05, 0.004):
            rows = np.arange(3)
            fft = grid.smooth(0, sigma, rows)
            direct = _smooth_direct(masses[0], sigma)
            np.testing.assert_allclose(fft, direct, rtol=0, atol=1e-9 * direct.max())
            np.testing.assert_allclose(
                grid.totals(1, sigma), _smooth_direct(masses[1], sigma).sum(axis=1), rtol=1e-12
            )
