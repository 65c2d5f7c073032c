"""Before and after a calibrator, on cases it was not fitted on, with a paired bootstrap
interval of every change.

The measures of one set of probabilities (:data:`MEASURES`): DecGuard's top-label ECE over
equal-width bins, the same over equal-mass bins (ties kept together), smooth ECE (Błasiok &
Nakkiran), DecGuard's Brier score and NLL (log 0 floored at 1e-15) and the accuracy of the
selected label (first of equal maxima, DecGuard's rule). The change is after − before; its
interval resamples the held-out cases with replacement (seeded), measures both sides on the
same resample, and takes the percentiles of the differences. An interval that excludes 0 is
a change the held-out cases can tell from noise.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from decguard_pipeline.core.calibration.binning import bin_index
from decguard_pipeline.core.calibration.inputs import top_label
from decguard_pipeline.core.calibration.smooth import smooth_ece
from decguard_pipeline.core.calibration.smooth_bootstrap import smooth_ece_weighted
from decguard_pipeline.core.calibration.summary import equal_mass_reliability
from decguard_pipeline.core.golden.metrics import (
    NLL_FLOOR,
    brier,
    expected_calibration_error,
    nll,
    reliability,
)
from decguard_pipeline.core.stats import BLOCK_ELEMENTS, percentile_interval, resample_counts

# name, what it is, whether lower is better
MEASURES: tuple[tuple[str, str, bool], ...] = (
    ("ece", "ECE, equal-width bins (DecGuard's)", True),
    ("ece_equal_mass", "ECE, equal-mass bins", True),
    ("smece", "smooth ECE", True),
    ("brier", "Brier score", True),
    ("nll", "NLL", True),
    ("accuracy", "accuracy", False),
)


def measures(probs: np.ndarray, expected: np.ndarray, n_bins: int) -> dict[str, float | None]:
    """Every measure of :data:`MEASURES` for one set of probabilities."""
    n = len(expected)
    if not n:
        return {name: None for name, _, _ in MEASURES}
    confidence, correct = top_label(probs, expected)
    right = correct.astype(bool)
    return {
        "ece": expected_calibration_error(reliability(confidence, right, n_bins)),
        "ece_equal_mass": expected_calibration_error(
            equal_mass_reliability(confidence, right, n_bins)
        ),
        "smece": smooth_ece(confidence, correct),
        "brier": brier(probs, expected),
        "nll": nll(probs[np.arange(n), expected]),
        "accuracy": float(np.count_nonzero(right)) / n,
    }


@dataclass(frozen=True)
class Comparison:
    n: int
    before: dict[str, float | None]
    after: dict[str, float | None]
    resamples: int
    confidence: float
    seed: int
    intervals: dict[str, tuple[float, float] | None]  # of after − before

    def rows(self) -> list[dict[str, Any]]:
        """One row per measure: before, after, change and its interval."""
        out = []
        for name, title, lower_is_better in MEASURES:
            b, a = self.before[name], self.after[name]
            interval = self.intervals.get(name)
            out.append(
                {
                    "measure": name,
                    "title": title,
                    "lower_is_better": lower_is_better,
                    "before": b,
                    "after": a,
                    "change": None if a is None or b is None else a - b,
                    "low": None if interval is None else interval[0],
                    "high": None if interval is None else interval[1],
                }
            )
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "resamples": self.resamples,
            "confidence": self.confidence,
            "seed": self.seed,
            "measures": self.rows(),
        }


class _Side:
    """One set of probabilities of the held-out cases, as per-case columns whose weighted
    sums give every measure of a resample (its case counts as weights)."""

    def __init__(self, probs: np.ndarray, expected: np.ndarray, n_bins: int) -> None:
        n = len(expected)
        confidence, correct = top_label(probs, expected)
        self.n, self.n_bins = n, n_bins
        self.confidence, self.correct = confidence, correct
        onehot = np.zeros_like(probs)
        onehot[np.arange(n), expected] = 1.0
        self.brier = ((probs - onehot) ** 2).sum(axis=1)
        self.nll = -np.log(np.maximum(probs[np.arange(n), expected], NLL_FLOOR))
        gap = correct - confidence
        # equal-width bins: the gap per bin is a matrix product
        self.width = np.zeros((n, n_bins))
        self.width[np.arange(n), bin_index(confidence, n_bins)] = gap
        # equal-mass bins: runs of equal confidence in sorted order
        self.order = np.argsort(confidence, kind="stable")
        ranked = confidence[self.order]
        self.runs = np.flatnonzero(np.concatenate(([True], ranked[1:] != ranked[:-1])))
        self.sorted_gap = gap[self.order]
        nominal = (np.arange(1, n_bins, dtype=np.int64) * n) // n_bins
        self.nominal = nominal[(nominal > 0) & (nominal < n)]

    def resampled(self, counts: np.ndarray) -> dict[str, np.ndarray]:
        """Every measure of each resample (``counts``: rows × n times each case is drawn)."""
        n = self.n
        equal_mass = self._equal_mass(counts)
        return {
            "ece": np.abs(counts @ self.width).sum(axis=1) / n,
            "ece_equal_mass": equal_mass,
            "smece": smooth_ece_weighted(self.confidence, self.correct, counts),
            "brier": counts @ self.brier / n,
            "nll": counts @ self.nll / n,
            "accuracy": counts @ self.correct / n,
        }

    def _equal_mass(self, counts: np.ndarray) -> np.ndarray:
        """The equal-mass ECE of each resample: a run of equal confidences starting at rank
        s of the resample falls in bin #{nominal boundaries <= s} (a boundary inside a run
        moves past it, as ``summary.equal_mass_edges`` moves it)."""
        rows = counts.shape[0]
        drawn = counts[:, self.order]
        sizes = np.add.reduceat(drawn, self.runs, axis=1)
        gaps = np.add.reduceat(drawn * self.sorted_gap, self.runs, axis=1)
        starts = np.cumsum(sizes, axis=1) - sizes
        bins = np.searchsorted(self.nominal, starts.ravel(), side="right").reshape(starts.shape)
        keys = (np.arange(rows)[:, None] * self.n_bins + bins).ravel()
        per_bin = np.bincount(keys, gaps.ravel(), minlength=rows * self.n_bins)
        return np.abs(per_bin.reshape(rows, self.n_bins)).sum(axis=1) / self.n


def compare(
    raw: np.ndarray,
    calibrated: np.ndarray,
    expected: np.ndarray,
    *,
    n_bins: int = 10,
    resamples: int = 200,
    confidence: float = 0.95,
    seed: int = 0,
) -> Comparison:
    """Every measure before (``raw``) and after (``calibrated``) on the same cases, and the
    paired bootstrap interval of each change (none with ``resamples`` 0 or fewer than two
    cases): both sides are measured on the same resamples of the cases."""
    e = np.asarray(expected, dtype=np.int64)
    n = len(e)
    raw = np.asarray(raw, dtype=np.float64)
    calibrated = np.asarray(calibrated, dtype=np.float64)
    before, after = measures(raw, e, n_bins), measures(calibrated, e, n_bins)
    intervals: dict[str, tuple[float, float] | None] = {}
    if resamples and n >= 2:
        sides = _Side(raw, e, n_bins), _Side(calibrated, e, n_bins)
        changes = {name: np.empty(resamples) for name, _, _ in MEASURES}
        rng = np.random.default_rng(seed)
        block = max(1, min(resamples, BLOCK_ELEMENTS // n))
        for start in range(0, resamples, block):
            rows = min(block, resamples - start)
            counts = resample_counts(n, rows, rng)
            b, a = (side.resampled(counts) for side in sides)
            for name in changes:
                changes[name][start : start + rows] = a[name] - b[name]
        intervals = {name: percentile_interval(v, confidence) for name, v in changes.items()}
    return Comparison(n, before, after, resamples, confidence, seed, intervals)
