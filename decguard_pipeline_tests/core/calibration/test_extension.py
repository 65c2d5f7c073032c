"""The calibration measures as a contract extension: when they are on, what the sidecar section
holds (the library's numbers on the labeled, decided cases, recomputed here from the raw
columns), how the gates decide, and that a calibration gate never switches the guard on."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from decguard_pipeline.core.calibration.abstention import guaranteed_threshold
from decguard_pipeline.core.calibration.extension import (
    calibration_extension,
    measures_settings,
)
from decguard_pipeline.core.calibration.render import render_calibration
from decguard_pipeline.core.calibration.section import calibration_section
from decguard_pipeline.core.contract import parse_contract
from decguard_pipeline.core.errors import ContractError
from decguard_pipeline.core.formatting import num
from decguard_pipeline.core.guard.extension import guard_config, guard_enabled
from decguard_pipeline_tests.support.calibration_data import multiclass_cases
from decguard_pipeline_tests.support.golden_results import make_results

BASE = {
    "schema_version": "0.1",
    "decision": {"name": "pick", "type": "choice", "options": ["a", "b", "c"]},
    "backend": {"provider": "mock"},
}


def contract(pipeline=None, **top):
    data = {**BASE, **top}
    if pipeline is not None:
        data["pipeline"] = pipeline
    return parse_contract(data)


def generated(seed=0, n=300, kind="over"):
    """Results of ``n`` cases with some errored and some unlabeled ones, plus the raw
    labeled, decided rows picked out here by a plain loop (the independent recomputation)."""
    rng = np.random.default_rng(seed)
    probs, expected = multiclass_cases(rng, n, 3, kind)
    errored = rng.uniform(size=n) < 0.1
    labels = [None if rng.uniform() < 0.1 else int(e) for e in expected]
    results = make_results(probs, labels, errored=errored)
    keep = [i for i in range(n) if not errored[i] and labels[i] is not None]
    return results, probs[keep], np.array([labels[i] for i in keep], dtype=np.int64)


# -- when the measures are on ---------------------------------------------------------------


def test_off_without_the_section_or_a_calibration_gate():
    assert measures_settings(contract()) is None
    assert measures_settings(contract({"guard": {}})) is None
    assert measures_settings(contract({"requirements": {"min_auroc": 0.5}})) is None
    results, _, _ = generated()
    assert calibration_extension(results, contract({"statistics": {}})) is None


def test_a_calibration_gate_turns_the_measures_on_with_defaults():
    c = contract({"warnings": {"max_smece": 0.1}})
    assert measures_settings(c).model_dump() == {
        "bins": None, "alpha": 0.1, "delta": 0.1, "folds": 5, "bootstrap_resamples": 200,
        "confidence": 0.95, "seed": 0,
    }  # fmt: skip


def test_calibration_gates_do_not_switch_the_guard_on():
    """Both features read pipeline.requirements; each checks only the gates it owns."""
    c = contract({"requirements": {"max_smece": 0.1, "max_selective_risk": 0.2}})
    assert not guard_enabled(c)
    both = contract({"requirements": {"max_smece": 0.1, "min_auroc": 0.5}})
    assert guard_enabled(both)
    config = guard_config(both)
    assert config.requirements.configured() == {"min_auroc": 0.5}


@pytest.mark.parametrize(
    ("pipeline", "field"),
    [
        ({"calibration_measures": {"delta": 0.5}}, "pipeline.calibration_measures.delta"),
        ({"calibration_measures": {"alpha": 0}}, "pipeline.calibration_measures.alpha"),
        ({"calibration_measures": {"folds": 1}}, "pipeline.calibration_measures.folds"),
        ({"calibration_measures": {"bins": 0}}, "pipeline.calibration_measures.bins"),
        ({"calibration_measures": {"bootstraps": 9}}, "pipeline.calibration_measures.bootstraps"),
        ({"requirements": {"max_selective_risk": 1}}, "pipeline.requirements.max_selective_risk"),
        ({"warnings": {"max_smece": 1.5}}, "pipeline.warnings.max_smece"),
        ({"warnings": {"max_miscalibration": 2.5}}, "pipeline.warnings.max_miscalibration"),
    ],
)
def test_bad_settings_are_contract_errors_naming_the_field(pipeline, field):
    with pytest.raises(ContractError) as raised:
        contract(pipeline)
    assert field in str(raised.value)


# -- the section ----------------------------------------------------------------------------


def test_section_is_the_library_on_the_labeled_decided_cases():
    results, probs, expected = generated(seed=4)
    settings = {"bins": 7, "alpha": 0.2, "delta": 0.05, "folds": 4, "bootstrap_resamples": 50,
                "confidence": 0.9, "seed": 11}  # fmt: skip
    section = calibration_extension(results, contract({"calibration_measures": settings}))
    independent = calibration_section(
        probs, expected, n_bins=7, alpha=0.2, delta=0.05, folds=4, n_bootstrap=50, level=0.9,
        seed=11,
    )  # fmt: skip
    measured = independent.to_dict()
    del measured["settings"]
    assert {k: section[k] for k in measured} == measured
    assert section["settings"] == settings
    assert section["headline"] == independent.headline()
    assert section["n"] == len(expected) < len(results)
    assert section["checks"] == [] and section["status"] == "pass"
    # JSON-ready, and unchanged by a round trip (what the sidecar stores)
    assert json.loads(json.dumps(section)) == section


def test_bins_default_to_the_contract_evaluation():
    results, probs, expected = generated(seed=5)
    c = contract({"calibration_measures": {"bootstrap_resamples": 0}},
                 evaluation={"calibration_bins": 4})  # fmt: skip
    section = calibration_extension(results, c)
    assert section["settings"]["bins"] == 4
    independent = calibration_section(probs, expected, n_bins=4, n_bootstrap=0)
    assert section["ece_classwise"] == independent.ece_classwise
    assert section["smooth"]["low"] is None  # no resamples, no interval


def test_no_labeled_case_gives_nulls_and_failing_gates():
    results = make_results(np.array([[0.5, 0.3, 0.2]] * 3), [None, None, None])
    c = contract({"requirements": {"max_smece": 0.5, "max_selective_risk": 0.3}})
    section = calibration_extension(results, c)
    assert section["n"] == 0 and section["smooth"] is None
    assert all(v is None for v in section["headline"].values())
    assert [ch["status"] for ch in section["checks"]] == ["fail", "fail"]
    assert section["checks"][0]["message"] == (
        "smece could not be computed (no labeled, decided cases)"
    )
    assert "n/a" in render_calibration(section)


# -- gates ----------------------------------------------------------------------------------


def test_gates_hold_inclusively_and_levels_decide_fail_or_warn():
    results, probs, expected = generated(seed=6, kind="over")
    base = calibration_section(probs, expected, n_bootstrap=20).headline()
    smece, classwise, mcb = base["smece"], base["ece_classwise"], base["brier_miscalibration"]
    c = contract(
        {
            "calibration_measures": {"bootstrap_resamples": 20},
            "requirements": {"max_smece": smece, "max_miscalibration": mcb / 2},
            "warnings": {"max_classwise_ece": classwise * 0.99},
        }
    )
    checks = calibration_extension(results, c)["checks"]
    assert [(ch["gate"], ch["level"], ch["status"]) for ch in checks] == [
        ("max_smece", "requirement", "pass"),  # equal holds
        ("max_miscalibration", "requirement", "fail"),
        ("max_classwise_ece", "warning", "warn"),
    ]
    assert [ch["value"] for ch in checks] == [smece, mcb, classwise]
    assert checks[1]["metric"] == "brier_miscalibration"
    assert checks[1]["message"].startswith(f"brier_miscalibration {mcb:.4g} violates <= ")
    assert calibration_extension(results, c)["status"] == "fail"


def test_selective_risk_gate_certifies_its_own_target():
    """The gate's target, not the section's alpha, is what the threshold must certify, at the
    section's delta; no threshold fails with the reason."""
    # 500 sure and right, 500 at 0.6 and right 60 % of the time
    probs = np.array([[0.99, 0.005, 0.005]] * 500 + [[0.6, 0.3, 0.1]] * 500)
    expected = np.array([0] * 500 + [0, 0, 0, 1, 1] * 100)
    results = make_results(probs, [int(e) for e in expected])
    c = contract(
        {
            "calibration_measures": {"alpha": 0.3, "delta": 0.05, "bootstrap_resamples": 0},
            "requirements": {"max_selective_risk": 0.1},
            "warnings": {"max_selective_risk": 0.001},
        }
    )
    section = calibration_extension(results, c)
    ok, impossible = section["checks"]
    confidence = probs.max(axis=1)
    correct = probs.argmax(axis=1) == expected
    found = guaranteed_threshold(confidence, correct, alpha=0.1, delta=0.05)
    assert (found.threshold, found.coverage, found.selective_risk) == (0.601, 0.5, 0.0)
    assert section["abstention"]["alpha"] == 0.3  # the section's own, reported as set
    assert (ok["status"], ok["value"], ok["threshold"]) == ("pass", found.selective_risk, 0.1)
    assert f"at confidence >= {found.threshold:g}" in ok["message"]
    assert "with probability >= 0.95" in ok["message"]
    assert impossible["status"] == "warn" and impossible["value"] is None
    assert impossible["message"] == (
        "selective_risk: no confidence threshold keeps it <= 0.001 with probability >= 0.95 "
        "(1000 labeled, decided cases)"
    )


