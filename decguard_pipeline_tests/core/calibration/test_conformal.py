"""Split-conformal prediction sets against MAPIE on the same probabilities (LAC end to end; APS
scores and sets at a shared threshold, MAPIE's calibration scores being randomised), and the
coverage guarantee in a seeded simulation over 200 random calibration splits."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin

from decguard_pipeline.core.calibration.conformal import (
    conformalize,
    prediction_sets,
    quantile,
    scores,
)
from decguard_pipeline.core.calibration.split import stratified_split
from decguard_pipeline_tests.support.calibration_data import multiclass_cases

mapie_classification = pytest.importorskip("mapie.classification")
mapie_aps = pytest.importorskip("mapie.conformity_scores")


class FixedModel(ClassifierMixin, BaseEstimator):
    """A prefitted classifier whose probabilities for case i (X = [[i]]) are row i."""

    def __init__(self, probs: np.ndarray | None = None) -> None:
        self.probs = probs

    def fit(self, X, y):
        return self

    def predict_proba(self, X):
        return self.probs[np.asarray(X)[:, 0].astype(int)]

    def predict(self, X):
        return self.predict_proba(X).argmax(axis=1)


def model_and_cases(seed: int, n: int, k: int) -> tuple[FixedModel, np.ndarray, np.ndarray]:
    probs, expected = multiclass_cases(np.random.default_rng(seed), n, k, "over")
    model = FixedModel(probs)
    model.classes_ = np.arange(k)
    model.n_features_in_ = 1
    return model, probs, expected


@pytest.mark.parametrize(("alpha", "seed"), [(0.1, 0), (0.2, 1), (0.05, 2)])
def test_lac_sets_are_mapies(alpha, seed):
    model, probs, expected = model_and_cases(seed, 900, 4)
    cal, test = np.arange(450), np.arange(450, 900)
    x = np.arange(900)[:, None]
    mapie = mapie_classification.SplitConformalClassifier(
        model, confidence_level=1 - alpha, conformity_score="lac", prefit=True
    )
    mapie.conformalize(x[cal], expected[cal])
    _, theirs = mapie.predict_set(x[test])
    q_hat = quantile(scores("lac", probs[cal])[cal, expected[cal]], alpha)
    ours = prediction_sets("lac", probs[test], q_hat)
    np.testing.assert_array_equal(ours, theirs[:, :, 0])


def test_aps_scores_and_sets_are_mapies():
    _, probs, expected = model_and_cases(3, 500, 5)
    score = mapie_aps.APSConformityScore()
    cumulated, _ = score.get_true_label_cumsum_proba(expected, probs, np.arange(5))
    ours = scores("aps", probs)[np.arange(500), expected]
    np.testing.assert_allclose(ours, cumulated[:, 0], rtol=1e-12)
    for q_hat in (0.5, 0.8, 0.93):
        score.quantiles_ = np.array([q_hat])
        theirs = score.get_prediction_sets(
            np.repeat(probs[:, :, None], 1, axis=2),
            cumulated,
            np.array([0.1]),
            "prefit",
            include_last_label=True,
        )
        np.testing.assert_array_equal(prediction_sets("aps", probs, q_hat), theirs[:, :, 0])


def test_aps_takes_tied_labels_together_and_is_never_empty():
    probs = np.array([[0.4, 0.4, 0.2], [1 / 3, 1 / 3, 1 / 3], [0.9, 0.05, 0.05]])
    sets = prediction_sets("aps", probs, 0.3)
    assert sets.tolist() == [[True, True, False], [True, True, True], [True, False, False]]
    # LAC at the same level can leave a case without any label
    assert not prediction_sets("lac", probs, 0.3)[1].any()


def test_too_few_calibration_cases_give_every_label():
    assert quantile(np.array([0.1, 0.2, 0.3]), alpha=0.1) == math.inf  # ceil(4 * 0.9) = 4 > 3
    assert quantile(np.arange(1, 10) / 10, alpha=0.1) == 0.9  # ceil(10 * 0.9) = 9th of 9
    assert prediction_sets("lac", np.array([[0.99, 0.01]]), math.inf).all()


@pytest.mark.parametrize("method", ["lac", "aps"])
@pytest.mark.parametrize("alpha", [0.1, 0.2])
def test_coverage_holds_over_200_random_splits(method, alpha):
    probs, expected = multiclass_cases(np.random.default_rng(11), 400, 4, "over")
    coverages, sizes = [], []
    for seed in range(200):
        mask = stratified_split(expected, 0.5, seed)
        result = conformalize(
            method, alpha, probs[mask], expected[mask], probs[~mask], expected[~mask]
        )
        coverages.append(result.coverage)
        sizes.append(result.mean_set_size)
    mean = float(np.mean(coverages))
    assert mean >= 1 - alpha
    if method == "lac":  # exact up to 1/(n+1) for distinct scores
        assert mean < 1 - alpha + 1 / 201 + 0.01
    # APS without randomisation takes the label that crosses q-hat too: conservative (it
    # covers more than 1 - alpha, as Romano et al. note), but the sets stay informative
    assert 1.0 < np.mean(sizes) < 3.5


def test_conformalize_reports_coverage_and_sizes_of_the_held_out_cases():
    probs = np.array([[0.8, 0.2], [0.6, 0.4], [0.3, 0.7], [0.55, 0.45]])
    expected = np.array([0, 1, 1, 0])
    result = conformalize("lac", 0.34, probs[:2], expected[:2], probs[2:], expected[2:])
    # scores 0.2 and 0.6; rank ceil(3 * 0.66) = 2: q = 0.6, so a label needs p >= 0.4
    assert result.q_hat == 0.6
    assert result.coverage == 1.0 and result.size_counts == (0, 1, 1)
    assert result.singleton_rate == 0.5 and result.mean_set_size == 1.5
