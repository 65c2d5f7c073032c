"""Golden metrics, one function per metric, over NumPy columns.

Every function takes label indices (``-1`` = unlabeled/errored, filtered by the caller) or
float columns and returns a Python float, or None when the population is empty. Sums are
exact (``math.fsum`` semantics) in dataset order, so each number is bit-identical to
DecGuard 0.1's; transcendental functions go through :mod:`math` for the same reason.
Definitions follow scikit-learn (F1, NLL) and Guo et al. 2017 (ECE); see docs/metrics.md.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from decguard_pipeline.core.exact import fsum, mean, row_fsum
from decguard_pipeline.core.results import CaseResults

NLL_FLOOR = 1e-15  # a certain miss costs -ln(1e-15) ~ 34.5 instead of infinity
PERCENTILES = (50, 90, 95, 99)


def accuracy(expected: np.ndarray, predicted: np.ndarray) -> float | None:
    """Share of ``predicted == expected``; None for no cases."""
    n = len(expected)
    return int(np.count_nonzero(expected == predicted)) / n if n else None


def per_label_counts(
    expected: np.ndarray, predicted: np.ndarray, n_labels: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(true positives, times predicted, support) per label index."""
    tp = np.bincount(expected[expected == predicted], minlength=n_labels)
    predicted_n = np.bincount(predicted, minlength=n_labels)
    support = np.bincount(expected, minlength=n_labels)
    return tp, predicted_n, support


