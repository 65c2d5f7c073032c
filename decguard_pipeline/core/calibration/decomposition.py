"""CORP decomposition of a proper score into miscalibration, discrimination and uncertainty
(Dimitriadis, Gneiting & Jordan 2021, "Stable reliability diagrams for probabilistic
classifiers", PNAS 118(8)).

Recalibrate the forecasts f by isotonic regression of the outcomes on them (the
pool-adjacent-violators algorithm, PAV): f̂ is the nondecreasing function of f closest to the
outcomes, the best a monotone relabelling of the model's own confidences can do. For a proper
score S with mean S̄ over the cases:

    S̄(f) = MCB − DSC + UNC
    MCB = S̄(f) − S̄(f̂)    miscalibration: what recalibration would save (>= 0)
    DSC = S̄(ȳ) − S̄(f̂)    discrimination: how far the recalibrated forecasts beat the base rate
    UNC = S̄(ȳ)           uncertainty: the score of always forecasting the base rate ȳ

A new model version whose MCB grew got *less honest*; one whose DSC shrank got *less able to
tell cases apart*. Isotonic recalibration needs no bins or bandwidth, which makes the split
stable on small sets, and f̂ is optimal for every proper score at once, so MCB and DSC are never
negative.

What is decomposed (all in :func:`score_decompositions`):

* ``brier``: DecGuard's multiclass Brier score Σ_k (p_k − y_k)². It is the sum over labels of
  the one-vs-rest binary Brier scores, and each of those is decomposed (its own isotonic fit
  of "expected is k" on p_k); the components are summed, so ``score`` is DecGuard's ``brier``.
* ``brier_top_label`` and ``log_loss_top_label``: the binary scores of the top-label
  confidence against "the selected label was right". Multiclass log loss (DecGuard's ``nll``)
  has no such split: isotonic regression has no multivariate counterpart that keeps it exact.

Log loss uses DecGuard's floor: a probability below 1e-15 counts as 1e-15 (a certain miss costs
~34.5, not infinity). See docs/metrics.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from decguard_pipeline.core.calibration.inputs import binary, multiclass, top_label
from decguard_pipeline.core.exact import fsum
from decguard_pipeline.core.golden.metrics import NLL_FLOOR

SCORES = ("brier", "log")


@dataclass(frozen=True)
class Decomposition:
    """``score = miscalibration − discrimination + uncertainty`` (up to rounding)."""

    score: float
    miscalibration: float
    discrimination: float
    uncertainty: float


def _lower_hull(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Indices of the vertices of the lower convex hull of points with increasing x.

    Every pass drops, at once, each point on or above the chord of its current neighbours:
    such a point is no hull vertex, so the hull does not change, and when no point is left to
    drop the chain is convex. For PAV's cumulative sums of 0/1 outcomes with integer weights
    the points are lattice points, whose convex chains have O(n^(2/3)) vertices, which bounds
    the passes; in practice a few dozen, each a vectorised sweep over the survivors."""
    keep = np.arange(len(x))
    while len(keep) > 2:
        dx, dy = np.diff(x[keep]), np.diff(y[keep])
        above = dy[:-1] * dx[1:] >= dy[1:] * dx[:-1]  # left slope >= right slope
        if not above.any():
            break
        keep = keep[np.concatenate(([True], ~above, [True]))]
    return keep


