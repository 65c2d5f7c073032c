"""Applying a calibrator file: the logits it reads (the backend's log-probabilities or
``log p``), its refusals (another target, answers without the logits it was fitted on, a
tampered file), the conformal route, the way back to the raw answer; and the SDK deciding on
calibrated probabilities."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import special

from decguard_pipeline.core.calibration.applying import (
    CONFORMAL_ROUTE,
    calibrate_result,
    conformal_route,
)
from decguard_pipeline.core.calibration.artifact import load_calibrator
from decguard_pipeline.core.calibration.logits import BACKEND, LOG_P, results_logits
from decguard_pipeline.core.calibration.notes import raw_answer
from decguard_pipeline.core.errors import CalibratorError

LABELS = ("low", "mid", "high")


def document(**changes: Any) -> dict[str, Any]:
    base = {
        "calibrator_version": "0.1",
        "contract": {"name": "grade", "labels": list(LABELS)},
        "target": "default@v1",
        "backend": {"name": "default", "provider": "mock", "model": "m", "model_version": "v1"},
        "method": "temperature",
        "parameters": {"temperature": 2.0},
        "logits": LOG_P,
    }
    return {**base, **changes}


def write(tmp_path: Path, **changes: Any) -> Path:
    path = tmp_path / "cal.json"
    path.write_text(json.dumps(document(**changes)))
    return path


def result(probs: list[float], **changes: Any) -> dict[str, Any]:
    best = int(np.argmax(probs))
    return {
        "case_id": "c", "decision": "grade", "decision_type": "choice", "labels": list(LABELS),
        "probabilities": dict(zip(LABELS, probs, strict=True)), "selected": LABELS[best],
        "confidence": probs[best], "backend": "default", "provider": "mock", "model": "m",
        "model_version": "v1", "latency_ms": 1.0, "metadata": {}, **changes,
    }  # fmt: skip


def test_logits_are_the_backends_when_every_answer_has_them():
    probs = np.array([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
    given = [{"logprobs": [-0.1, -1.3, None]}, {"logprobs": [-2.0, -2.0, -0.2]}]
    logits, source = results_logits(probs, given, LABELS)
    assert source == BACKEND
    assert logits[0].tolist() == [-0.1, -1.3, -math.inf]
    # in another presented order, mapped back to the contract's
    shown = [("high", "low", "mid"), LABELS]
    logits, _ = results_logits(probs, given, LABELS, shown=shown)
    assert logits[0].tolist() == [-1.3, -math.inf, -0.1]
    # one answer without them: log p for all
    logits, source = results_logits(probs, [given[0], {}], LABELS)
    assert source == LOG_P and logits[1].tolist() == np.log(probs[1]).tolist()
    # not numbers, the wrong length, +inf: not log-probabilities
    for bad in ([0.1, "x", 0.2], [0.1, 0.2], [0.0, math.inf, 0.0], [None, None, None]):
        assert results_logits(probs[:1], [{"logprobs": bad}], LABELS)[1] == LOG_P


def test_temperature_on_the_backends_logprobs(tmp_path):
    calibrator = load_calibrator(write(tmp_path, logits=BACKEND))
    logprobs = [-0.05, -3.5, -80.0]  # the last one's probability rounds to 0 in a report
    raw = special.softmax(np.array(logprobs)).round(6).tolist()
    made = calibrate_result(result(raw, metadata={"logprobs": logprobs}), calibrator)
    expected = special.softmax(np.array(logprobs) / 2.0)
    got = [made["probabilities"][label] for label in LABELS]
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    assert got[2] > 0  # from the logprob, not from the rounded probability 0
    with pytest.raises(CalibratorError, match="fitted on the backend's log-probabilities"):
        calibrate_result(result(raw), calibrator)


def test_refusals_name_the_file_and_what_differs(tmp_path):
    calibrator = load_calibrator(write(tmp_path))
    ok = result([0.6, 0.3, 0.1])
    assert calibrate_result(ok, calibrator)["metadata"]["calibration"]["target"] == "default@v1"
    with pytest.raises(CalibratorError, match=r"cannot calibrate model version v2"):
        calibrate_result({**ok, "model_version": "v2"}, calibrator)
    with pytest.raises(CalibratorError, match=r"cannot calibrate backend 'other'"):
        calibrate_result({**ok, "backend": "other"}, calibrator)
    with pytest.raises(CalibratorError, match="fitted on labels"):
        calibrate_result({**ok, "labels": ["a", "b", "c"]}, calibrator)
    # an answer without a version is the backend's version (when the backend says)
    unversioned = {**ok, "model_version": None}
    assert calibrate_result(unversioned, calibrator, fallback_version="v1")
    with pytest.raises(CalibratorError, match="cannot calibrate answers without a model version"):
        calibrate_result(unversioned, calibrator)
    # an unversioned calibrator: matched on the model's name
    loose = load_calibrator(
        write(tmp_path, backend={"name": "default", "provider": "mock", "model": "m"})
    )
    assert calibrate_result(unversioned, loose)
    with pytest.raises(CalibratorError, match="cannot calibrate model 'n'"):
        calibrate_result({**unversioned, "model": "n"}, loose)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"method": "magic"}, "method"),
        ({"parameters": {"temperature": -1}}, "temperature must be a positive number"),
        ({"method": "vector", "parameters": {"scale": [1, 1], "bias": [0, 0, 0]}}, "scale"),
        (
            {
                "method": "isotonic",
                "parameters": {"thresholds": [[0.5, 0.1]] * 3, "values": [[0, 1]] * 3},
            },
            "ascending",
        ),
        ({"calibrator_version": "9"}, "calibrator_version"),
        ({"logits": "vibes"}, "logits"),
    ],
)
def test_a_tampered_file_is_refused_with_the_field(tmp_path, changes, field):
    with pytest.raises(CalibratorError, match="invalid calibrator") as caught:
        load_calibrator(write(tmp_path, **changes))
    assert field in str(caught.value) and str(tmp_path / "cal.json") in str(caught.value)


def test_conformal_sets_from_the_raw_probabilities_and_the_route(tmp_path):
    conformal = {"method": "lac", "alpha": 0.1, "q_hat": 0.75, "n_calibration": 50,
                 "route": "human_review", "backend": None}  # fmt: skip
    calibrator = load_calibrator(write(tmp_path, conformal=conformal))
    sure = calibrate_result(result([0.9, 0.05, 0.05]), calibrator)
    unsure = calibrate_result(result([0.5, 0.4, 0.1]), calibrator)
    # LAC at q 0.75: labels with raw probability >= 0.25
    assert sure["metadata"]["calibration"]["prediction_set"] == ["low"]
    assert unsure["metadata"]["calibration"]["prediction_set"] == ["low", "mid"]
    assert conformal_route(sure, calibrator) is None
    assert conformal_route(unsure, calibrator) == ("human_review", None)
    assert CONFORMAL_ROUTE == -1


def test_raw_answer_undoes_the_note(tmp_path):
    calibrator = load_calibrator(write(tmp_path))
    original = result([0.6, 0.3, 0.1], metadata={"calibration": "the backend's own", "x": 1})
    made = calibrate_result(original, calibrator)
    assert made["metadata"]["calibration"]["backend"] == "the backend's own"
    values = [made["probabilities"][label] for label in LABELS]
    raw, meta = raw_answer(values, made["metadata"], LABELS)
    assert raw == [0.6, 0.3, 0.1] and meta == original["metadata"]


def test_the_sdk_decides_on_calibrated_probabilities_and_routes_wide_sets(tmp_path):
    from decguard_pipeline.sdk import DecGuard
    from decguard_pipeline_tests.support.calibration_contracts import token, write_contract

    probs = np.array([[0.9, 0.05, 0.05], [0.5, 0.45, 0.05]])
    path = write_contract(
        tmp_path / "c", probs, np.array([0, 1]),
        top={"policy": {"routes": [{"when": {"confidence_gte": 0.6}, "action": "accept"},
                                   {"action": "abstain"}]}},
    )  # fmt: skip
    conformal = {"method": "lac", "alpha": 0.1, "q_hat": 0.6, "n_calibration": 50,
                 "route": "fallback", "backend": "human_desk"}  # fmt: skip
    cal = write(
        tmp_path,
        backend={"name": "default", "provider": "mock", "model": "gen-v1"},
        parameters={"temperature": 0.5},
        conformal=conformal,
    )
    with DecGuard.from_contract(path, calibrator=cal) as guard:
        sure = guard.decide(f"message {token(0)}")
        wide = guard.decide(f"message {token(1)}")
    sharpened = special.softmax(np.log(probs) / 0.5, axis=1)
    assert [sure.result.probabilities[label] for label in LABELS] == pytest.approx(sharpened[0])
    assert (sure.action, sure.route_index) == ("accept", 0)
    assert wide.result.metadata["calibration"]["prediction_set"] == ["low", "mid"]
    assert (wide.action, wide.fallback_backend, wide.route_index) == ("fallback", "human_desk", -1)
    # DecGuard's own JSON shape: the extension lives in the result's metadata
    assert list(json.loads(wide.model_dump_json())) == [
        "result", "action", "fallback_backend", "route_index"
    ]  # fmt: skip