def test_selective_risk_value_is_below_the_target_whenever_certified():
    """delta < 1/2 keeps the observed risk under the target when a threshold is certified, so
    the check's value and its status never disagree."""
    rng = np.random.default_rng(9)
    for _ in range(200):
        n = int(rng.integers(20, 400))
        confidence = rng.uniform(0.3, 1, n)
        correct = rng.uniform(size=n) < confidence
        alpha = float(rng.uniform(0.02, 0.5))
        delta = float(rng.uniform(0.01, 0.49))
        found = guaranteed_threshold(confidence, correct, alpha=alpha, delta=delta)
        if found.threshold is not None:
            assert found.selective_risk < alpha


def test_text_block_shows_the_measured_numbers():
    results, probs, expected = generated(seed=10)
    c = contract({"calibration_measures": {"bootstrap_resamples": 30},
                  "requirements": {"max_smece": 0.9}})  # fmt: skip
    section = calibration_extension(results, c)
    text = render_calibration(section)
    independent = calibration_section(probs, expected, n_bootstrap=30)
    brier = independent.decomposition["brier"]
    assert text.splitlines()[0].endswith(" · PASS")
    assert f"smooth ECE         {num(independent.smooth.value)}" in text
    assert f"[{num(independent.smooth.low)}, {num(independent.smooth.high)}]" in text
    assert f"class-wise {num(independent.ece_classwise)}" in text
    assert (
        f"Brier              {num(brier.score)} = miscalibration {num(brier.miscalibration)}"
        in text
    )
    assert f"{independent.recalibration.temperature:.3g} (over-confident, on log p)" in text
    assert "PASS  max_smece" in text
    assert math.isfinite(independent.smooth.value)
