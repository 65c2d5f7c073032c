"""Honest calibration: does the model's confidence match how often it is right?

Accuracy alone does not answer that. Here: the mean top-label confidence next to the accuracy,
their gap (positive = over-confident), and the expected calibration error (ECE) with two
binnings. DecGuard's ECE uses equal-width bins, which on a confident model put nearly every
case in the top bin; equal-mass bins hold (about) the same number of cases each, so every bin
says something (Nixon et al. 2019, Roelofs et al. 2022). Both reliability tables have DecGuard's
row shape. :func:`metadata_groups` splits a result set by any metadata key, because a model
can be calibrated on average while over-confident on the hard cases.

Inputs are the top-label ``confidence`` and ``correct`` (selected == expected) columns of the
labeled, decided cases; sums are exact (``core.exact``). See docs/metrics.md.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from decguard_pipeline.core.exact import fsum
from decguard_pipeline.core.golden.metrics import expected_calibration_error, reliability

OVER, UNDER, CALIBRATED = "over-confident", "under-confident", "calibrated"
MISSING = "(missing)"  # the group of cases whose metadata lacks the key


def mean_confidence(confidence: np.ndarray) -> float | None:
    """Mean top-label confidence; None for no cases."""
    n = len(confidence)
    return fsum(confidence) / n if n else None


def confidence_gap(confidence: np.ndarray, correct: np.ndarray) -> float | None:
    """Mean confidence minus accuracy: > 0 over-confident, < 0 under-confident."""
    n = len(confidence)
    if not n:
        return None
    return fsum(confidence) / n - int(np.count_nonzero(correct)) / n


def gap_direction(gap: float | None, tolerance: float) -> str | None:
    """``over-confident`` / ``under-confident`` beyond ``tolerance``, else ``calibrated``."""
    if gap is None:
        return None
    if gap > tolerance:
        return OVER
    if gap < -tolerance:
        return UNDER
    return CALIBRATED


def equal_mass_edges(sorted_confidence: np.ndarray, n_bins: int) -> np.ndarray:
    """Bin start positions (plus the end) in ascending-sorted confidences.

    Nominal bin j holds ranks ``[j*n // n_bins, (j+1)*n // n_bins)``. A boundary that would
    separate equal confidences moves up past the last of them, so tied cases share a bin and
    the result does not depend on dataset order; bins left empty are dropped (with fewer
    distinct confidences than bins there are fewer bins)."""
    n = len(sorted_confidence)
    if not n:
        return np.zeros(1, dtype=np.int64)
    nominal = (np.arange(1, n_bins, dtype=np.int64) * n) // n_bins
    nominal = nominal[(nominal > 0) & (nominal < n)]
    at = sorted_confidence[nominal]
    first_of_run = np.searchsorted(sorted_confidence, at, side="left")
    after_run = np.searchsorted(sorted_confidence, at, side="right")
    moved = np.where(first_of_run == nominal, nominal, after_run)
    inner = moved[moved < n]
    return np.unique(np.concatenate(([0], inner, [n]))).astype(np.int64)


def equal_mass_reliability(
    confidence: np.ndarray, correct: np.ndarray, n_bins: int
) -> list[dict[str, Any]]:
    """Reliability table over equal-mass bins, in DecGuard's row shape; ``lower``/``upper``
    are the lowest and highest confidence in the bin."""
    confidence = np.asarray(confidence, dtype=np.float64)
    order = np.argsort(confidence, kind="stable")
    ranked = confidence[order]
    hits = np.asarray(correct, dtype=bool)[order]
    edges = equal_mass_edges(ranked, n_bins)
    rows = []
    for lo, hi in zip(edges[:-1].tolist(), edges[1:].tolist(), strict=True):
        count = hi - lo
        rows.append(
            {
                "lower": float(ranked[lo]),
                "upper": float(ranked[hi - 1]),
                "count": count,
                "mean_confidence": fsum(ranked[lo:hi]) / count,
                "accuracy": int(np.count_nonzero(hits[lo:hi])) / count,
            }
        )
    return rows


def calibration_summary(
    confidence: np.ndarray, correct: np.ndarray, *, n_bins: int, gap_tolerance: float
) -> dict[str, Any]:
    """The calibration section: gap, both ECEs and both reliability tables."""
    confidence = np.asarray(confidence, dtype=np.float64)
    correct = np.asarray(correct, dtype=bool)
    n = len(confidence)
    gap = confidence_gap(confidence, correct)
    width_bins = reliability(confidence, correct, n_bins)
    mass_bins = equal_mass_reliability(confidence, correct, n_bins)
    return {
        "n": n,
        "accuracy": int(np.count_nonzero(correct)) / n if n else None,
        "mean_confidence": mean_confidence(confidence),
        "confidence_gap": gap,
        "direction": gap_direction(gap, gap_tolerance),
        "gap_tolerance": gap_tolerance,
        "bins": n_bins,
        "ece_equal_width": expected_calibration_error(width_bins),
        "ece_equal_mass": expected_calibration_error(mass_bins),
        "reliability_equal_width": width_bins,
        "reliability_equal_mass": mass_bins,
    }


def _group_key(value: Any) -> str:
    # Metadata values are JSON; objects and lists group by their canonical text.
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def metadata_groups(metadata: list[dict[str, Any]], key: str) -> list[tuple[str, np.ndarray]]:
    """``(value, row indices)`` per distinct value of ``metadata[key]``, sorted by value;
    cases without the key (or with null) form a last group named ``(missing)``."""
    rows: dict[str, list[int]] = {}
    missing: list[int] = []
    for i, meta in enumerate(metadata):
        value = meta.get(key)
        if value is None:
            missing.append(i)
        else:
            rows.setdefault(_group_key(value), []).append(i)
    groups = [(value, np.asarray(rows[value], dtype=np.int64)) for value in sorted(rows)]
    if missing:
        groups.append((MISSING, np.asarray(missing, dtype=np.int64)))
    return groups
