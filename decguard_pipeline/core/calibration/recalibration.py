"""What recalibration would buy: temperature scaling fitted by cross-validation.

Temperature scaling (Guo et al. 2017, "On calibration of modern neural networks") rescales
every probability vector as softmax(z / T) of its logits z (``core/calibration/scaling.py``):
T > 1 softens an over-confident model, T < 1 sharpens an under-confident one, and the ranking
of labels (so the selected label and the accuracy) never changes.

Fitting T and measuring on the same golden cases would flatter it, so the report is
cross-validated: the cases are split into K folds (seeded), T is fitted on K − 1 folds and
applied to the held-out one, and DecGuard's ECE, NLL and Brier score are computed on the
held-out scaled probabilities of all cases ("after") next to the same numbers of the original
probabilities ("before"). The temperature reported is the one fitted on all cases: what a team
would deploy. If "after" is much better than "before", a one-parameter fix exists before any
retraining; ``decguard-pipeline calibrate`` fits one on a calibration split and ships it.

The logits are the backend's own log-probabilities when every case carries them, else
``log p`` of the reported probabilities, unfloored (``core/calibration/logits.py``): a label
given probability 0 keeps it, and a case whose expected label had probability 0 cannot
inform T (its NLL is infinite at every T). T is searched within [0.01, 100]; a fit at a bound
(e.g. every case right with a margin, where the likelihood keeps improving as T → 0) is
flagged. See docs/metrics.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from decguard_pipeline.core.calibration.inputs import multiclass, top_label
from decguard_pipeline.core.calibration.logits import LOG_P, log_probabilities
from decguard_pipeline.core.calibration.scaling import (
    T_MAX,
    T_MIN,
    apply_temperature,
    fit_beta,
    fit_rows,
)
from decguard_pipeline.core.golden.metrics import (
    brier,
    expected_calibration_error,
    nll,
    reliability,
)

__all__ = ["T_MAX", "T_MIN", "Scores", "TemperatureScaling", "scale", "temperature_scaling"]


@dataclass(frozen=True)
class Scores:
    """DecGuard's top-label ECE (equal-width bins), NLL and Brier score of one set of
    probabilities."""

    ece: float | None
    nll: float | None
    brier: float | None


@dataclass(frozen=True)
class TemperatureScaling:
    temperature: float  # fitted on all cases
    at_bound: bool  # the fit hit T_MIN or T_MAX
    folds: int
    fold_temperatures: tuple[float, ...]
    logits: str  # what T scales: core/calibration/logits.SOURCES
    before: Scores  # the original probabilities
    after: Scores  # out-of-fold temperature-scaled probabilities


def _prepared(
    probs: np.ndarray, expected: np.ndarray, logits: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    p, e = multiclass(probs, expected)
    z = log_probabilities(p) if logits is None else np.asarray(logits, dtype=np.float64)
    if z.shape != p.shape:
        raise ValueError(f"logits have shape {z.shape}, the probabilities {p.shape}")
    return p, e, z


def scale(probs: np.ndarray, temperature: float) -> np.ndarray:
    """Temperature-scaled probabilities: each row ∝ p^(1/T) (a label at 0 stays at 0)."""
    return apply_temperature(log_probabilities(probs), temperature)


def fit_temperature(
    probs: np.ndarray, expected: np.ndarray, *, logits: np.ndarray | None = None
) -> float | None:
    """The NLL-minimising temperature within [T_MIN, T_MAX] of ``logits`` (default ``log p``);
    None for no cases; 1 when the likelihood does not depend on T (one label, every row
    uniform, or no case whose expected label has a finite logit)."""
    p, e, z = _prepared(probs, expected, logits)
    if not p.shape[0]:
        return None
    rows = fit_rows(z, e)
    z, e = z[rows], e[rows]
    return 1.0 / fit_beta(z, z[np.arange(len(e)), e])


def scores(probs: np.ndarray, expected: np.ndarray, n_bins: int = 10) -> Scores:
    """DecGuard's ECE, NLL and Brier score of probabilities (checked inputs)."""
    confidence, correct = top_label(probs, expected)
    return Scores(
        ece=expected_calibration_error(reliability(confidence, correct.astype(bool), n_bins)),
        nll=nll(probs[np.arange(len(expected)), expected]),
        brier=brier(probs, expected),
    )


def temperature_scaling(
    probs: np.ndarray,
    expected: np.ndarray,
    *,
    logits: np.ndarray | None = None,
    logits_source: str = LOG_P,
    folds: int = 5,
    seed: int = 0,
    n_bins: int = 10,
) -> TemperatureScaling | None:
    """Temperature fitted on all cases, and ECE/NLL/Brier before vs after scaling, the latter
    out of fold over ``min(folds, n)`` seeded folds; None for fewer than two cases.
    ``logits`` (default ``log p``) are what T scales; ``logits_source`` says which they are
    (``core/calibration/logits.SOURCES``)."""
    p, e, z = _prepared(probs, expected, logits)
    n = p.shape[0]
    if n < 2:
        return None
    if folds < 2:
        raise ValueError("cross-validation needs at least two folds")
    usable = fit_rows(z, e)
    z_expected = np.where(usable, z[np.arange(n), e], 0.0)
    beta = fit_beta(z[usable], z_expected[usable])
    k = min(folds, n)
    held_out = np.array_split(np.random.default_rng(seed).permutation(n), k)
    scaled = np.empty_like(p)
    fold_t = []
    for rows in held_out:
        train = usable.copy()
        train[rows] = False
        b = fit_beta(z[train], z_expected[train], start=beta)
        fold_t.append(1.0 / b)
        scaled[rows] = apply_temperature(z[rows], 1.0 / b)
    return TemperatureScaling(
        temperature=1.0 / beta,
        at_bound=beta in (1 / T_MAX, 1 / T_MIN),
        folds=k,
        fold_temperatures=tuple(fold_t),
        logits=logits_source,
        before=scores(p, e, n_bins),
        after=scores(scaled, e, n_bins),
    )
