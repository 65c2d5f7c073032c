"""Fit a calibrator on the calibration cases of a golden run and judge it on the others: what
``decguard-pipeline calibrate``, ``test`` with ``pipeline.calibration.split`` (or another
calibrator key) and the ``calibrator`` asset compute, as one sidecar section (``calibrator``)
and one ``calibrator.json`` document.

1. The labeled, decided cases are split (``core/calibration/split.py``): a stratified share of
   the golden cases, or every golden case held out when a calibration dataset was decided.
2. The logits are chosen once for both sides: the backend's log-probabilities when every case
   carries them, else ``log p`` (``core/calibration/logits.py``).
3. The method is the contract's (or the command's), ``auto`` choosing by cross-validated NLL
   on the calibration cases; it is fitted on all of them.
4. On the held-out cases: every measure before and after with its paired bootstrap interval
   (``heldout.py``), how many selected labels changed (never one for temperature), the
   split-conformal sets of the raw probabilities (``conformal.py``), the Learn-then-Test
   threshold on the calibrated confidence as a suggested ``abstain_below`` and the escalation
   sweep (``escalation.py``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from decguard_pipeline.core.calibration.abstention import guaranteed_threshold
from decguard_pipeline.core.calibration.artifact import VERSION, target_of
from decguard_pipeline.core.calibration.calibrators import AUTO, cross_validated_nll, fit
from decguard_pipeline.core.calibration.conformal import conformalize
from decguard_pipeline.core.calibration.escalation import (
    DEFAULT_THRESHOLDS,
    escalation_sweep,
    suggestion,
)
from decguard_pipeline.core.calibration.extension import labeled_rows
from decguard_pipeline.core.calibration.heldout import compare
from decguard_pipeline.core.calibration.inputs import top_label
from decguard_pipeline.core.calibration.logits import BACKEND, SOURCES, results_logits
from decguard_pipeline.core.calibration.split import stratified_split
from decguard_pipeline.core.contract import Contract
from decguard_pipeline.core.contract.calibrator import (
    DEFAULT_FRACTION,
    AbstentionSettings,
    ConformalSettings,
)
from decguard_pipeline.core.contract.guard_settings import CalibrationSettings
from decguard_pipeline.core.errors import CalibratorError
from decguard_pipeline.core.product import PRODUCER_VERSION
from decguard_pipeline.core.results import CaseResults

SECTION = "calibrator"  # the sidecar section's name
MIN_CALIBRATION = 2


@dataclass(frozen=True)
class FitSettings:
    """``pipeline.calibration``'s calibrator keys with every default resolved."""

    method: str  # auto or one of calibrators.METHODS
    chosen_by: str  # contract | command | default
    fraction: float | None  # None: a calibration dataset
    seed: int
    dataset: str | None  # the calibration dataset as the contract names it
    histogram_bins: int
    folds: int
    conformal: ConformalSettings | None
    abstention: AbstentionSettings
    escalation_cost: float | None
    thresholds: tuple[float, ...]
    n_bins: int  # the ECEs' bins: evaluation.calibration_bins
    resamples: int
    confidence: float


def calibration_settings(contract: Contract) -> CalibrationSettings | None:
    p = contract.pipeline
    return None if p is None else p.calibration


def fits_calibrator(contract: Contract) -> bool:
    """Whether a golden run of this contract fits and judges a calibrator."""
    settings = calibration_settings(contract)
    return settings is not None and settings.fits_calibrator


