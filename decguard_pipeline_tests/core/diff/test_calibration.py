"""A diff says whether the candidate got less honest or less able to tell cases apart: on
generated pairs of model versions of known kind (an over-confident model recalibrated, a
calibrated one degraded by noise, one sharpened) the CORP split of the Brier change points at
the right component, and every number is the decomposition recomputed directly."""

from __future__ import annotations

import numpy as np
import pytest

from decguard_pipeline.core.calibration.decomposition import (
    classwise_brier_decomposition,
    score_decompositions,
)
from decguard_pipeline.core.contract.calibration_measures import CalibrationMeasures
from decguard_pipeline.core.diff.calibration import (
    DISCRIMINATION,
    HONESTY,
    calibration_shift,
    render_calibration_shift,
)
from decguard_pipeline.core.diff.pairs import match_by_id
from decguard_pipeline_tests.support.calibration_data import multiclass_cases, sharpen
from decguard_pipeline_tests.support.golden_results import make_results

MEASURES = CalibrationMeasures(bootstrap_resamples=100, seed=2)


def _versions(seed: int, n: int = 400) -> dict[str, np.ndarray]:
    """Probabilities of one set of cases from several model versions, and the labels."""
    rng = np.random.default_rng(seed)
    truth, expected = multiclass_cases(rng, n, 3, "calibrated")
    noise = rng.dirichlet(np.ones(3), n)
    return {
        "expected": expected,
        "calibrated": truth,
        "over": sharpen(truth, 0.4),
        "degraded": 0.4 * truth + 0.6 * noise,
    }


def _shift(base: np.ndarray, cand: np.ndarray, expected: np.ndarray, **kw):
    labels = [int(e) for e in expected]
    pairs = match_by_id(make_results(base, labels, **kw), make_results(cand, labels, **kw))
    return calibration_shift(pairs.base, pairs.cand, MEASURES)


@pytest.mark.parametrize("seed", range(5))
def test_recalibrated_version_is_more_honest_and_as_discriminating(seed):
    v = _versions(seed)
    s = _shift(v["over"], v["calibrated"], v["expected"])
    assert s["verdict"] == {"honesty": HONESTY[1], "discrimination": DISCRIMINATION[2]}
    d = s["decomposition"]["brier"]["delta"]
    assert d["miscalibration"] < 0 and s["intervals"]["miscalibration"]["high"] < 0


@pytest.mark.parametrize("seed", range(5))
def test_degraded_version_is_less_able_to_tell_cases_apart(seed):
    v = _versions(seed)
    s = _shift(v["calibrated"], v["degraded"], v["expected"])
    assert s["verdict"]["discrimination"] == DISCRIMINATION[0]
    assert s["intervals"]["discrimination"]["high"] < 0


@pytest.mark.parametrize("seed", range(5))
def test_sharpened_version_is_less_honest(seed):
    v = _versions(seed)
    s = _shift(v["calibrated"], v["over"], v["expected"])
    assert s["verdict"]["honesty"] == HONESTY[0]


def test_binary_sharpening_leaves_discrimination_exactly_unchanged():
    """For two labels a temperature is an increasing relabelling of each label's forecast, so
    the discrimination of every one-vs-rest part is the same, bit for bit."""
    rng = np.random.default_rng(7)
    truth, expected = multiclass_cases(rng, 300, 2, "calibrated")
    s = _shift(truth, sharpen(truth, 0.5), expected)
    brier = s["decomposition"]["brier"]
    assert brier["baseline"]["discrimination"] == pytest.approx(
        brier["candidate"]["discrimination"], abs=1e-12
    )
    assert s["verdict"]["discrimination"] == DISCRIMINATION[2]


def test_numbers_are_the_decomposition_of_the_cases_both_runs_decided():
    v = _versions(11, n=200)
    errored_base = np.zeros(200, dtype=bool)
    errored_base[::9] = True
    labels = [None if i % 13 == 0 else int(e) for i, e in enumerate(v["expected"])]
    base = make_results(v["over"], labels, errored=errored_base)
    cand = make_results(v["degraded"], labels)
    pairs = match_by_id(base, cand)
    s = calibration_shift(pairs.base, pairs.cand, MEASURES)
    keep = [i for i in range(200) if not errored_base[i] and labels[i] is not None]
    expected = np.array([labels[i] for i in keep])
    assert s["n"] == len(keep)
    for side, probs in (("baseline", v["over"]), ("candidate", v["degraded"])):
        direct = score_decompositions(probs[keep], expected)
        for name, d in direct.items():
            assert s["decomposition"][name][side] == {
                p: getattr(d, p)
                for p in ("score", "miscalibration", "discrimination", "uncertainty")
            }
    brier = s["decomposition"]["brier"]
    # the uncertainty is the labels' alone: the Brier change is exactly MCB - DSC changes
    assert brier["delta"]["uncertainty"] == 0.0
    assert brier["delta"]["score"] == pytest.approx(
        brier["delta"]["miscalibration"] - brier["delta"]["discrimination"], abs=1e-12
    )
    # the intervals: percentiles of the changes over paired resamples of the cases (both runs
    # resampled with the same rows), drawn from the seed
    rng = np.random.default_rng(MEASURES.seed)
    changes = []
    for _ in range(MEASURES.bootstrap_resamples):
        rows = rng.integers(0, len(keep), len(keep))
        b = classwise_brier_decomposition(v["over"][keep][rows], expected[rows])
        c = classwise_brier_decomposition(v["degraded"][keep][rows], expected[rows])
        changes.append((c.miscalibration - b.miscalibration, c.discrimination - b.discrimination))
    tail = (1 - MEASURES.confidence) / 2
    bounds = np.quantile(np.array(changes), [tail, 1 - tail], axis=0)
    for j, part in enumerate(("miscalibration", "discrimination")):
        got = s["intervals"][part]
        assert (got["low"], got["high"]) == (bounds[0, j], bounds[1, j])
    assert s == calibration_shift(pairs.base, pairs.cand, MEASURES)  # same seed, same numbers


def test_without_resamples_the_verdict_reads_the_sign():
    v = _versions(3)
    labels = [int(e) for e in v["expected"]]
    pairs = match_by_id(make_results(v["calibrated"], labels), make_results(v["over"], labels))
    s = calibration_shift(pairs.base, pairs.cand, CalibrationMeasures(bootstrap_resamples=0))
    assert s["intervals"] == {"miscalibration": None, "discrimination": None}
    assert s["verdict"]["honesty"] == HONESTY[0]
    assert "paired bootstrap" not in render_calibration_shift(s)


def test_identical_runs_and_no_common_case():
    v = _versions(4, n=50)
    same = _shift(v["calibrated"], v["calibrated"], v["expected"])
    assert same["verdict"] == {"honesty": HONESTY[2], "discrimination": DISCRIMINATION[2]}
    nothing = _shift(v["calibrated"], v["over"], np.zeros(50, dtype=int), errored=np.ones(50))
    assert nothing["n"] == 0 and nothing["decomposition"]["brier"]["delta"] is None
    assert render_calibration_shift(nothing).endswith("nothing to compare")


def test_text_names_the_verdict_and_the_numbers():
    v = _versions(5)
    s = _shift(v["over"], v["calibrated"], v["expected"])
    text = render_calibration_shift(s)
    d = s["decomposition"]["brier"]
    assert f"{d['baseline']['miscalibration']:.4f} → {d['candidate']['miscalibration']:.4f}" in text
    assert "Verdict      more honest (miscalibration); no clear change (discrimination)" in text
