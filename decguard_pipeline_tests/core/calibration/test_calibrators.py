"""Calibrators against independent fits on the same data: temperature and vector scaling
against scipy's minimisers of the same objective, isotonic regression against
scikit-learn's ``IsotonicRegression``, histogram binning against a hand count; ``auto``'s
choice against the cross-validated NLL it reports; the stratified split."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize, special
from sklearn.isotonic import IsotonicRegression

from decguard_pipeline.core.calibration.calibrators import (
    METHODS,
    cross_validated_nll,
    expected_nll,
    fit,
)
from decguard_pipeline.core.calibration.logits import log_probabilities
from decguard_pipeline.core.calibration.scaling import (
    RIDGE,
    T_MAX,
    T_MIN,
    apply_temperature,
    fit_temperature,
    fit_vector,
)
from decguard_pipeline.core.calibration.split import stratified_split
from decguard_pipeline_tests.support.calibration_data import multiclass_cases


def synthetic_logits(seed: int, n: int, k: int, sharpness: float) -> tuple[np.ndarray, ...]:
    """Logits z with labels drawn from softmax(z) and a model that reports softmax(s z): an
    over-confident one for s > 1, whose true temperature is s."""
    rng = np.random.default_rng(seed)
    z = rng.normal(0.0, 3.0, (n, k))
    truth = special.softmax(z, axis=1)
    expected = np.array([rng.choice(k, p=row) for row in truth])
    return sharpness * z, expected


def scipy_temperature(z: np.ndarray, expected: np.ndarray) -> float:
    rows = np.isfinite(z[np.arange(len(expected)), expected])
    z, e = z[rows], expected[rows]

    def mean_nll(t: float) -> float:
        return -np.mean(special.log_softmax(z / t, axis=1)[np.arange(len(e)), e])

    best = optimize.minimize_scalar(
        mean_nll, bounds=(T_MIN, T_MAX), method="bounded", options={"xatol": 1e-12}
    )
    return float(best.x)


def test_temperature_is_scipys_minimum_nll_on_logits():
    z, expected = synthetic_logits(1, 3000, 4, sharpness=8.0)
    t = fit_temperature(z, expected)
    assert t == pytest.approx(scipy_temperature(z, expected), rel=1e-7)
    assert t == pytest.approx(8.0, rel=0.06)  # the sharpening that was applied


def test_logits_beat_probabilities_floored_at_1e15():
    # a very over-confident model: most of its probabilities are far below DecGuard's NLL floor
    z, expected = synthetic_logits(2, 3000, 4, sharpness=25.0)
    probs = special.softmax(z, axis=1)
    assert (probs < 1e-15).mean() > 0.4
    exact = fit_temperature(z, expected)
    floored = fit_temperature(np.log(np.maximum(probs, 1e-15)), expected)
    assert exact == pytest.approx(25.0, rel=0.06)
    assert abs(floored / exact - 1) > 0.1  # what the floor costs: the old fit was this far off


def test_temperature_keeps_every_top_label_and_probability_zero():
    z, _ = synthetic_logits(3, 500, 5, sharpness=2.0)
    z[::7, 2] = -np.inf  # labels given probability 0
    for t in (0.05, 0.7, 3.0, 60.0):
        scaled = apply_temperature(z, t)
        np.testing.assert_array_equal(scaled.argmax(axis=1), z.argmax(axis=1))
        assert (scaled[::7, 2] == 0.0).all()
        np.testing.assert_allclose(scaled.sum(axis=1), 1.0, rtol=1e-12)


def test_temperature_ignores_cases_whose_expected_label_has_probability_zero():
    z, expected = synthetic_logits(4, 800, 3, sharpness=3.0)
    z[:50, :] = [0.0, -np.inf, -np.inf]
    expected[:50] = 1  # hopeless at every T: no information about T
    assert fit_temperature(z, expected) == pytest.approx(scipy_temperature(z, expected), rel=1e-7)
    assert fit_temperature(z, expected) == fit_temperature(z[50:], expected[50:])


def vector_objective(theta: np.ndarray, z: np.ndarray, e: np.ndarray) -> float:
    k = z.shape[1]
    w, b = theta[:k], theta[k:]
    a = np.where(np.isfinite(z), np.nan_to_num(z, neginf=0.0) * w + b, -np.inf)
    nll = -np.mean(special.log_softmax(a, axis=1)[np.arange(len(e)), e])
    return nll + 0.5 * RIDGE * (np.sum((w - 1) ** 2) + np.sum(b**2))


@pytest.mark.parametrize("seed", [5, 6])
def test_vector_scaling_is_scipys_minimum_of_the_same_objective(seed):
    rng = np.random.default_rng(seed)
    z, expected = synthetic_logits(seed, 1500, 3, sharpness=1.0)
    # per-label miscalibration: label 0 too sharp, label 2 shifted
    z = z * np.array([2.5, 1.0, 0.6]) + np.array([0.0, 0.3, -1.0])
    z[rng.uniform(size=z.shape) < 0.02] = -np.inf
    z[np.arange(len(z)), expected] = np.where(
        np.isinf(z[np.arange(len(z)), expected]), 0.0, z[np.arange(len(z)), expected]
    )
    scale, bias = fit_vector(z, expected)
    theta = np.concatenate((scale, bias))
    reference = optimize.minimize(
        vector_objective,
        np.concatenate((np.ones(3), np.zeros(3))),
        args=(z, expected),
        method="BFGS",
        options={"gtol": 1e-12, "maxiter": 10_000},
    )
    assert vector_objective(theta, z, expected) <= reference.fun + 1e-12
    np.testing.assert_allclose(theta, reference.x, atol=2e-5)
    assert scale[0] < 0.6 and scale[2] > 1.2  # it undoes what was done


def test_vector_scaling_stays_finite_on_separable_cases():
    z = np.array([[2.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 3.0]])
    scale, bias = fit_vector(z, np.array([0, 0, 1, 1]))
    assert np.isfinite(scale).all() and np.isfinite(bias).all()
    assert scale.max() < 1e4


def test_isotonic_is_scikit_learns_per_label_then_renormalised():
    rng = np.random.default_rng(7)
    probs, expected = multiclass_cases(rng, 800, 3, "over")
    new, _ = multiclass_cases(rng, 300, 3, "over")
    new[:5] = [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [1 / 3] * 3, [0.2, 0.3, 0.5]]
    calibrator = fit("isotonic", log_probabilities(probs), probs, expected)
    mapped = np.column_stack(
        [
            IsotonicRegression(out_of_bounds="clip", y_min=0.0, y_max=1.0)
            .fit(probs[:, j], expected == j)
            .predict(new[:, j])
            for j in range(3)
        ]
    )
    total = mapped.sum(axis=1, keepdims=True)
    reference = np.where(total > 0, mapped / np.where(total > 0, total, 1.0), new)
    np.testing.assert_allclose(
        calibrator.apply(log_probabilities(new), new), reference, rtol=1e-12, atol=1e-15
    )


def test_histogram_is_the_share_of_each_bin():
    probs = np.array([[0.95, 0.05], [0.92, 0.08], [0.91, 0.09], [0.55, 0.45], [0.15, 0.85]])
    expected = np.array([0, 0, 1, 1, 1])
    calibrator = fit("histogram", log_probabilities(probs), probs, expected, bins=2)
    # label 0: bin (0.5, 1] holds 4 cases, 2 of label 0; bin [0, 0.5] holds 1, none
    # label 1: bin [0, 0.5] holds 4 cases (0.05..0.45), 2 of label 1; bin (0.5, 1] 1 of 1
    assert calibrator.parameters["values"] == [[0.0, 0.5], [0.5, 1.0]]
    assert calibrator.parameters["counts"] == [[1, 4], [4, 1]]
    out = calibrator.apply(log_probabilities(probs), probs)
    np.testing.assert_allclose(out[0], [0.5, 0.5])
    np.testing.assert_allclose(out[4], [0.0, 1.0])
    # an empty bin maps to its centre
    three = fit("histogram", log_probabilities(probs), probs, expected, bins=4)
    assert three.parameters["counts"][0][1] == 0 and three.parameters["values"][0][1] == 0.375


def test_auto_picks_the_lowest_cross_validated_nll():
    rng = np.random.default_rng(8)
    probs, expected = multiclass_cases(rng, 600, 3, "over")
    z = log_probabilities(probs)
    choice = cross_validated_nll(z, probs, expected, folds=5, seed=1)
    assert set(choice.nll) == set(METHODS)
    assert choice.nll[choice.method] == min(choice.nll.values())
    # recomputed by hand for one method: the same folds, the same out-of-fold NLL
    folds = np.array_split(np.random.default_rng(1).permutation(600), 5)
    out = np.empty_like(probs)
    for rows in folds:
        train = np.ones(600, dtype=bool)
        train[rows] = False
        t = fit_temperature(z[train], expected[train])
        out[rows] = apply_temperature(z[rows], t)
    assert choice.nll["temperature"] == pytest.approx(expected_nll(out, expected), rel=1e-12)


def test_auto_prefers_binning_for_a_one_hot_decider():
    rng = np.random.default_rng(9)
    probs, expected = multiclass_cases(rng, 400, 3, "calibrated")
    onehot = np.eye(3)[probs.argmax(axis=1)]
    choice = cross_validated_nll(log_probabilities(onehot), onehot, expected)
    assert choice.method in ("histogram", "isotonic")
    assert choice.nll["temperature"] > 5 * choice.nll[choice.method]


def test_the_split_is_stratified_and_seeded():
    expected = np.array([0] * 10 + [1] * 7 + [2] * 1 + [-1] * 4)
    mask = stratified_split(expected, 0.5, seed=3)
    assert [int(mask[expected == j].sum()) for j in range(3)] == [5, 4, 1]
    assert not mask[expected == -1].any()
    np.testing.assert_array_equal(mask, stratified_split(expected, 0.5, seed=3))
    assert not np.array_equal(mask, stratified_split(expected, 0.5, seed=4))
    assert stratified_split(expected, 0.3, seed=0).sum() == 3 + 2 + 0