def fit_settings(contract: Contract, *, method: str | None = None) -> FitSettings:
    """The contract's calibrator keys (defaults when it has none); ``method`` overrides."""
    s = calibration_settings(contract) or CalibrationSettings()
    p = contract.pipeline
    split = s.split
    risk = p.risk_coverage if p is not None else None
    bins = contract.evaluation.calibration_bins
    return FitSettings(
        method=method or s.method or AUTO,
        chosen_by="command" if method else "contract" if s.method else "default",
        fraction=DEFAULT_FRACTION if split is None else split.share,
        seed=0 if split is None else split.seed,
        dataset=None if split is None else split.dataset,
        histogram_bins=s.histogram_bins or bins,
        folds=s.folds,
        conformal=s.conformal,
        abstention=s.abstention or AbstentionSettings(),
        escalation_cost=(
            s.escalation_cost
            if s.escalation_cost is not None
            else (risk.escalation_cost if risk is not None else None)
        ),
        thresholds=s.thresholds or (risk.thresholds if risk is not None else DEFAULT_THRESHOLDS),
        n_bins=bins,
        resamples=s.bootstrap_resamples,
        confidence=s.confidence,
    )


@dataclass(frozen=True)
class Identity:
    """Which model's answers: the contract backend and the model version that answered."""

    backend: str
    provider: str
    model: str | None
    model_version: str | None

    @property
    def target(self) -> str:
        return target_of(self.backend, self.model_version, self.model)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.backend,
            "provider": self.provider,
            "model": self.model,
            "model_version": self.model_version,
        }


@dataclass(frozen=True)
class Fitted:
    """The sidecar section and the ``calibrator.json`` document of one fit."""

    section: dict[str, Any]
    document: dict[str, Any]


def data_hash(ids: list[str], expected: np.ndarray, probs: np.ndarray, logits: np.ndarray) -> str:
    """sha256 of exactly what the calibrator was fitted on: case ids, expected label
    indices, probabilities and logits (float64 bytes), in order."""
    digest = hashlib.sha256()
    for case_id in ids:
        digest.update(case_id.encode("utf-8") + b"\x00")
    for array in (expected.astype(np.int64), probs, logits):
        digest.update(np.ascontiguousarray(array, dtype=array.dtype).tobytes())
    return "sha256:" + digest.hexdigest()


def _cases(results: CaseResults, rows: np.ndarray) -> dict[str, Any]:
    pick = rows.tolist()
    ids = [results.case_ids[i] for i in pick]
    metadata = [results.result_metadata[i] for i in pick]
    return {
        "ids": ids,
        "probs": results.probs[rows],
        "expected": results.expected_index[rows],
        "metadata": metadata,
    }


def _logits(sides: list[dict[str, Any]], labels: tuple[str, ...]) -> str:
    """Put each side's logits in place, from one source for both."""
    metadata = [m for side in sides for m in side["metadata"]]
    probs = np.vstack([side["probs"] for side in sides])
    logits, source = results_logits(probs, metadata, labels)
    start = 0
    for side in sides:
        n = len(side["ids"])
        side["logits"] = logits[start : start + n]
        start += n
    return source


