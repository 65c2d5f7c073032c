"""Binning calibrators on probabilities, one-vs-rest: isotonic regression and histogram binning
(Zadrozny & Elkan 2001, 2002), each label's probability mapped on its own and every row
renormalised to sum to 1.

* **Isotonic**: for label j, the nondecreasing function of p_j closest (least squares) to the
  outcome "expected is j" on the calibration cases (pool-adjacent-violators,
  ``decomposition.isotonic_fit``), read between the fitted points by linear interpolation and
  held constant beyond the first and last (scikit-learn's ``IsotonicRegression`` with
  ``out_of_bounds="clip"`` gives the same map).
* **Histogram**: for label j, DecGuard's equal-width bins of p_j (bin i holds (i/B, (i+1)/B],
  bin 0 also 0); a bin maps to the share of its calibration cases whose expected label is j,
  an empty bin to its centre.

Both can map a label to 0 and can change the selected label; a row whose mapped values are
all 0 keeps its raw probabilities (nothing left to normalise). They work on probabilities,
not logits, so they calibrate a one-hot decider too (temperature cannot: log 0 stays −inf).
"""

from __future__ import annotations

import numpy as np

from decguard_pipeline.core.calibration.decomposition import isotonic_fit


def renormalised(mapped: np.ndarray, raw: np.ndarray) -> np.ndarray:
    """Rows of ``mapped`` scaled to sum to 1; an all-zero row is the raw one."""
    total = mapped.sum(axis=1, keepdims=True)
    empty = total[:, 0] <= 0.0
    out = np.divide(mapped, total, out=np.zeros_like(mapped), where=total > 0.0)
    out[empty] = raw[empty]
    return out


def isotonic_table(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The fitted map as points ``(thresholds, values)``: increasing x, nondecreasing values;
    of each run of equal values only its first and last point (what interpolation needs)."""
    fitted = isotonic_fit(x, y)
    xs, first = np.unique(x, return_index=True)
    ys = fitted[first]
    if len(xs) <= 2:
        return xs, ys
    change = np.diff(ys) != 0.0
    keep = np.concatenate(([True], change)) | np.concatenate((change, [True]))
    return xs[keep], ys[keep]


def fit_isotonic(probs: np.ndarray, expected: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """One ``(thresholds, values)`` table per label."""
    k = probs.shape[1]
    return [isotonic_table(probs[:, j], (expected == j).astype(np.float64)) for j in range(k)]


def apply_isotonic(probs: np.ndarray, tables: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    mapped = np.column_stack([np.interp(probs[:, j], xs, ys) for j, (xs, ys) in enumerate(tables)])
    return renormalised(mapped, probs)


def bin_index(p: np.ndarray, n_bins: int) -> np.ndarray:
    """DecGuard's equal-width bin of each probability."""
    edges = (np.arange(n_bins) + 1) / n_bins
    return np.minimum(np.searchsorted(edges, p, side="left"), n_bins - 1)


def fit_histogram(
    probs: np.ndarray, expected: np.ndarray, n_bins: int
) -> tuple[np.ndarray, np.ndarray]:
    """``(values (k, B), counts (k, B))``: per label and bin, the share of cases whose
    expected label is that label (the bin's centre when it is empty) and how many."""
    k = probs.shape[1]
    values = np.empty((k, n_bins))
    counts = np.empty((k, n_bins), dtype=np.int64)
    centres = (np.arange(n_bins) + 0.5) / n_bins
    for j in range(k):
        which = bin_index(probs[:, j], n_bins)
        count = np.bincount(which, minlength=n_bins)
        hits = np.bincount(which, weights=(expected == j).astype(np.float64), minlength=n_bins)
        values[j] = np.divide(hits, count, out=centres.copy(), where=count > 0)
        counts[j] = count
    return values, counts


def apply_histogram(probs: np.ndarray, values: np.ndarray) -> np.ndarray:
    n_bins = values.shape[1]
    mapped = np.column_stack(
        [values[j][bin_index(probs[:, j], n_bins)] for j in range(probs.shape[1])]
    )
    return renormalised(mapped, probs)
