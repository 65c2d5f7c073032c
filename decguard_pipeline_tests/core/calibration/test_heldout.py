"""Before/after on held-out cases: the measures are DecGuard's own functions, and the paired
bootstrap's vectorised resamples equal measuring each resample, drawn the same way, case by
case (the expanded sample)."""

from __future__ import annotations

import numpy as np
import pytest

from decguard_pipeline.core.calibration.heldout import MEASURES, compare, measures
from decguard_pipeline.core.calibration.recalibration import scale
from decguard_pipeline.core.golden.metrics import brier, nll
from decguard_pipeline.core.stats import percentile_interval, resample_counts
from decguard_pipeline_tests.support.calibration_data import multiclass_cases


def test_the_point_measures_are_decguards():
    rng = np.random.default_rng(1)
    probs, expected = multiclass_cases(rng, 300, 3, "over")
    m = measures(probs, expected, 10)
    assert m["brier"] == brier(probs, expected)
    assert m["nll"] == nll(probs[np.arange(300), expected])
    assert m["accuracy"] == np.mean(probs.argmax(axis=1) == expected)


def test_the_paired_bootstrap_is_the_resampled_loop():
    rng = np.random.default_rng(2)
    raw, expected = multiclass_cases(rng, 120, 3, "over")
    raw = np.round(raw, 2)  # ties in confidence: equal-mass bins must keep them together
    raw /= raw.sum(axis=1, keepdims=True)
    calibrated = scale(raw, 2.0)
    result = compare(raw, calibrated, expected, resamples=40, seed=9, n_bins=6)
    # the same draws, each resample measured on its expanded sample by the point functions
    counts = resample_counts(120, 40, np.random.default_rng(9))
    changes: dict[str, list[float]] = {name: [] for name, _, _ in MEASURES}
    for row in counts.astype(int):
        rows = np.repeat(np.arange(120), row)
        b = measures(raw[rows], expected[rows], 6)
        a = measures(calibrated[rows], expected[rows], 6)
        for name in changes:
            changes[name].append(a[name] - b[name])
    for name, values in changes.items():
        low, high = percentile_interval(np.array(values), 0.95)
        # smooth ECE's resamples share the full sample's grid (as its own interval does)
        tolerance = 2e-3 if name == "smece" else 1e-12
        assert result.intervals[name] == pytest.approx((low, high), abs=tolerance), name


def test_rows_say_before_after_and_the_change():
    rng = np.random.default_rng(3)
    raw, expected = multiclass_cases(rng, 400, 3, "over")
    result = compare(raw, scale(raw, 2.0), expected, resamples=100, seed=1)
    rows = {row["measure"]: row for row in result.rows()}
    assert rows["ece"]["after"] < rows["ece"]["before"]
    assert rows["ece"]["high"] < 0  # the improvement is beyond noise on 400 cases
    assert rows["nll"]["change"] == rows["nll"]["after"] - rows["nll"]["before"]
    assert rows["accuracy"]["change"] == 0.0  # temperature never changes the selected label
    assert rows["accuracy"]["low"] == rows["accuracy"]["high"] == 0.0


def test_identical_sides_and_small_samples():
    probs = np.array([[0.7, 0.3], [0.2, 0.8]])
    same = compare(probs, probs, np.array([0, 0]), resamples=20)
    assert all(v == (0.0, 0.0) for v in same.intervals.values())
    one = compare(probs[:1], probs[:1], np.array([0]), resamples=20)
    assert one.intervals == {} and one.after["accuracy"] == 1.0
    none = compare(np.zeros((0, 2)), np.zeros((0, 2)), np.zeros(0, dtype=int))
    assert none.before["ece"] is None
