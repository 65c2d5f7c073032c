"""Abstention with a guarantee: the confidence threshold whose selective error rate stays
below α with probability at least 1 − δ (Learn then Test: Angelopoulos, Bates, Candès, Jordan
& Lei 2021, "Learn then test: calibrating predictive algorithms to achieve risk control").

At threshold λ the model keeps the cases with confidence >= λ (DecGuard's rule) and hands the
rest to a person; its selective risk R(λ) is the error rate among the kept cases. Picking the
λ whose *observed* risk is just under α overshoots about half of the time. Instead, for each
candidate λ test the null hypothesis "R(λ) > α": with n_λ cases kept and e_λ of them wrong,
the p-value is the binomial tail P(Binomial(n_λ, α) <= e_λ) (how surprising so few errors
would be if the risk were α). The candidates are tested in a fixed order from high to low
(fixed-sequence testing): each test at level δ, stopping at the first that fails. Any false
rejection needs the first true null hypothesis of the fixed order to be rejected, which happens
with probability <= δ, so the family-wise error stays <= δ without a correction for the number
of thresholds. The threshold returned is the lowest one rejected before the first failure, so
that P(R(λ̂) <= α) >= 1 − δ for exchangeable (e.g. i.i.d.) cases. (Each p-value is exact given
the number of cases kept; the simulation in the tests checks the bound end to end.)

Candidates are the fixed grid 1.000, 0.999, …, 0.000 (chosen before seeing the data); a
threshold that keeps so few cases that even zero errors could not reject ((1 − α)^n_λ > δ)
is not a test yet, and the sequence starts after the last of them. That rule reads only the
confidences, never the correctness. None when no threshold passes (too few cases, or a
risk above α everywhere).

The binomial tail is the regularised incomplete beta function I_{1−α}(n − e, e + 1),
evaluated by its continued fraction (vectorised over candidates); its relative error is about
n × 1e-15 (from the log-gamma terms), far below anything that could move a decision.
See docs/metrics.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from decguard_pipeline.core.calibration.inputs import binary

GRID = np.arange(1000, -1, -1) / 1000  # candidate thresholds, high to low
_TINY = 1e-300
_EPS = 1e-15
_MAX_TERMS = 100_000


@dataclass(frozen=True)
class Abstention:
    """The guaranteed threshold (None when none passes) with what it yields on these cases."""

    alpha: float
    delta: float
    threshold: float | None  # keep cases with confidence >= threshold
    kept: int  # cases kept at the threshold (0 without one)
    coverage: float | None  # kept / cases
    selective_risk: float | None  # observed error rate of the kept cases
    p_value: float | None  # of "risk > alpha" at the threshold


_lgamma = np.vectorize(math.lgamma, otypes=[np.float64])


def _guard(v: np.ndarray) -> np.ndarray:
    return np.where(np.abs(v) < _TINY, _TINY, v)


def _continued_fraction(a: np.ndarray, b: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The continued fraction of the incomplete beta function (modified Lentz), vectorised
    over the entries still converging; quick for x < (a + 1) / (a + b + 2), and finite for an
    integer b (the fraction ends when m reaches b)."""
    h = 1.0 / _guard(1.0 - (a + b) * x / (a + 1.0))
    d, c = h.copy(), np.ones_like(x)
    live = np.arange(len(x))
    for m in range(1, _MAX_TERMS):
        if not live.size:
            break
        al, bl, xl = a[live], b[live], x[live]
        dl, cl, hl = d[live], c[live], h[live]
        m2 = 2 * m
        for aa in (
            m * (bl - m) * xl / ((al - 1.0 + m2) * (al + m2)),
            -(al + m) * (al + bl + m) * xl / ((al + m2) * (al + 1.0 + m2)),
        ):
            dl = 1.0 / _guard(1.0 + aa * dl)
            cl = _guard(1.0 + aa / cl)
            step = dl * cl
            hl = hl * step
        d[live], c[live], h[live] = dl, cl, hl
        live = live[np.abs(step - 1.0) > _EPS]
    return h