def fit_calibrator(
    results: CaseResults,
    settings: FitSettings,
    identity: Identity,
    *,
    contract: dict[str, Any],
    dataset: dict[str, Any],
    calibration: CaseResults | None = None,
    calibration_dataset: dict[str, Any] | None = None,
    backend_cost_per_1000: float | None = None,
) -> Fitted:
    """Fit on the calibration cases, judge on the held-out ones (module docstring).

    ``results``: the golden run; ``calibration``: the calibration dataset's run when the
    contract names one (then every golden case is held out). ``contract``: name, labels,
    hash; ``dataset`` / ``calibration_dataset``: path and hash. Raises ``CalibratorError``
    when there are too few cases on either side."""
    labels = results.labels
    usable = np.flatnonzero(labeled_rows(results))
    if calibration is not None:
        cal = _cases(calibration, np.flatnonzero(labeled_rows(calibration)))
        held = _cases(results, usable)
    else:
        assert settings.fraction is not None
        mask = stratified_split(results.expected_index, settings.fraction, settings.seed)
        cal = _cases(results, np.flatnonzero(mask & labeled_rows(results)))
        held = _cases(results, np.flatnonzero(~mask & labeled_rows(results)))
    n_cal, n_held = len(cal["ids"]), len(held["ids"])
    if n_cal < MIN_CALIBRATION or n_held < 1:
        raise CalibratorError(
            f"fitting a calibrator needs at least {MIN_CALIBRATION} labeled, decided"
            f" calibration cases and one held-out case; the split gave {n_cal} and {n_held}"
        )
    source = _logits([cal, held], labels)
    selection = None
    method = settings.method
    if method == AUTO:
        selection = cross_validated_nll(
            cal["logits"],
            cal["probs"],
            cal["expected"],
            folds=settings.folds,
            seed=settings.seed,
            bins=settings.histogram_bins,
        )
        method = selection.method
    calibrator = fit(
        method, cal["logits"], cal["probs"], cal["expected"], bins=settings.histogram_bins
    )
    raw, expected = held["probs"], held["expected"]
    calibrated = calibrator.apply(held["logits"], raw)
    comparison = compare(
        raw,
        calibrated,
        expected,
        n_bins=settings.n_bins,
        resamples=settings.resamples,
        confidence=settings.confidence,
        seed=settings.seed,
    )
    changed = int(np.count_nonzero(raw.argmax(axis=1) != calibrated.argmax(axis=1)))
    conformal = None
    if settings.conformal is not None:
        c = settings.conformal
        conformal = conformalize(c.method, c.alpha, cal["probs"], cal["expected"], raw, expected)
    confidence, correct = top_label(calibrated, expected)
    raw_confidence, raw_correct = top_label(raw, expected)
    a = settings.abstention
    abstention = guaranteed_threshold(confidence, correct, alpha=a.alpha, delta=a.delta)
    costs = {
        "escalation_cost": settings.escalation_cost,
        "backend_cost_per_1000": backend_cost_per_1000,
    }
    split: dict[str, Any] = (
        {"fraction": settings.fraction, "seed": settings.seed, "stratified_by": "expected label"}
        if calibration is None
        else {"dataset": settings.dataset, **(calibration_dataset or {})}
    )
    data = {
        "dataset": dataset,
        "split": split,
        "n_calibration": n_cal,
        "n_held_out": n_held,
        "hash": data_hash(cal["ids"], cal["expected"], cal["probs"], cal["logits"]),
    }
    chosen = {
        "method": method,
        "chosen_by": "auto" if selection is not None else settings.chosen_by,
        "parameters": calibrator.parameters,
        "logits": source,
        "logits_note": SOURCES[source],
    }
    selected = None
    if selection is not None:
        selected = {"folds": selection.folds, "nll": selection.nll}
    conformal_threshold = None
    if conformal is not None and settings.conformal is not None:
        c = settings.conformal
        conformal_threshold = {
            "method": c.method,
            "alpha": c.alpha,
            "q_hat": conformal.to_dict()["q_hat"],
            "n_calibration": conformal.n_calibration,
            "route": c.route,
            "backend": c.backend,
        }
    suggested = suggestion(abstention, n_held)
    section = {
        "target": identity.target,
        "backend": identity.as_dict(),
        **chosen,
        "data": data,
        "selection": selected,
        "held_out": comparison.to_dict(),
        "top_label_changes": changed,
        "conformal": None
        if conformal is None
        else {
            **conformal.to_dict(),
            "route": settings.conformal.route if settings.conformal else None,
        },
        "abstain_below": suggested,
        "escalation": {
            **costs,
            "calibrated": escalation_sweep(confidence, correct, settings.thresholds, **costs),
            "raw": escalation_sweep(raw_confidence, raw_correct, settings.thresholds, **costs),
        },
    }
    document = {
        "calibrator_version": VERSION,
        "producer": PRODUCER_VERSION,
        "contract": contract,
        "target": identity.target,
        "backend": identity.as_dict(),
        "method": method,
        "chosen_by": chosen["chosen_by"],
        "parameters": calibrator.parameters,
        "logits": source,
        "data": data,
        "selection": selected,
        "conformal": conformal_threshold,
        "abstain_below": suggested,
        "held_out": {"n": comparison.n, "measures": comparison.rows()},
    }
    return Fitted(section, document)


def uses_backend_logits(section: dict[str, Any]) -> bool:
    return section.get("logits") == BACKEND
