"""Binned calibration errors beyond DecGuard's: class-wise ECE and the debiased ℓ2 ECE.

* **Top-label ECE** is DecGuard's ``ece``: equal-width bins of the highest probability, the
  case-weighted mean |accuracy − mean confidence|. It asks "when the model says 80 %, is its
  *chosen* label right 80 % of the time?" and ignores the other labels' probabilities.
* **Class-wise ECE** (Kull et al. 2019, "Beyond temperature scaling") asks it of every label:
  for label j the forecast is p_j and the outcome is "expected is j" (one-vs-rest), binned
  with DecGuard's equal-width bins; the class-wise ECE is the unweighted mean over all k
  labels. A model can be top-label calibrated and still give a rare label probabilities far
  from its frequency; class-wise ECE sees that.
* **Debiased ℓ2 ECE** (Kumar, Liang & Ma 2019, "Verified uncertainty calibration"): the binned
  squared gap (ȳ_b − f̄_b)² overstates the true squared gap by the sampling variance of ȳ_b,
  estimated without bias by ȳ_b(1 − ȳ_b)/(n_b − 1); subtracting it per bin and taking the
  root of the case-weighted sum (0 if negative) gives an estimate of the ℓ2 calibration error
  whose bias shrinks much faster than the plug-in one's: the number to read on the 20–200-case
  golden sets where plug-in ECE mostly measures noise. Bins are the pipeline's equal-mass bins
  (``summary.equal_mass_edges``: tied confidences share a bin); a bin of one case contributes
  0 (no variance estimate), as in the reference package ``uncertainty-calibration``.

All functions take arrays and return a float (None when there are no cases). See
docs/metrics.md.
"""

from __future__ import annotations

import numpy as np

from decguard_pipeline.core.calibration.inputs import binary, multiclass, top_label
from decguard_pipeline.core.calibration.summary import equal_mass_edges
from decguard_pipeline.core.golden.metrics import expected_calibration_error, reliability


def _equal_width_bin(p: np.ndarray, n_bins: int) -> np.ndarray:
    """DecGuard's bin index: bin i holds (i/n, (i+1)/n], bin 0 also holds 0."""
    edges = (np.arange(n_bins) + 1) / n_bins
    return np.minimum(np.searchsorted(edges, p, side="left"), n_bins - 1)


def top_label_ece(probs: np.ndarray, expected: np.ndarray, n_bins: int = 10) -> float | None:
    """DecGuard's ECE (equal-width bins of the top-label confidence), bit-identical to the
    report's ``ece``; None for no cases."""
    p, e = multiclass(probs, expected)
    confidence, correct = top_label(p, e)
    return expected_calibration_error(reliability(confidence, correct.astype(bool), n_bins))


def per_label_ece(probs: np.ndarray, expected: np.ndarray, n_bins: int = 10) -> np.ndarray:
    """One-vs-rest equal-width ECE of every label, shape (k,); empty for no cases.

    For label j: bin p_j, and per bin take |Σ outcome − Σ p_j| / n (the bin's weight times
    its |accuracy − mean probability|)."""
    p, e = multiclass(probs, expected)
    n, k = p.shape
    if not n:
        return np.zeros(0)
    keys = (_equal_width_bin(p, n_bins) + np.arange(k) * n_bins).ravel()
    onehot = np.zeros_like(p)
    onehot[np.arange(n), e] = 1.0
    size = k * n_bins
    gap = np.bincount(keys, onehot.ravel(), minlength=size) - np.bincount(
        keys, p.ravel(), minlength=size
    )
    return np.abs(gap).reshape(k, n_bins).sum(axis=1) / n


def classwise_ece(probs: np.ndarray, expected: np.ndarray, n_bins: int = 10) -> float | None:
    """Class-wise ECE: the mean of :func:`per_label_ece` over all k labels; None for no cases.

    Labels that never occur still count (their probabilities should then be near 0). With
    one label, or with every probability 0 or 1 and right, it is 0."""
    per_label = per_label_ece(probs, expected, n_bins)
    return float(per_label.mean()) if per_label.size else None


def _equal_mass_bins(f: np.ndarray, y: np.ndarray, n_bins: int) -> tuple[np.ndarray, ...]:
    """Per equal-mass bin: count, mean forecast, mean outcome."""
    order = np.argsort(f, kind="stable")
    f, y = f[order], y[order]
    edges = equal_mass_edges(f, n_bins)
    starts = edges[:-1]
    counts = np.diff(edges)
    return (
        counts,
        np.add.reduceat(f, starts) / counts,
        np.add.reduceat(y, starts) / counts,
    )


def l2_ece(
    forecast: np.ndarray, outcome: np.ndarray, n_bins: int = 10, *, debias: bool = True
) -> float | None:
    """ℓ2 calibration error over equal-mass bins, debiased (Kumar et al.) by default.

    ``sqrt(max(0, Σ_b (n_b/n) [(ȳ_b − f̄_b)² − ȳ_b(1 − ȳ_b)/(n_b − 1)]))``, where a bin of one
    case contributes 0 (as in the reference package). ``debias=False`` gives the plug-in
    ``sqrt(Σ_b (n_b/n)(ȳ_b − f̄_b)²)``. None for fewer than two cases (nothing to debias with);
    0 when every bin's gap is explained by sampling noise."""
    f, y = binary(forecast, outcome)
    n = f.size
    if n < 2:
        return None
    counts, mean_f, mean_y = _equal_mass_bins(f, y, n_bins)
    squared = (mean_y - mean_f) ** 2
    if debias:
        several = counts >= 2
        variance = mean_y * (1.0 - mean_y) / np.maximum(counts - 1, 1)
        squared = np.where(several, squared - variance, 0.0)
    total = float(np.dot(counts / n, squared))
    return max(total, 0.0) ** 0.5


def debiased_ece(forecast: np.ndarray, outcome: np.ndarray, n_bins: int = 10) -> float | None:
    """The debiased ℓ2 ECE of :func:`l2_ece` (top-label use: confidence and correct)."""
    return l2_ece(forecast, outcome, n_bins, debias=True)