def isotonic_fit(x: np.ndarray, y: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Nondecreasing weighted least-squares fit of y on x (PAV), one value per case.

    Cases with equal x are pooled first and share one fitted value (scikit-learn's
    ``IsotonicRegression`` does the same). The fit is the slope of the greatest convex minorant
    of the cumulative sums of weights and weighted outcomes, taken in order of x."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    w = np.ones_like(x) if weights is None else np.asarray(weights, dtype=np.float64)
    if x.shape != y.shape or x.shape != w.shape or x.ndim != 1:
        raise ValueError("x, y and weights must be 1-D arrays of one length")
    if w.size and not (w > 0).all():
        raise ValueError("weights must be positive")
    n = len(x)
    if not n:
        return np.zeros(0)
    order = np.argsort(x, kind="stable")
    xs = x[order]
    starts = np.flatnonzero(np.concatenate(([True], xs[1:] != xs[:-1])))
    pooled_w = np.add.reduceat(w[order], starts)
    pooled_s = np.add.reduceat((w * y)[order], starts)
    cum_w = np.concatenate(([0.0], np.cumsum(pooled_w)))
    cum_s = np.concatenate(([0.0], np.cumsum(pooled_s)))
    hull = _lower_hull(cum_w, cum_s)
    slopes = np.diff(cum_s[hull]) / np.diff(cum_w[hull])
    segment = np.searchsorted(hull, np.arange(1, len(starts) + 1), side="left") - 1
    fitted = np.empty(n)
    fitted[order] = np.repeat(slopes[segment], np.diff(np.append(starts, n)))
    return fitted


def _scores(score: str, forecast: np.ndarray, outcome: np.ndarray) -> np.ndarray:
    if score == "brier":
        return (forecast - outcome) ** 2
    given = np.where(outcome == 1.0, forecast, 1.0 - forecast)  # probability of what happened
    return -np.log(np.maximum(given, NLL_FLOOR))


def corp_decomposition(
    forecast: np.ndarray, outcome: np.ndarray, score: str = "brier"
) -> Decomposition | None:
    """CORP decomposition of the mean binary ``score`` ("brier" or "log") of forecasts of an
    event; None for no cases.

    One case: f̂ equals the outcome, so MCB is the whole score and DSC = UNC = 0. One outcome
    only (all right or all wrong): UNC = DSC = 0 and everything is miscalibration. Forecasts of
    exactly 0 or 1 are fine (log loss floors them)."""
    if score not in SCORES:
        raise ValueError(f"score must be one of {SCORES}, got {score!r}")
    f, y = binary(forecast, outcome)
    if not f.size:
        return None
    return _decompose(score, f, y, isotonic_fit(f, y))


def _decompose(score: str, f: np.ndarray, y: np.ndarray, recalibrated: np.ndarray) -> Decomposition:
    n = f.size
    base_rate = np.full(n, fsum(y) / n)
    mean_f = fsum(_scores(score, f, y)) / n
    mean_r = fsum(_scores(score, recalibrated, y)) / n
    mean_u = fsum(_scores(score, base_rate, y)) / n
    return Decomposition(mean_f, mean_f - mean_r, mean_u - mean_r, mean_u)


def classwise_brier_decomposition(probs: np.ndarray, expected: np.ndarray) -> Decomposition | None:
    """DecGuard's multiclass Brier score split into summed one-vs-rest CORP components; None
    for no cases. With one label everything is 0."""
    p, e = multiclass(probs, expected)
    n, k = p.shape
    if not n:
        return None
    parts = [corp_decomposition(p[:, j], e == j, "brier") for j in range(k)]
    return Decomposition(
        *(math.fsum(getattr(d, name) for d in parts if d is not None) for name in _FIELDS)
    )


_FIELDS = ("score", "miscalibration", "discrimination", "uncertainty")


def score_decompositions(
    probs: np.ndarray, expected: np.ndarray
) -> dict[str, Decomposition | None]:
    """``brier`` (class-wise sum, = DecGuard's brier), ``brier_top_label`` and
    ``log_loss_top_label`` (confidence vs correct, one isotonic fit for both)."""
    p, e = multiclass(probs, expected)
    confidence, correct = top_label(p, e)
    top: dict[str, Decomposition | None] = {"brier": None, "log": None}
    if confidence.size:
        recalibrated = isotonic_fit(confidence, correct)
        top = {s: _decompose(s, confidence, correct, recalibrated) for s in SCORES}
    return {
        "brier": classwise_brier_decomposition(p, e),
        "brier_top_label": top["brier"],
        "log_loss_top_label": top["log"],
    }
