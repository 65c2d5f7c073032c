"""Temperature scaling: the fit against scipy's bounded minimiser, recovery of a known
temperature, honest out-of-fold before/after numbers, and the edges."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize, special

from decguard_pipeline.core.calibration.recalibration import (
    T_MAX,
    T_MIN,
    fit_temperature,
    scale,
    temperature_scaling,
)
from decguard_pipeline.core.golden.metrics import brier, nll
from decguard_pipeline_tests.support.calibration_data import multiclass_cases, sharpen


def mean_nll(probs, expected, t):
    z = np.log(probs) / t  # unfloored: the fit's logits are log p
    return -np.mean(special.log_softmax(z, axis=1)[np.arange(len(expected)), expected])


@pytest.mark.parametrize("kind", ["calibrated", "over", "under", "label_shift"])
def test_fit_matches_a_generic_minimiser(kind):
    rng = np.random.default_rng(1)
    probs, expected = multiclass_cases(rng, 2000, 4, kind)
    t = fit_temperature(probs, expected)
    best = optimize.minimize_scalar(
        lambda v: mean_nll(probs, expected, v),
        bounds=(T_MIN, T_MAX),
        method="bounded",
        options={"xatol": 1e-12},
    )
    assert t == pytest.approx(best.x, rel=1e-6)
    assert mean_nll(probs, expected, t) <= best.fun + 1e-13


@pytest.mark.parametrize(("shown", "fitted"), [(0.5, 2.0), (2.0, 0.5), (1.0, 1.0)])
def test_recovers_the_temperature_that_was_applied(shown, fitted):
    # the model reports q^(1/shown); q^(1/shown)^(1/T) = q needs T = 1/shown
    rng = np.random.default_rng(3)
    q, expected = multiclass_cases(rng, 20_000, 3, "calibrated")
    assert fit_temperature(sharpen(q, shown), expected) == pytest.approx(fitted, rel=0.04)


@pytest.mark.parametrize("kind", ["over", "under"])
def test_scaling_repairs_a_miscalibrated_model_out_of_fold(kind):
    rng = np.random.default_rng(5)
    probs, expected = multiclass_cases(rng, 3000, 3, kind)
    result = temperature_scaling(probs, expected, folds=5, seed=1)
    assert (result.temperature > 1.5) if kind == "over" else (result.temperature < 0.7)
    assert result.after.ece < 0.5 * result.before.ece
    assert result.after.nll < result.before.nll
    assert result.after.brier < result.before.brier
    assert len(result.fold_temperatures) == result.folds == 5
    assert all(abs(t / result.temperature - 1) < 0.15 for t in result.fold_temperatures)
    assert result.before.nll == nll(probs[np.arange(3000), expected])
    assert result.before.brier == brier(probs, expected)


def test_a_calibrated_model_gains_nothing_out_of_fold():
    rng = np.random.default_rng(8)
    probs, expected = multiclass_cases(rng, 3000, 3, "calibrated")
    result = temperature_scaling(probs, expected)
    assert result.temperature == pytest.approx(1.0, abs=0.06)
    # in-sample the fit always helps; out of fold the gain is noise
    assert result.after.nll == pytest.approx(result.before.nll, abs=0.005)


def test_scaling_keeps_the_selected_label():
    rng = np.random.default_rng(4)
    probs, _ = multiclass_cases(rng, 500, 5, "calibrated")
    for t in (0.1, 0.7, 3.0, 50.0):
        scaled = scale(probs, t)
        np.testing.assert_array_equal(scaled.argmax(axis=1), probs.argmax(axis=1))
        np.testing.assert_allclose(scaled.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(scale(probs, 1.0), probs, rtol=1e-9, atol=1e-14)


def test_folds_are_seeded():
    rng = np.random.default_rng(2)
    probs, expected = multiclass_cases(rng, 200, 3, "over")
    a = temperature_scaling(probs, expected, seed=4)
    assert a == temperature_scaling(probs, expected, seed=4)
    assert a.fold_temperatures != temperature_scaling(probs, expected, seed=5).fold_temperatures
    assert a.temperature == temperature_scaling(probs, expected, seed=5).temperature


def test_edge_cases():
    empty = (np.zeros((0, 2)), np.zeros(0, dtype=int))
    assert fit_temperature(*empty) is None and temperature_scaling(*empty) is None
    one = (np.array([[0.7, 0.3]]), np.array([0]))
    assert temperature_scaling(*one) is None  # nothing to hold out
    assert fit_temperature(*one) == T_MIN  # one right case: sharpen as far as allowed
    # three cases and five folds: leave-one-out
    three = temperature_scaling(np.array([[0.7, 0.3], [0.4, 0.6], [0.9, 0.1]]), np.array([0, 0, 0]))
    assert three.folds == 3
    # one label, or uniform rows: the likelihood ignores T
    assert fit_temperature(np.ones((4, 1)), np.zeros(4, dtype=int)) == 1.0
    assert fit_temperature(np.full((4, 3), 1 / 3), np.array([0, 1, 2, 0])) == 1.0
    # all right with certainty (log p is 0 and -inf): the likelihood is perfect at every T
    certain = temperature_scaling(
        np.array([[1.0, 0.0]] * 4 + [[0.0, 1.0]] * 4), np.array([0] * 4 + [1] * 4)
    )
    assert certain.temperature == 1.0 and not certain.at_bound
    # all right with a margin: the fit runs to the lower bound, flagged
    sure = temperature_scaling(
        np.array([[0.9, 0.1]] * 4 + [[0.2, 0.8]] * 4), np.array([0] * 4 + [1] * 4)
    )
    assert sure.temperature == T_MIN and sure.at_bound
    # all wrong with a margin: to the upper bound (as close to uniform as allowed)
    wrong = temperature_scaling(np.array([[0.9, 0.1]] * 6), np.ones(6, dtype=int))
    assert wrong.temperature == T_MAX and wrong.at_bound
    assert wrong.after.nll < wrong.before.nll
    # all wrong with certainty: probability 0 stays 0 at every T, no case can inform the fit
    hopeless = temperature_scaling(np.array([[1.0, 0.0]] * 6), np.ones(6, dtype=int))
    assert hopeless.temperature == 1.0 and hopeless.after == hopeless.before
    with pytest.raises(ValueError, match="folds"):
        temperature_scaling(np.array([[0.5, 0.5]] * 3), np.zeros(3, dtype=int), folds=1)
