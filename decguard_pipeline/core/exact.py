"""Exact (correctly rounded) summation over NumPy arrays.

DecGuard sums with :func:`math.fsum`, so bit-identical numbers need the correctly rounded sum,
not NumPy's pairwise one. Whole columns go through ``math.fsum`` on a list (C speed). For short
rows (a distribution over K labels) :func:`row_fsum` adds the columns with error-free
transformations and proves, per row, that the rounded result equals ``fsum``; the rare rows it
cannot prove (a sum within a few ulps of a rounding tie) fall back to ``math.fsum``.
"""

from __future__ import annotations

import math

import numpy as np

_U = np.finfo(np.float64).eps / 2  # unit roundoff


def fsum(values: np.ndarray | list[float]) -> float:
    """``math.fsum`` of a 1-D array, in its order (the result does not depend on order)."""
    if isinstance(values, np.ndarray):
        values = values.tolist()
    return math.fsum(values)


def mean(values: np.ndarray) -> float | None:
    """``fsum / n``, or None when empty (DecGuard's ``mean``)."""
    n = len(values)
    return fsum(values) / n if n else None


def _two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = a + b
    bb = s - a
    err = (a - (s - bb)) + (b - bb)
    return s, err


def row_fsum(matrix: np.ndarray) -> np.ndarray:
    """Per-row ``math.fsum`` of a finite 2-D float array, vectorised over rows."""
    matrix = np.asarray(matrix, dtype=np.float64)
    n, k = matrix.shape
    if k == 0:
        return np.zeros(n)
    s = matrix[:, 0].copy()
    comp = np.zeros(n)  # float sum of the exact rounding errors
    err_abs = np.zeros(n)  # sum of |errors|, to bound comp's own rounding
    for j in range(1, k):
        s, err = _two_sum(s, matrix[:, j])
        comp += err
        err_abs += np.abs(err)
    result, tail = _two_sum(s, comp)
    # exact sum = result + tail + delta, |delta| <= k * u * err_abs (comp's accumulated rounding)
    slack = np.abs(tail) + 2.0 * k * _U * err_abs
    mag = np.abs(result)
    gap_up = np.spacing(mag)
    gap_down = mag - np.nextafter(mag, 0.0)
    half_gap = np.minimum(gap_up, np.where(mag > 0, gap_down, gap_up)) / 2.0
    unsure = ~(slack < half_gap)
    # a tail of exactly zero with no accumulated rounding means the sum is exact
    unsure &= ~((tail == 0.0) & (err_abs == 0.0))
    if unsure.any():  # one list of the unsure rows, summed at C speed (no NumPy scalar per row)
        result[unsure] = list(map(math.fsum, matrix[unsure].tolist()))
    return result


def rows_sum_within(matrix: np.ndarray, target: float, tolerance: float) -> bool:
    """Whether ``abs(row_fsum(row) - target) <= tolerance`` for every row of a finite,
    non-negative 2-D array. Rows whose plain sum is clear of the edge by more than its
    rounding could move it are decided from that sum; only the others (rare) are summed
    exactly. Plain recursive sums of K non-negative terms are off by at most
    (K - 1) * u * sum; the margin below is eight times that, plus the subtraction's rounding."""
    if not matrix.size:
        return True
    k = matrix.shape[1]
    sums = matrix.sum(axis=1)
    distance = np.abs(sums - target)
    margin = 8.0 * k * np.finfo(np.float64).eps * np.maximum(np.abs(sums), abs(target) + 1.0)
    edge = np.abs(distance - tolerance) <= margin
    if ((distance > tolerance) & ~edge).any():
        return False
    if edge.any():
        return bool((np.abs(row_fsum(matrix[edge]) - target) <= tolerance).all())
    return True
