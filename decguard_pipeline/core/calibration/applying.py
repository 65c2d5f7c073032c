"""A calibrator applied at decision time: the calibrated probabilities become the decision
(selected label, confidence, the policy's route), the raw ones are kept beside them.

Each calibrated result's ``metadata`` gets a ``calibration`` object: the calibrator
(``method``, ``target``, ``file``), the backend's ``raw_probabilities``, ``raw_selected`` and
``raw_confidence``, and with a conformal threshold the ``prediction_set`` (computed from the
raw probabilities, as the threshold was) and its ``alpha``. A backend's own ``calibration``
metadata key is kept under ``calibration.backend``. Nothing else of the result changes shape,
so DecGuard's types and report checks hold for calibrated decisions as for raw ones.

Before anything is calibrated the answers are checked against the calibrator's target
(``artifact.check_target``); a calibrator fitted on the backend's log-probabilities refuses an
answer without them (``CalibratorError``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from decguard_pipeline.core.calibration.artifact import (
    LoadedCalibrator,
    check_labels,
    check_target,
)
from decguard_pipeline.core.calibration.conformal import prediction_sets
from decguard_pipeline.core.calibration.logits import (
    BACKEND,
    decision_logits,
    log_probabilities,
    results_logits,
)
from decguard_pipeline.core.calibration.notes import BACKEND_NOTE, KEY
from decguard_pipeline.core.decision import select_many
from decguard_pipeline.core.errors import CalibratorError
from decguard_pipeline.core.results import CaseResults


def _sets(calibrator: LoadedCalibrator, probs: np.ndarray) -> np.ndarray | None:
    threshold = calibrator.conformal
    if threshold is None:
        return None
    q_hat = math.inf if threshold.q_hat is None else threshold.q_hat
    return prediction_sets(threshold.method, probs, q_hat)


def _note(
    calibrator: LoadedCalibrator,
    labels: tuple[str, ...],
    raw: np.ndarray,
    in_set: np.ndarray | None,
    backend_note: Any,
) -> dict[str, Any]:
    chosen = int(select_many(raw[None, :])[0][0])
    note: dict[str, Any] = {
        **calibrator.note(),
        "raw_probabilities": dict(zip(labels, raw.tolist(), strict=True)),
        "raw_selected": labels[chosen],
        "raw_confidence": float(raw[chosen]),
    }
    if in_set is not None and calibrator.conformal is not None:
        note["prediction_set"] = [label for label, inside in zip(labels, in_set, strict=True)
                                  if inside]  # fmt: skip
        note["alpha"] = calibrator.conformal.alpha
    if backend_note is not None:
        note[BACKEND_NOTE] = backend_note
    return note


def _with_note(metadata: Mapping[str, Any] | None, note: dict[str, Any]) -> dict[str, Any]:
    out = dict(metadata or {})
    out[KEY] = note
    return out


def calibrate_results(
    results: CaseResults, calibrator: LoadedCalibrator, *, model_version: str | None = None
) -> CaseResults:
    """The results with every decision calibrated (errored cases stay errors).
    ``model_version``: the backend's own (its metadata), checked with the answers'."""
    labels = results.labels
    check_labels(calibrator, labels)
    ok = np.flatnonzero(results.ok)
    rows = ok.tolist()
    versions = {results.model_version[i] for i in rows}
    if model_version is not None:
        versions = {v if v is not None else model_version for v in versions} or {model_version}
    models = {results.model[i] for i in rows}
    check_target(
        calibrator,
        backend=results.backend,
        model_versions=versions,
        model=models.pop() if len(models) == 1 else None,
    )
    out = results.take(np.arange(len(results)))
    if not rows:
        return out
    raw = results.probs[ok]
    metadata = [results.result_metadata[i] for i in rows]
    logits, source = results_logits(raw, metadata, labels)
    if calibrator.logits == BACKEND and source != BACKEND:
        missing = next(
            results.case_ids[i]
            for i in rows
            if decision_logits(
                {"metadata": results.result_metadata[i], "labels": labels}, labels, BACKEND
            )
            is None
        )
        raise CalibratorError(
            f"{calibrator.path}: calibrator was fitted on the backend's log-probabilities;"
            f" case {missing!r} was answered without them (result metadata.logprobs)"
        )
    if calibrator.logits != BACKEND:
        logits = log_probabilities(raw)
    calibrated = calibrator.calibrator.apply(logits, raw)
    out.probs[ok] = calibrated
    selected, confidence = select_many(calibrated)
    out.selected[ok] = selected
    out.confidence[ok] = confidence
    sets = _sets(calibrator, raw)
    for j, i in enumerate(rows):
        meta = results.result_metadata[i]
        note = _note(
            calibrator,
            labels,
            raw[j],
            None if sets is None else sets[j],
            (meta or {}).get(KEY),
        )
        out.result_metadata[i] = _with_note(meta, note)
    return out


def calibrate_result(
    result: dict[str, Any], calibrator: LoadedCalibrator, *, fallback_version: str | None = None
) -> dict[str, Any]:
    """One DecisionResult dict calibrated (a new dict); ``fallback_version``: the backend's
    model version when the answer reports none."""
    labels = tuple(result["labels"])
    check_labels(calibrator, labels)
    version = result.get("model_version") or fallback_version
    check_target(
        calibrator, backend=result["backend"], model_versions=[version], model=result.get("model")
    )
    logits = decision_logits(result, labels, calibrator.logits)
    if logits is None:
        raise CalibratorError(
            f"{calibrator.path}: calibrator was fitted on the backend's log-probabilities;"
            f" this answer has none (result metadata.logprobs)"
        )
    raw = np.array([result["probabilities"][label] for label in labels], dtype=np.float64)
    calibrated = calibrator.calibrator.apply(logits[None, :], raw[None, :])[0]
    selected = int(select_many(calibrated[None, :])[0][0])
    sets = _sets(calibrator, raw[None, :])
    meta = result.get("metadata") or {}
    note = _note(calibrator, labels, raw, None if sets is None else sets[0], meta.get(KEY))
    return {
        **result,
        "probabilities": dict(zip(labels, calibrated.tolist(), strict=True)),
        "selected": labels[selected],
        "confidence": float(calibrated[selected]),
        "metadata": _with_note(meta, note),
    }


def set_size(result: Mapping[str, Any]) -> int | None:
    """The size of a calibrated result's conformal prediction set (None without one)."""
    note = (result.get("metadata") or {}).get(KEY)
    if not isinstance(note, Mapping) or "prediction_set" not in note:
        return None
    return len(note["prediction_set"])


CONFORMAL_ROUTE = -1  # route_index of a decision the conformal set handed off


def conformal_route(
    result: Mapping[str, Any], calibrator: LoadedCalibrator
) -> tuple[str, str | None] | None:
    """``(action, fallback backend)`` for a calibrated decision whose prediction set holds more
    than one label when the calibrator routes such cases (``conformal.route``); else None."""
    threshold = calibrator.conformal
    if threshold is None or threshold.route is None:
        return None
    size = set_size(result)
    if size is None or size <= 1:
        return None
    return threshold.route, threshold.backend


def routed(
    document: dict[str, Any], result: Mapping[str, Any], calibrator: LoadedCalibrator
) -> dict[str, Any]:
    """A PolicyDecision document with the conformal route taken before the contract's routes
    (``route_index`` −1) when it applies; the document unchanged otherwise."""
    route = conformal_route(result, calibrator)
    if route is None:
        return document
    action, backend = route
    return {**document, "action": action, "fallback_backend": backend,
            "route_index": CONFORMAL_ROUTE}  # fmt: skip
