"""Input checks shared by the calibration measures.

Two shapes come in: a *binary* view, one forecast probability per case and whether the event
happened (top-label: confidence and correct), and a *multiclass* view, an n×k probability
matrix and the index of the expected label per case. Both are checked once, here, so every
measure can assume finite probabilities in [0, 1]. A wrong shape or value is a programming
error of the caller (the pipeline validates model answers long before), so it raises
``ValueError`` with what was wrong.
"""

from __future__ import annotations

import numpy as np


def binary(forecast: np.ndarray, outcome: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(forecast, outcome)`` as float64 arrays of equal length; outcome is 0.0 or 1.0."""
    f = np.asarray(forecast, dtype=np.float64).reshape(-1)
    y_raw = np.asarray(outcome)
    if y_raw.dtype != bool and y_raw.size and not np.isin(y_raw, (0, 1)).all():
        raise ValueError("outcome must be boolean or 0/1")
    y = y_raw.astype(np.float64).reshape(-1)
    if f.shape != y.shape:
        raise ValueError(f"forecast has {f.size} values but outcome has {y.size}")
    if f.size and not (np.isfinite(f).all() and f.min() >= 0.0 and f.max() <= 1.0):
        raise ValueError("forecast probabilities must be finite and within [0, 1]")
    return f, y


def multiclass(probs: np.ndarray, expected: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(probs (n, k) float64, expected (n,) int64)``; every expected index within [0, k)."""
    p = np.asarray(probs, dtype=np.float64)
    if p.ndim != 2:
        raise ValueError(f"probabilities must be an (n, k) matrix, got shape {p.shape}")
    e = np.asarray(expected)
    if e.ndim != 1 or len(e) != p.shape[0]:
        raise ValueError(f"expected must hold one label index per row ({p.shape[0]})")
    if e.size and not np.issubdtype(e.dtype, np.integer):
        raise ValueError("expected must hold integer label indices")
    e = e.astype(np.int64)
    n, k = p.shape
    if n and k == 0:
        raise ValueError("probabilities need at least one label column")
    if n and (e.min() < 0 or e.max() >= k):
        raise ValueError(f"expected label indices must lie in [0, {k})")
    if p.size and not (np.isfinite(p).all() and p.min() >= 0.0 and p.max() <= 1.0):
        raise ValueError("probabilities must be finite and within [0, 1]")
    return p, e


def top_label(probs: np.ndarray, expected: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(confidence, correct)``: the highest probability per row and whether its label (the
    first of equal maxima, DecGuard's selection) is the expected one."""
    n = probs.shape[0]
    if not n:
        return np.zeros(0), np.zeros(0)
    selected = np.argmax(probs, axis=1)
    confidence = probs[np.arange(n), selected]
    return confidence, (selected == expected).astype(np.float64)