def regularized_beta(x: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """I_x(a, b) for a, b > 0 and x in [0, 1], elementwise."""
    x, a, b = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (x, a, b)))
    out = np.where(x <= 0.0, 0.0, 1.0)
    inner = (x > 0.0) & (x < 1.0)
    if inner.any():
        xi, ai, bi = x[inner], a[inner], b[inner]
        log_front = (
            _lgamma(ai + bi) - _lgamma(ai) - _lgamma(bi) + ai * np.log(xi) + bi * np.log1p(-xi)
        )
        front = np.exp(log_front)
        direct = xi < (ai + 1.0) / (ai + bi + 2.0)
        value = np.empty_like(xi)
        if direct.any():
            d = direct
            value[d] = front[d] * _continued_fraction(ai[d], bi[d], xi[d]) / ai[d]
        if (~direct).any():
            r = ~direct
            value[r] = 1.0 - front[r] * _continued_fraction(bi[r], ai[r], 1.0 - xi[r]) / bi[r]
        out[inner] = np.clip(value, 0.0, 1.0)
    return out


def binomial_cdf(k: np.ndarray, n: np.ndarray, p: float) -> np.ndarray:
    """P(Binomial(n, p) <= k), elementwise for integer arrays k, n (n >= 0)."""
    k = np.asarray(k, dtype=np.int64)
    n = np.asarray(n, dtype=np.int64)
    k, n = np.broadcast_arrays(k, n)
    out = np.where(k >= n, 1.0, 0.0)
    inside = (k >= 0) & (k < n)
    if inside.any():
        out[inside] = regularized_beta(
            np.full(int(inside.sum()), 1.0 - p), n[inside] - k[inside], k[inside] + 1
        )
    return out


def guaranteed_threshold(
    confidence: np.ndarray,
    correct: np.ndarray,
    *,
    alpha: float,
    delta: float,
    thresholds: np.ndarray | None = None,
) -> Abstention:
    """The lowest confidence threshold whose selective risk is certified <= ``alpha`` with
    probability >= 1 − ``delta`` (Learn then Test, fixed-sequence binomial tests).

    ``thresholds`` (default :data:`GRID`) are tested from high to low whatever their order.
    No cases, all wrong, or too few cases for (1 − α)^n <= δ: no threshold. All right with
    enough cases: the lowest threshold that keeps every case that matters (coverage 1)."""
    if not 0 < alpha < 1 or not 0 < delta < 1:
        raise ValueError("alpha and delta must lie strictly between 0 and 1")
    c, right = binary(confidence, correct)
    n = c.size
    none = Abstention(alpha, delta, None, 0, None, None, None)
    if not n:
        return none
    grid = np.sort(np.asarray(GRID if thresholds is None else thresholds, dtype=np.float64))[::-1]
    order = np.argsort(-c, kind="stable")
    ranked, wrong = c[order], np.cumsum(1.0 - right[order])
    kept = np.searchsorted(-ranked, -grid, side="right")  # cases with confidence >= threshold
    errors = np.where(kept > 0, wrong[np.maximum(kept - 1, 0)], 0.0).astype(np.int64)
    testable = kept * math.log1p(-alpha) <= math.log(delta)
    if not testable.any():
        return none
    first = int(np.argmax(testable))
    candidates = np.arange(first, len(grid))
    # thresholds between the same two confidences keep the same cases: one test each
    distinct, back = np.unique(kept[candidates], return_inverse=True)
    last_of = np.searchsorted(kept[candidates], distinct, side="right") - 1
    p_values = binomial_cdf(errors[candidates][last_of], distinct, alpha)[back]
    failed = np.flatnonzero(p_values > delta)
    passed = len(candidates) if not failed.size else int(failed[0])
    if not passed:
        return none
    at = candidates[passed - 1]
    k = int(kept[at])
    return Abstention(
        alpha=alpha,
        delta=delta,
        threshold=float(grid[at]),
        kept=k,
        coverage=k / n,
        selective_risk=int(errors[at]) / k,
        p_value=float(p_values[passed - 1]),
    )
