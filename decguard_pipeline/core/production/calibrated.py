"""``check --calibrator``: production decisions re-decided on calibrated probabilities, next to
the raw ones (the sidecar section ``calibrated``; DecGuard's check report is untouched: its
records are what was logged).

The records' probabilities are the model's (a record logged from a calibrated decision is
read back to its raw answer through the note in its metadata, ``core/calibration/notes.py``);
each is calibrated as at decision time, after the same checks: every record must come from
the calibrator's backend (when it says) and model version (``CalibratorError``, exit 2,
naming how many do not). On the records with a label outcome: every held-out measure raw and
calibrated (``core/calibration/heldout.py``; no bootstrap: these are all the records); over
all records: the coverage at ``evaluation.confidence_threshold``, the routes the contract's
policy would take, and with a conformal threshold the prediction sets' coverage and sizes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from decguard_pipeline.core.calibration.artifact import LoadedCalibrator, check_labels
from decguard_pipeline.core.calibration.conformal import prediction_sets
from decguard_pipeline.core.calibration.heldout import compare
from decguard_pipeline.core.calibration.logits import BACKEND, log_probabilities, results_logits
from decguard_pipeline.core.calibration.notes import raw_answer
from decguard_pipeline.core.contract import Contract
from decguard_pipeline.core.errors import CalibratorError
from decguard_pipeline.core.policy import route_indices

SECTION = "calibrated"


def _checked(records: Iterable[dict[str, Any]], calibrator: LoadedCalibrator, labels: tuple):
    probs, outcome, metadata = [], [], []
    other_backend: dict[str, int] = {}
    other_version: dict[str, int] = {}
    fitted = calibrator.backend
    index = {label: i for i, label in enumerate(labels)}
    for record in records:
        backend, version = record.get("backend"), record.get("model_version")
        if backend is not None and backend != fitted.name:
            other_backend[backend] = other_backend.get(backend, 0) + 1
        if version != fitted.model_version:
            key = "no model_version" if version is None else version
            other_version[key] = other_version.get(key, 0) + 1
        elif version is None and record.get("model") not in (None, fitted.model):
            # an unversioned calibrator is matched on the model's name
            key = f"{record['model']} (unversioned)"
            other_version[key] = other_version.get(key, 0) + 1
        values = [record["probabilities"][label] for label in labels]
        raw, meta = raw_answer(values, record.get("metadata"), labels)
        probs.append(raw)
        metadata.append(meta)
        outcome.append(-1 if record.get("outcome") is None else index[record["outcome"]])
    where = f"{calibrator.path}: calibrator for {calibrator.target}"
    if other_backend:
        named = ", ".join(f"{k} ({v} records)" for k, v in sorted(other_backend.items()))
        raise CalibratorError(f"{where} cannot calibrate backend {named}")
    if other_version:
        named = ", ".join(f"{k} ({v} records)" for k, v in sorted(other_version.items()))
        raise CalibratorError(
            f"{where} cannot calibrate model version {named}: a calibrator is fitted on one"
            " model version's answers"
        )
    k = len(labels)
    return (
        np.asarray(probs, dtype=np.float64).reshape(-1, k),
        np.asarray(outcome, dtype=np.int64),
        metadata,
    )


def _routes(contract: Contract, confidence: np.ndarray) -> dict[str, float] | None:
    policy = contract.policy
    if policy is None or not len(confidence):
        return None
    chosen = route_indices(policy, confidence)
    shares: dict[str, float] = {}
    for index, route in enumerate(policy.routes):
        share = float(np.count_nonzero(chosen == index)) / len(confidence)
        shares[route.action] = shares.get(route.action, 0.0) + share
    return shares


def calibrated_check(
    records: Iterable[dict[str, Any]], calibrator: LoadedCalibrator, contract: Contract
) -> dict[str, Any]:
    """The ``calibrated`` section of a check (the module docstring)."""
    labels = contract.labels
    check_labels(calibrator, labels)
    raw, outcome, metadata = _checked(records, calibrator, labels)
    logits, source = results_logits(raw, metadata, labels)
    if calibrator.logits == BACKEND and source != BACKEND:
        raise CalibratorError(
            f"{calibrator.path}: calibrator was fitted on the backend's log-probabilities;"
            " some records carry none (metadata.logprobs)"
        )
    if calibrator.logits != BACKEND:
        logits = log_probabilities(raw)
    calibrated = calibrator.calibrator.apply(logits, raw) if len(raw) else raw
    labeled = outcome >= 0
    bins = contract.evaluation.calibration_bins
    measured = compare(raw[labeled], calibrated[labeled], outcome[labeled], n_bins=bins,
                       resamples=0)  # fmt: skip
    threshold = contract.evaluation.confidence_threshold
    confidence = {"raw": raw.max(axis=1), "calibrated": calibrated.max(axis=1)}
    coverage = None
    if threshold is not None and len(raw):
        coverage = {side: float(np.mean(c >= threshold)) for side, c in confidence.items()}
    section: dict[str, Any] = {
        **calibrator.note(),
        "logits": calibrator.logits,
        "n_records": len(raw),
        "n_with_outcome": int(np.count_nonzero(labeled)),
        "measures": measured.rows(),
        "selected_changed": int(np.count_nonzero(raw.argmax(axis=1) != calibrated.argmax(axis=1)))
        if len(raw)
        else 0,
        "confidence_threshold": threshold,
        "coverage": coverage,
        "routes": None
        if contract.policy is None
        else {side: _routes(contract, c) for side, c in confidence.items()},
        "conformal": None,
    }
    conformal = calibrator.conformal
    if conformal is not None and len(raw):
        q_hat = math.inf if conformal.q_hat is None else conformal.q_hat
        sets = prediction_sets(conformal.method, raw, q_hat)
        sizes = sets.sum(axis=1)
        covered = sets[np.flatnonzero(labeled), outcome[labeled]]
        section["conformal"] = {
            "method": conformal.method,
            "alpha": conformal.alpha,
            "target_coverage": 1.0 - conformal.alpha,
            "coverage": float(covered.mean()) if covered.size else None,
            "mean_set_size": float(sizes.mean()),
            "more_than_one_label": float(np.mean(sizes > 1)),
            "route": conformal.route,
        }
    return section


def render_calibrated_check(section: dict[str, Any]) -> str:
    """The text block after DecGuard's check layout."""
    from decguard_pipeline.core.formatting import num, signed

    lines = [
        f"Calibrated · {section['method']} for {section['target']} ({section['file']}) ·"
        f" {section['n_records']} records, {section['n_with_outcome']} with a label outcome",
        f"  {'measure':<40}{'raw':<10}{'calibrated':<12}change",
    ]
    for row in section["measures"]:
        lines.append(
            f"  {row['title']:<40}{num(row['before'], 4):<10}{num(row['after'], 4):<12}"
            f"{signed(row['change'])}"
        )
    lines.append(f"  selected label changed on {section['selected_changed']} records")
    coverage = section["coverage"]
    if coverage is not None:
        lines.append(
            f"  coverage at confidence >= {section['confidence_threshold']:g}:"
            f" {num(coverage['raw'])} raw → {num(coverage['calibrated'])} calibrated"
        )
    routes = section["routes"]
    if routes is not None:
        for side in ("raw", "calibrated"):
            shares = " · ".join(f"{a} {num(v)}" for a, v in (routes[side] or {}).items())
            lines.append(f"  policy routes ({side}): {shares}")
    conformal = section["conformal"]
    if conformal is not None:
        lines.append(
            f"  conformal sets ({conformal['method'].upper()}, alpha {conformal['alpha']:g}):"
            f" coverage {num(conformal['coverage'])} (target {conformal['target_coverage']:.3f})"
            f" · mean size {num(conformal['mean_set_size'], 2)} · more than one label"
            f" {num(conformal['more_than_one_label'])}"
        )
    return "\n".join(lines)
