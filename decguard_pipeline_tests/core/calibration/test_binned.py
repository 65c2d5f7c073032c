"""Class-wise ECE, top-label ECE and the debiased ℓ2 ECE against the ``uncertainty-calibration``
package (Kumar et al.'s own code) and against DecGuard's binning, on data of known calibration."""

from __future__ import annotations

import calibration as kumar  # the uncertainty-calibration package (Kumar et al.)
import numpy as np
import pytest

from decguard_pipeline.core.calibration.binned import (
    classwise_ece,
    debiased_ece,
    l2_ece,
    per_label_ece,
    top_label_ece,
)
from decguard_pipeline.core.calibration.summary import equal_mass_edges
from decguard_pipeline.core.golden.metrics import expected_calibration_error, reliability
from decguard_pipeline_tests.support.calibration_data import binary_cases, multiclass_cases


def our_equal_mass_scheme(probs, num_bins):
    """Our equal-mass bins as the package's boundary list (midpoints between bins, then 1)."""
    ranked = np.sort(np.asarray(probs))
    inner = equal_mass_edges(ranked, num_bins)[1:-1]
    return [(ranked[i - 1] + ranked[i]) / 2 for i in inner] + [1.0]


@pytest.mark.parametrize("kind", ["calibrated", "over", "under", "label_shift"])
@pytest.mark.parametrize("k", [2, 3, 5])
def test_classwise_and_top_label_ece_agree_with_the_package(kind, k):
    rng = np.random.default_rng(k)
    probs, expected = multiclass_cases(rng, 700, k, kind)
    want = kumar.get_ece(probs, expected, num_bins=10, mode="marginal")
    assert classwise_ece(probs, expected, 10) == pytest.approx(want, abs=1e-12)
    want_top = kumar.get_ece(probs, expected, num_bins=15, mode="top-label")
    assert top_label_ece(probs, expected, 15) == pytest.approx(want_top, abs=1e-12)


def test_per_label_ece_uses_decguards_bins_at_the_edges():
    # probabilities exactly on bin edges, 0 and 1: each label's one-vs-rest ECE must equal
    # DecGuard's ECE computed with its own reliability bins
    probs = np.array(
        [[0.3, 0.7, 0.0], [0.1, 0.2, 0.7], [1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.0, 0.6, 0.4]]
    )
    expected = np.array([1, 2, 0, 0, 2])
    got = per_label_ece(probs, expected, 10)
    for j in range(3):
        rows = reliability(probs[:, j], expected == j, 10)
        assert got[j] == pytest.approx(expected_calibration_error(rows), abs=1e-15)
    assert classwise_ece(probs, expected, 10) == pytest.approx(got.mean(), abs=1e-15)


def test_top_label_ece_is_decguards_ece():
    rng = np.random.default_rng(4)
    probs, expected = multiclass_cases(rng, 300, 4, "over")
    confidence = probs.max(axis=1)
    correct = probs.argmax(axis=1) == expected
    assert top_label_ece(probs, expected, 10) == expected_calibration_error(
        reliability(confidence, correct, 10)
    )


def test_label_shift_shows_in_classwise_ece():
    # the model reports q, labels come from a prior with class 0 three times as frequent:
    # label 0 is under-forecast, the others over-forecast
    rng = np.random.default_rng(9)
    calibrated = classwise_ece(*multiclass_cases(rng, 20_000, 3, "calibrated"))
    probs, expected = multiclass_cases(rng, 20_000, 3, "label_shift")
    assert classwise_ece(probs, expected) > 5 * calibrated
    per_label = per_label_ece(probs, expected)
    assert per_label[0] == per_label.max()


@pytest.mark.parametrize("n", [2, 3, 17, 100, 1000])
@pytest.mark.parametrize("kind", ["calibrated", "over"])
def test_l2_ece_agrees_with_the_package(n, kind):
    rng = np.random.default_rng(n)
    c, right = binary_cases(rng, n, kind, low=0.4)
    if n == 17:
        c = np.round(c, 1)  # ties: tied confidences share a bin
    labels = right.astype(int)
    for debias in (True, False):
        want = kumar.lower_bound_scaling_ce(
            c, labels, p=2, debias=debias, num_bins=10, binning_scheme=our_equal_mass_scheme,
            mode="top-label",
        )  # fmt: skip
        assert l2_ece(c, right, 10, debias=debias) == pytest.approx(want, abs=1e-12)


def test_l2_ece_with_the_packages_default_bins_when_they_coincide():
    # distinct confidences, n a multiple of the bin count: both binnings are the same
    rng = np.random.default_rng(1)
    c, right = binary_cases(rng, 1000, "over")
    want = kumar.lower_bound_scaling_ce(c, right.astype(int), p=2, debias=True, num_bins=10)
    assert debiased_ece(c, right, 10) == pytest.approx(want, abs=1e-12)


def test_debiasing_removes_most_of_the_small_sample_bias():
    # perfectly calibrated sets of 60 cases: the true ℓ2 ECE is 0
    rng = np.random.default_rng(12)
    plug, debiased = [], []
    for _ in range(300):
        c, right = binary_cases(rng, 60, "calibrated")
        plug.append(l2_ece(c, right, 5, debias=False))
        debiased.append(l2_ece(c, right, 5))
    assert np.mean(debiased) < 0.5 * np.mean(plug)
    # a miscalibrated model: the debiased estimate is near the true ℓ2 gap
    c, right = binary_cases(rng, 200_000, "over")
    truth = float(np.sqrt(np.mean((c - c**2) ** 2)))
    estimates = [l2_ece(*binary_cases(rng, 200, "over"), 5) for _ in range(200)]
    assert np.mean(estimates) == pytest.approx(truth, abs=0.015)


def test_edge_cases():
    empty = (np.zeros((0, 3)), np.zeros(0, dtype=int))
    assert classwise_ece(*empty) is None and top_label_ece(*empty) is None
    assert per_label_ece(*empty).shape == (0,)
    assert l2_ece(np.zeros(0), np.zeros(0)) is None
    assert l2_ece(np.array([0.7]), np.array([1])) is None  # one case: nothing to debias with
    # one label: certain and right
    assert classwise_ece(np.ones((4, 1)), np.zeros(4, dtype=int)) == 0.0
    # all right with certainty; all wrong with certainty
    certain = np.array([[1.0, 0.0], [0.0, 1.0]])
    assert classwise_ece(certain, np.array([0, 1])) == 0.0
    assert classwise_ece(certain, np.array([1, 0])) == 1.0
    assert top_label_ece(certain, np.array([1, 0])) == 1.0
    with pytest.raises(ValueError, match="label indices"):
        classwise_ece(certain, np.array([0, 2]))
    with pytest.raises(ValueError, match="matrix"):
        classwise_ece(np.array([0.5, 0.5]), np.array([0]))