def precision_recall_f1(
    tp: np.ndarray, predicted_n: np.ndarray, support: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-label precision, recall and F1; an undefined ratio is 0 (scikit-learn's default)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = np.where(predicted_n > 0, tp / np.maximum(predicted_n, 1), 0.0)
        recall = np.where(support > 0, tp / np.maximum(support, 1), 0.0)
        denom = precision + recall
        f1 = np.where(denom > 0, 2 * precision * recall / np.where(denom > 0, denom, 1.0), 0.0)
    return precision, recall, f1


def macro_f1(expected: np.ndarray, predicted: np.ndarray, n_labels: int) -> float | None:
    """Unweighted mean F1 over the labels occurring in ``expected`` or ``predicted``."""
    tp, predicted_n, support = per_label_counts(expected, predicted, n_labels)
    present = (support > 0) | (predicted_n > 0)
    if not present.any():
        return None
    f1 = precision_recall_f1(tp, predicted_n, support)[2]
    return fsum(f1[present]) / int(present.sum())


def ordinal_mae(expected: np.ndarray, predicted: np.ndarray) -> float | None:
    """Mean absolute distance in scale steps between predicted and expected level."""
    n = len(expected)
    return int(np.abs(predicted - expected).sum()) / n if n else None


def nll(p_expected: np.ndarray) -> float | None:
    """Mean negative natural log of the probability given to the expected label."""
    if not len(p_expected):
        return None
    clipped = np.maximum(p_expected, NLL_FLOOR).tolist()
    return math.fsum([-v for v in map(math.log, clipped)]) / len(clipped)


def brier(probs: np.ndarray, expected: np.ndarray) -> float | None:
    """Multi-class Brier score: mean over cases of sum_k (p_k - y_k)^2, in [0, 2]."""
    n = len(expected)
    if not n:
        return None
    onehot = np.zeros_like(probs)
    onehot[np.arange(n), expected] = 1.0
    return mean(row_fsum((probs - onehot) ** 2))


def reliability(confidence: np.ndarray, correct: np.ndarray, n_bins: int) -> list[dict[str, Any]]:
    """Equal-width bins of top-label confidence: bin i holds (i/n, (i+1)/n], bin 0 also 0."""
    edges = (np.arange(n_bins) + 1) / n_bins
    which = np.minimum(np.searchsorted(edges, confidence, side="left"), n_bins - 1)
    order = np.argsort(which, kind="stable")
    counts = np.bincount(which, minlength=n_bins)
    starts = np.concatenate(([0], np.cumsum(counts)))
    sorted_conf = confidence[order]
    sorted_correct = correct[order]
    bins = []
    for i in range(n_bins):
        lo, hi = int(starts[i]), int(starts[i + 1])
        count = hi - lo
        bins.append(
            {
                "lower": i / n_bins,
                "upper": float(edges[i]),
                "count": count,
                "mean_confidence": fsum(sorted_conf[lo:hi]) / count if count else None,
                "accuracy": int(np.count_nonzero(sorted_correct[lo:hi])) / count if count else None,
            }
        )
    return bins


def expected_calibration_error(bins: list[dict[str, Any]]) -> float | None:
    """Count-weighted mean |accuracy - mean confidence| over non-empty bins."""
    total = sum(b["count"] for b in bins)
    if not total:
        return None
    return math.fsum(
        b["count"] / total * abs(b["accuracy"] - b["mean_confidence"]) for b in bins if b["count"]
    )


def percentile(values: np.ndarray, q: float) -> float | None:
    """Linear interpolation between closest ranks (NumPy's default definition)."""
    n = len(values)
    if not n:
        return None
    ordered = np.sort(values).tolist()
    return _percentile_sorted(ordered, q)


def _percentile_sorted(ordered: list[float], q: float) -> float:
    position = (len(ordered) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def latency_summary(latency: np.ndarray) -> dict[str, Any]:
    n = len(latency)
    if not n:
        return {"n": 0, "mean_ms": None, "p50_ms": None, "p90_ms": None, "p95_ms": None,
                "p99_ms": None, "max_ms": None}  # fmt: skip
    ordered = np.sort(latency).tolist()
    out: dict[str, Any] = {"n": n, "mean_ms": fsum(latency) / n}
    for q in PERCENTILES:
        out[f"p{q}_ms"] = _percentile_sorted(ordered, q)
    out["max_ms"] = ordered[-1]
    return out


def golden_metrics(
    results: CaseResults, *, calibration_bins: int, confidence_threshold: float | None
) -> dict[str, Any]:
    """The report's ``metrics`` section."""
    spec = results.spec
    k = len(spec.labels)
    ok = results.ok
    exp_all = results.expected_index
    labeled = ok & (exp_all >= 0)
    expected = exp_all[labeled]
    predicted = results.selected[labeled]
    probs = results.probs[labeled]
    conf_labeled = results.confidence[labeled]
    n_total = len(results)
    n_ok = int(ok.sum())
    n_labeled = int(labeled.sum())
    errors = results.errors_by_kind()
    n_err = sum(errors.values())

    if n_labeled:
        tp, predicted_n, support = per_label_counts(expected, predicted, k)
        precision, recall, f1 = precision_recall_f1(tp, predicted_n, support)
        per_label = {
            label: {
                "precision": float(precision[i]),
                "recall": float(recall[i]),
                "f1": float(f1[i]),
                "support": int(support[i]),
            }
            for i, label in enumerate(spec.labels)
        }
    else:
        per_label = {}
    bins = reliability(conf_labeled, predicted == expected, calibration_bins)
    p_expected = probs[np.arange(n_labeled), expected]

    selective = None
    if confidence_threshold is not None:
        covered = results.confidence[ok] >= confidence_threshold
        covered_labeled = conf_labeled >= confidence_threshold
        coverage = int(covered.sum()) / n_ok if n_ok else None
        selective = {
            "threshold": confidence_threshold,
            "n": n_ok,
            "coverage": coverage,
            "abstention_rate": None if coverage is None else 1.0 - coverage,
            "selective_accuracy": accuracy(expected[covered_labeled], predicted[covered_labeled]),
            "n_covered_labeled": int(covered_labeled.sum()),
        }

    return {
        "counts": {
            "total": n_total,
            "succeeded": n_ok,
            "errored": n_err,
            "labeled": n_labeled,
            "errors_by_kind": errors,
            "error_rate": n_err / n_total if n_total else 0.0,
        },
        "classification": {
            "n": n_labeled,
            "accuracy": accuracy(expected, predicted),
            "macro_f1": macro_f1(expected, predicted, k),
            "per_label": per_label,
            "ordinal_mae": ordinal_mae(expected, predicted) if spec.type == "score" else None,
        },
        "calibration": {
            "n": n_labeled,
            "ece": expected_calibration_error(bins),
            "brier": brier(probs, expected),
            "nll": nll(p_expected),
            "bins": calibration_bins,
            "reliability": bins,
        },
        "selective": selective,
        "latency": latency_summary(results.latency_ms[ok]),
    }


def gate_values(metrics: dict[str, Any]) -> dict[str, float | None]:
    """The flat metric values golden gates address."""
    selective = metrics["selective"] or {}
    return {
        "accuracy": metrics["classification"]["accuracy"],
        "macro_f1": metrics["classification"]["macro_f1"],
        "ordinal_mae": metrics["classification"]["ordinal_mae"],
        "nll": metrics["calibration"]["nll"],
        "brier": metrics["calibration"]["brier"],
        "ece": metrics["calibration"]["ece"],
        "coverage": selective.get("coverage"),
        "abstention_rate": selective.get("abstention_rate"),
        "selective_accuracy": selective.get("selective_accuracy"),
        "error_rate": metrics["counts"]["error_rate"],
        "latency_p95_ms": metrics["latency"]["p95_ms"],
    }
