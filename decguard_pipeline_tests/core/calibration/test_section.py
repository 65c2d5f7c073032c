"""The calibration section entry point: one call gives every measure, the same numbers as the
measures called one by one, JSON-ready, deterministic per seed, with every edge handled."""

from __future__ import annotations

import json

import numpy as np
import pytest

from decguard_pipeline.core.calibration.abstention import guaranteed_threshold
from decguard_pipeline.core.calibration.binned import classwise_ece, debiased_ece, top_label_ece
from decguard_pipeline.core.calibration.decomposition import score_decompositions
from decguard_pipeline.core.calibration.recalibration import temperature_scaling
from decguard_pipeline.core.calibration.section import SectionSettings, calibration_section
from decguard_pipeline.core.calibration.smooth_bootstrap import smooth_calibration
from decguard_pipeline.core.golden.metrics import expected_calibration_error, reliability
from decguard_pipeline_tests.support.calibration_data import multiclass_cases


def test_numbers_are_those_of_the_measures():
    rng = np.random.default_rng(1)
    probs, expected = multiclass_cases(rng, 600, 3, "over")
    s = calibration_section(probs, expected, n_bins=8, alpha=0.2, delta=0.05, seed=3)
    confidence = probs.max(axis=1)
    correct = probs.argmax(axis=1) == expected
    assert s.n == 600 and s.labels == 3
    assert s.accuracy == pytest.approx(correct.mean(), abs=1e-15)
    assert s.mean_confidence == pytest.approx(confidence.mean(), abs=1e-15)
    assert s.ece_top_label == top_label_ece(probs, expected, 8)
    assert s.ece_top_label == expected_calibration_error(reliability(confidence, correct, 8))
    assert s.ece_classwise == classwise_ece(probs, expected, 8)
    assert s.ece_l2_debiased == debiased_ece(confidence, correct, 8)
    assert s.smooth == smooth_calibration(confidence, correct, seed=3)
    assert s.decomposition == score_decompositions(probs, expected)
    assert s.recalibration == temperature_scaling(probs, expected, seed=3, n_bins=8)
    assert s.abstention == guaranteed_threshold(confidence, correct, alpha=0.2, delta=0.05)
    assert s.settings == SectionSettings(n_bins=8, alpha=0.2, delta=0.05, seed=3)


def test_headline_is_flat_and_matches_the_parts():
    rng = np.random.default_rng(2)
    s = calibration_section(*multiclass_cases(rng, 300, 4, "under"))
    h = s.headline()
    assert all(v is None or isinstance(v, float) for v in h.values())
    assert h["smece"] == s.smooth.value and h["smece_high"] == s.smooth.high
    assert h["brier_miscalibration"] == s.decomposition["brier"].miscalibration
    assert h["log_loss_top_label_discrimination"] == (
        s.decomposition["log_loss_top_label"].discrimination
    )
    assert h["temperature"] == s.recalibration.temperature
    assert h["nll_after_scaling"] == s.recalibration.after.nll
    assert h["abstention_coverage"] == s.abstention.coverage


@pytest.mark.parametrize(("n", "k"), [(0, 3), (1, 2), (2, 1), (3, 3), (50, 4)])
def test_to_dict_is_plain_json(n, k):
    rng = np.random.default_rng(n)
    probs, expected = multiclass_cases(rng, n, k, "calibrated") if k > 1 else (
        np.ones((n, 1)), np.zeros(n, dtype=int)
    )  # fmt: skip
    d = calibration_section(probs, expected).to_dict()
    text = json.dumps(d, allow_nan=False)
    assert json.loads(text) == d
    assert set(d) >= {"smooth", "decomposition", "recalibration", "abstention", "settings"}
    if n:
        curve = d["smooth"]["curve"]
        assert len(curve["mesh"]) == len(curve["accuracy"]) == len(curve["density"]) == 200


def test_no_cases():
    s = calibration_section(np.zeros((0, 3)), np.zeros(0, dtype=int))
    assert s.n == 0
    assert all(v is None for v in s.headline().values())
    assert s.smooth is None and s.recalibration is None and s.abstention.threshold is None
    assert s.decomposition == {"brier": None, "brier_top_label": None, "log_loss_top_label": None}


def test_deterministic_per_seed():
    rng = np.random.default_rng(4)
    probs, expected = multiclass_cases(rng, 250, 3, "over")
    a = calibration_section(probs, expected, seed=9)
    assert a == calibration_section(probs, expected, seed=9)
    b = calibration_section(probs, expected, seed=10)
    assert a.smooth.value == b.smooth.value and a.smooth.low != b.smooth.low


def test_tells_over_from_under_confidence():
    rng = np.random.default_rng(5)
    over = calibration_section(*multiclass_cases(rng, 2000, 3, "over"), n_bootstrap=0)
    under = calibration_section(*multiclass_cases(rng, 2000, 3, "under"), n_bootstrap=0)
    honest = calibration_section(*multiclass_cases(rng, 2000, 3, "calibrated"), n_bootstrap=0)
    assert over.recalibration.temperature > 1.5 and under.recalibration.temperature < 0.7
    for worse in (over, under):
        assert worse.smooth.value > 3 * honest.smooth.value
        mcb = worse.decomposition["brier"].miscalibration
        assert mcb > 3 * honest.decomposition["brier"].miscalibration
    assert over.smooth.curve.lower is None  # no resamples, no band


def test_catalog_entries_point_at_real_fields():
    from decguard_pipeline.core.metric_catalog import CALIBRATION_SECTION

    rng = np.random.default_rng(6)
    d = calibration_section(*multiclass_cases(rng, 100, 3, "over")).to_dict()
    for info in CALIBRATION_SECTION:
        for where in info.where.split(", "):
            for score in d["decomposition"] if "<score>" in where else [None]:
                node = d
                for key in where.replace("<score>", str(score)).split("."):
                    assert key in node, f"{info.name}: {where}"
                    node = node[key]
