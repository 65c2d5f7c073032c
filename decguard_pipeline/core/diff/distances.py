"""Distances between the two runs' distributions for the same case, one row per case pair.

Both are exact in DecGuard's sense: per-row sums are ``math.fsum`` (``row_fsum``) and
``log2`` goes through :mod:`math`, so every value equals the reference's bit for bit.
"""

from __future__ import annotations

import math

import numpy as np

from decguard_pipeline.core.exact import row_fsum


def _at_most_one(values: np.ndarray) -> np.ndarray:
    # Python's min(1.0, v): v when v < 1, else 1.0
    return np.where(values < 1.0, values, 1.0)


def tv_distances(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Total variation distance per row: min(1, ½·fsum|p − q|)."""
    return _at_most_one(0.5 * row_fsum(np.abs(p - q)))


def _log2(values: np.ndarray) -> np.ndarray:
    flat = values.ravel().tolist()
    return np.fromiter(map(math.log2, flat), dtype=np.float64, count=len(flat)).reshape(
        values.shape
    )


def js_divergences(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Jensen–Shannon divergence in bits per row, clamped to [0, 1].

    Terms ``½a·log2(a/m)`` exist only where ``a > 0`` (likewise for ``b``); absent terms
    are zeros, which leave an exact sum unchanged."""
    m = (p + q) / 2.0
    terms = []
    for a in (p, q):
        present = a > 0.0
        ratio = np.where(present, a / np.where(present, m, 1.0), 1.0)
        terms.append(np.where(present, 0.5 * a * _log2(ratio), 0.0))
    total = row_fsum(np.hstack(terms))
    # Python's min(1.0, max(0.0, s)); a rounding residue below zero becomes 0.0
    return _at_most_one(np.where(total > 0.0, total, 0.0))
