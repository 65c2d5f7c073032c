"""CORP decomposition: PAV against scikit-learn's IsotonicRegression, the decomposition against
the ``model-diagnostics`` package's ``decompose``, and its meaning on generated models."""

from __future__ import annotations

import numpy as np
import pytest
from model_diagnostics import scoring
from sklearn.isotonic import IsotonicRegression

from decguard_pipeline.core.calibration.decomposition import (
    classwise_brier_decomposition,
    corp_decomposition,
    isotonic_fit,
    score_decompositions,
)
from decguard_pipeline.core.golden.metrics import brier
from decguard_pipeline_tests.support.calibration_data import binary_cases, multiclass_cases


def pav_inputs():
    rng = np.random.default_rng(17)
    for n in (1, 2, 10, 1000, 30_000):
        x = np.round(rng.uniform(size=n), 2)  # many ties
        yield f"ties-{n}", x, (rng.uniform(size=n) < x**2).astype(float), None
    x = rng.uniform(size=500)
    yield "continuous-y-weights", x, rng.normal(size=500), rng.integers(1, 5, 500).astype(float)
    # a convex stretch then a long run of zeros: the slowest pattern for hull peeling
    n = 20_000
    y = np.zeros(n)
    y[(np.sqrt(np.arange(n // 2)) * np.sqrt(n / 2)).astype(int)] = 1.0
    y[int(0.8 * n) :] = 0.0
    yield "convex-then-flat", np.linspace(0, 1, n), y, None
    yield "decreasing", np.arange(50.0), np.arange(50.0)[::-1], None


@pytest.mark.parametrize(("name", "x", "y", "w"), list(pav_inputs()), ids=lambda v: v)
def test_pav_agrees_with_scikit_learn(name, x, y, w):
    want = IsotonicRegression().fit(x, y, sample_weight=w).predict(x)
    np.testing.assert_allclose(isotonic_fit(x, y, w), want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("kind", ["calibrated", "over", "under"])
@pytest.mark.parametrize("n", [2, 9, 500, 20_000])
def test_decomposition_agrees_with_model_diagnostics(kind, n):
    rng = np.random.default_rng(n)
    c, right = binary_cases(rng, n, kind)
    c = np.round(c, 3)
    y = right.astype(float)
    for score, function in (("brier", scoring.SquaredError()), ("log", scoring.LogLoss())):
        want = scoring.decompose(y, c, scoring_function=function).row(0, named=True)
        got = corp_decomposition(c, right, score)
        assert got.score == pytest.approx(want["score"], abs=1e-12)
        assert got.miscalibration == pytest.approx(want["miscalibration"], abs=1e-12)
        assert got.discrimination == pytest.approx(want["discrimination"], abs=1e-12)
        assert got.uncertainty == pytest.approx(want["uncertainty"], abs=1e-12)


def test_log_loss_floors_certain_misses_like_decguard():
    f = np.array([1.0, 0.0, 0.9, 0.2])
    y = np.array([0, 1, 1, 0])
    got = corp_decomposition(f, y, "log")
    # a certain miss costs -ln(1e-15), DecGuard's NLL floor, instead of infinity
    floor = -np.log(1e-15)
    assert got.score == pytest.approx((2 * floor - np.log(0.9) - np.log(0.8)) / 4, rel=1e-15)
    # forecasts inside (0, 1) need no floor: the package gives the same split
    inner = np.clip(f, 1e-9, 1 - 1e-9)
    want = scoring.decompose(y.astype(float), inner, scoring_function=scoring.LogLoss())
    again = corp_decomposition(inner, y, "log")
    assert again.score == pytest.approx(want["score"][0], rel=1e-12)
    assert again.miscalibration == pytest.approx(want["miscalibration"][0], rel=1e-12)
    assert again.discrimination == pytest.approx(want["discrimination"][0], abs=1e-12)


@pytest.mark.parametrize("kind", ["calibrated", "over", "under", "label_shift"])
def test_classwise_brier_decomposes_decguards_brier(kind):
    rng = np.random.default_rng(6)
    probs, expected = multiclass_cases(rng, 3000, 4, kind)
    d = classwise_brier_decomposition(probs, expected)
    assert d.score == pytest.approx(brier(probs, expected), abs=1e-12)
    assert d.score == pytest.approx(d.miscalibration - d.discrimination + d.uncertainty, abs=1e-12)
    assert d.miscalibration >= 0 and d.discrimination >= 0


def test_miscalibration_and_discrimination_move_independently():
    rng = np.random.default_rng(2)
    c, right = binary_cases(rng, 5000, "calibrated", low=0.0)
    honest = corp_decomposition(c, right)
    # the same ranking, made over-confident: discrimination is exactly unchanged (isotonic
    # recalibration ignores any increasing relabelling), miscalibration grows
    squashed = corp_decomposition(np.sqrt(c), right)
    assert squashed.discrimination == pytest.approx(honest.discrimination, abs=1e-15)
    assert squashed.uncertainty == honest.uncertainty
    assert squashed.miscalibration > honest.miscalibration + 0.02
    # a model that cannot tell cases apart as well: noisier forecasts, still calibrated-ish
    blurred = np.clip(c + rng.normal(0, 0.25, c.size), 0, 1)
    worse = corp_decomposition(blurred, right)
    assert worse.discrimination < honest.discrimination - 0.02
    assert honest.miscalibration < 0.005  # PAV overfits a little: MCB of a calibrated model


def test_score_decompositions_names_what_is_decomposed():
    rng = np.random.default_rng(3)
    probs, expected = multiclass_cases(rng, 400, 3, "over")
    parts = score_decompositions(probs, expected)
    assert set(parts) == {"brier", "brier_top_label", "log_loss_top_label"}
    confidence = probs.max(axis=1)
    correct = probs.argmax(axis=1) == expected
    assert parts["brier_top_label"] == corp_decomposition(confidence, correct, "brier")
    assert parts["log_loss_top_label"] == corp_decomposition(confidence, correct, "log")


def test_edge_cases():
    assert corp_decomposition(np.zeros(0), np.zeros(0)) is None
    assert classwise_brier_decomposition(np.zeros((0, 2)), np.zeros(0, dtype=int)) is None
    # one case: the recalibrated forecast is the outcome, all of the score is miscalibration
    one = corp_decomposition(np.array([0.8]), np.array([0]))
    assert one.score == pytest.approx(0.64) and one.miscalibration == pytest.approx(0.64)
    assert one.discrimination == 0 and one.uncertainty == 0
    # all right: nothing uncertain, nothing to discriminate
    allright = corp_decomposition(np.array([0.6, 0.9, 0.7]), np.ones(3))
    assert allright.uncertainty == 0 and allright.discrimination == 0
    assert allright.miscalibration == pytest.approx(allright.score)
    # perfect and certain: everything 0
    perfect = corp_decomposition(np.array([0.0, 1.0, 1.0]), np.array([0, 1, 1]), "log")
    assert perfect.score == 0 and perfect.miscalibration == 0
    # one label
    single = classwise_brier_decomposition(np.ones((3, 1)), np.zeros(3, dtype=int))
    assert single.score == 0 and single.miscalibration == 0
    with pytest.raises(ValueError, match="score"):
        corp_decomposition(np.array([0.5]), np.array([1]), "spherical")
    with pytest.raises(ValueError, match="positive"):
        isotonic_fit(np.array([0.1, 0.2]), np.array([0.0, 1.0]), np.array([1.0, 0.0]))
