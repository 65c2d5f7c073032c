"""What recalibration would buy: temperature scaling fitted by cross-validation.

Temperature scaling (Guo et al. 2017, "On calibration of modern neural networks") rescales
every probability vector as p_T ∝ p^(1/T), i.e. a softmax of log p / T: T > 1 softens an
over-confident model, T < 1 sharpens an under-confident one, and the ranking of labels (so the
selected label and the accuracy) never changes. T minimises the mean negative log-likelihood
of the expected labels; that is convex in β = 1/T, so a safeguarded Newton iteration on β finds
it to machine precision in a few steps.

Fitting T and measuring on the same golden cases would flatter it, so the report is
cross-validated: the cases are split into K folds (seeded), T is fitted on K − 1 folds and
applied to the held-out one, and DecGuard's ECE, NLL and Brier score are computed on the
held-out scaled probabilities of all cases ("after") next to the same numbers of the original
probabilities ("before"). The temperature reported is the one fitted on all cases: what a team
would deploy. If "after" is much better than "before", a one-parameter fix exists before any
retraining.

Probabilities are floored at 1e-15 before taking logs (DecGuard's NLL floor), so a label given
probability 0 can still be scaled. T is searched within [0.01, 100]; a fit at a bound (e.g.
every case right with a margin, where the likelihood keeps improving as T → 0) is flagged.
See docs/metrics.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from decguard_pipeline.core.calibration.inputs import multiclass, top_label
from decguard_pipeline.core.golden.metrics import (
    NLL_FLOOR,
    brier,
    expected_calibration_error,
    nll,
    reliability,
)

T_MIN, T_MAX = 0.01, 100.0
_MAX_STEPS = 100


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
    before: Scores  # the original probabilities
    after: Scores  # out-of-fold temperature-scaled probabilities


def _logits(probs: np.ndarray) -> np.ndarray:
    return np.log(np.maximum(probs, NLL_FLOOR))


def scale(probs: np.ndarray, temperature: float) -> np.ndarray:
    """Temperature-scaled probabilities: each row ∝ max(p, 1e-15)^(1/T)."""
    if not temperature > 0:
        raise ValueError("the temperature must be positive")
    z = _logits(np.asarray(probs, dtype=np.float64)) / temperature
    z -= z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def _slope(beta: float, zt: np.ndarray, z_expected: np.ndarray) -> tuple[float, float]:
    """First and second derivative in β of the mean NLL of softmax(β z); ``zt`` holds the
    logits label by label (k, n), so every reduction runs along the long axis. The first is
    Σ_j p_j (z_j − z_expected), which stays accurate when p_expected rounds to 1."""
    a = beta * zt
    a -= a.max(axis=0)
    e = np.exp(a)
    total = e.sum(axis=0)
    gap = zt - z_expected
    mean_gap = (e * gap).sum(axis=0) / total
    variance = (e * (gap - mean_gap) ** 2).sum(axis=0) / total
    return float(np.mean(mean_gap)), float(np.mean(variance))


def _fit_beta(z: np.ndarray, z_expected: np.ndarray, start: float = 1.0) -> float:
    """β = 1/T minimising the mean NLL within [1/T_MAX, 1/T_MIN].

    The NLL is convex in β, so its slope is increasing: one look at the bound the slope points
    to settles whether the minimum lies beyond it; otherwise Newton steps, kept inside a
    bracket that every evaluation narrows (bisection when a step leaves it), find the root."""
    if not (np.ptp(z, axis=1) > 0).any():
        return 1.0  # every row uniform (or one label): the likelihood does not depend on T
    zt = np.ascontiguousarray(z.T)
    low, high = 1 / T_MAX, 1 / T_MIN
    beta = min(max(start, low), high)
    g, h = _slope(beta, zt, z_expected)
    if g < 0:
        if beta == high or _slope(high, zt, z_expected)[0] <= 0:
            return high
        low = beta
    elif g > 0:
        if beta == low or _slope(low, zt, z_expected)[0] >= 0:
            return low
        high = beta
    for _ in range(_MAX_STEPS):
        if g == 0:
            return beta
        newton = beta - g / h if h > 0 else np.nan
        if abs(newton - beta) <= 1e-13 * beta:
            return beta  # converged: the next step is below the slope's rounding noise
        beta = newton if low < newton < high else (low + high) / 2
        g, h = _slope(beta, zt, z_expected)
        if g > 0:
            high = beta
        elif g < 0:
            low = beta
    return beta


def fit_temperature(probs: np.ndarray, expected: np.ndarray) -> float | None:
    """The NLL-minimising temperature within [T_MIN, T_MAX]; None for no cases; 1 when the
    likelihood does not depend on T (one label, or every row uniform)."""
    p, e = multiclass(probs, expected)
    if not p.shape[0]:
        return None
    z = _logits(p)
    return 1.0 / _fit_beta(z, z[np.arange(len(e)), e])


def scores(probs: np.ndarray, expected: np.ndarray, n_bins: int = 10) -> Scores:
    """DecGuard's ECE, NLL and Brier score of probabilities (checked inputs)."""
    confidence, correct = top_label(probs, expected)
    return Scores(
        ece=expected_calibration_error(reliability(confidence, correct.astype(bool), n_bins)),
        nll=nll(probs[np.arange(len(expected)), expected]),
        brier=brier(probs, expected),
    )


def temperature_scaling(
    probs: np.ndarray, expected: np.ndarray, *, folds: int = 5, seed: int = 0, n_bins: int = 10
) -> TemperatureScaling | None:
    """Temperature fitted on all cases, and ECE/NLL/Brier before vs after scaling, the latter
    out of fold over ``min(folds, n)`` seeded folds; None for fewer than two cases."""
    p, e = multiclass(probs, expected)
    n = p.shape[0]
    if n < 2:
        return None
    if folds < 2:
        raise ValueError("cross-validation needs at least two folds")
    z = _logits(p)
    z_expected = z[np.arange(n), e]
    beta = _fit_beta(z, z_expected)
    k = min(folds, n)
    held_out = np.array_split(np.random.default_rng(seed).permutation(n), k)
    scaled = np.empty_like(p)
    fold_t = []
    for rows in held_out:
        train = np.ones(n, dtype=bool)
        train[rows] = False
        b = _fit_beta(z[train], z_expected[train], start=beta)
        fold_t.append(1.0 / b)
        scaled[rows] = scale(p[rows], 1.0 / b)
    return TemperatureScaling(
        temperature=1.0 / beta,
        at_bound=beta in (1 / T_MAX, 1 / T_MIN),
        folds=k,
        fold_temperatures=tuple(fold_t),
        before=scores(p, e, n_bins),
        after=scores(scaled, e, n_bins),
    )
