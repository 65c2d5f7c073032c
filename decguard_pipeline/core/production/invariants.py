"""DecGuard's record invariants, column-wise (spec §11.1): what every checked record must
satisfy once its fields are typed, over whole columns at once. A flagged row is a suspect:
the one-record reference check (:func:`.records.record_problem`) confirms and words it."""

from __future__ import annotations

import numpy as np

from decguard_pipeline.core.exact import row_fsum
from decguard_pipeline.core.production.columns import ACTION_CODES

_EPS = np.finfo(np.float64).eps


def outside_tolerance(probs: np.ndarray, finite: np.ndarray, tolerance: float) -> np.ndarray:
    """``|fsum(row) - 1| > tolerance`` per finite row. The plain float sum is within
    k·eps·Σ|p| of the exact one, so only rows that close to the boundary need the exact sum."""
    safe = np.where(finite[:, None], probs, 0.0)
    rough = safe.sum(axis=1)
    margin = (probs.shape[1] + 2) * _EPS * (rough + 1.0)
    gap = np.abs(rough - 1.0)
    outside = gap > tolerance
    unsure = finite & (np.abs(gap - tolerance) <= margin)
    if unsure.any():
        exact = row_fsum(probs[unsure])
        outside[unsure] = np.abs(exact - 1.0) > tolerance
    return outside & finite


def semantic_suspects(
    probs: np.ndarray,
    selected: np.ndarray,
    confidence: np.ndarray,
    outcome: np.ndarray,
    correct: np.ndarray,
    action: np.ndarray,
    fallback: np.ndarray,
    tolerance: float,
) -> np.ndarray:
    """DecGuard's record invariants, column-wise: a distribution within tolerance, the
    selected label its first maximum, the confidence exactly its probability, a known outcome
    label, agreeing correctness, consistent routing. Labels are indices (-1 absent, -2 not a
    contract label); NaN probabilities flag the row."""
    n = len(selected)
    finite = np.isfinite(probs).all(axis=1) & (probs >= 0.0).all(axis=1)
    bad = ~finite | outside_tolerance(probs, finite, tolerance)
    safe = np.where(finite[:, None], probs, 0.0)
    best = np.argmax(safe, axis=1)  # first maximum, like DecGuard's strict '>' scan
    bad |= selected != best
    bad |= ~(confidence == safe[np.arange(n), best])
    bad |= ~((confidence >= 0.0) & (confidence <= 1.0))
    bad |= outcome == -2
    known = outcome >= 0
    bad |= known & (correct >= 0) & (correct != (outcome == best))
    bad |= (action == ACTION_CODES["fallback"]) & (fallback == 0)
    bad |= (action >= 0) & (action != ACTION_CODES["fallback"]) & (fallback == 1)
    return bad
