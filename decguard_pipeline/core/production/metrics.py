"""Production metrics (spec §11.2) over record columns.

The formulas are the golden ones (:mod:`core.metrics`) applied to what production records
know: correctness for accuracy and ECE, the label outcome for Brier and NLL, the confidence
of every record, and the routing fields where present. Every population skips records that
do not know the field: a missing outcome is never counted as wrong, a missing action never
as accepted. Sums are exact and every number equals DecGuard's bit for bit.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from decguard_pipeline.core.contract import Evaluation
from decguard_pipeline.core.exact import fsum
from decguard_pipeline.core.metrics import expected_calibration_error, reliability
from decguard_pipeline.core.production.columns import ABSTAIN, FALLBACK, HUMAN_REVIEW, Columns


def _share(hits: np.ndarray, n: int) -> float | None:
    """DecGuard's ``mean`` of a 0/1 column: count / n (exact), None when empty."""
    return int(np.count_nonzero(hits)) / n if n else None


def _mean(values: np.ndarray) -> float | None:
    return fsum(values) / len(values) if len(values) else None


def percentile(values: np.ndarray, q: float) -> float | None:
    """NumPy's linear percentile, computed as DecGuard does from the two order statistics
    around the position (found by partial sorting: no full sort of millions of values)."""
    n = len(values)
    if not n:
        return None
    position = (n - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, n - 1)
    part = np.partition(values, [low, high])
    a, b = float(part[low]), float(part[high])
    return a + (b - a) * (position - low)


def histogram(confidence: np.ndarray, n_bins: int) -> list[int]:
    """Records per calibration bin (bin i holds (i/n, (i+1)/n], bin 0 also 0)."""
    edges = (np.arange(n_bins) + 1) / n_bins
    which = np.minimum(np.searchsorted(edges, confidence, side="left"), n_bins - 1)
    return np.bincount(which, minlength=n_bins).tolist()


def _aggregate(values: np.ndarray, *, total: bool = False) -> dict[str, Any]:
    present = values[~np.isnan(values)]
    n = len(present)
    return {
        "n": n,
        "mean": _mean(present),
        "p95": percentile(present, 95),
        "total": fsum(present) if n and total else None,
    }


def production_metrics(
    columns: Columns, evaluation: Evaluation, rows: np.ndarray | None = None
) -> dict[str, Any]:
    """The ``metrics`` section for all records, or for ``rows`` of them (dataset order)."""
    pick = (lambda a: a) if rows is None else (lambda a: a[rows])
    confidence = pick(columns.confidence)
    correct = pick(columns.correct)
    outcome = pick(columns.outcome)
    action = pick(columns.action)
    fallback = pick(columns.fallback)
    total = len(confidence)

    known = correct >= 0
    n_correct = int(np.count_nonzero(known))
    accuracy = _share(correct[known] == 1, n_correct)
    bins = reliability(confidence[known], correct[known] == 1, evaluation.calibration_bins)
    labelled = outcome >= 0
    n_outcome = int(np.count_nonzero(labelled))
    acted = action >= 0
    n_actions = int(np.count_nonzero(acted))
    routed = (fallback >= 0) | acted
    n_routed = int(np.count_nonzero(routed))
    fell_back = (fallback[routed] == 1) | (action[routed] == FALLBACK)

    threshold = None
    if evaluation.confidence_threshold is not None:
        t = evaluation.confidence_threshold
        threshold = {"threshold": t, "n": total, "coverage": _share(confidence >= t, total)}

    latency, cost = _aggregate(pick(columns.latency_ms)), _aggregate(pick(columns.cost), total=True)
    return {
        "counts": {
            "total": total,
            "with_outcome": n_outcome,
            "with_correctness": n_correct,
            "with_action": n_actions,
            "with_fallback": n_routed,
            "with_latency": latency["n"],
            "with_cost": cost["n"],
        },
        "outcomes": {
            "n": n_correct,
            "accuracy": accuracy,
            "error_rate": None if accuracy is None else 1.0 - accuracy,
        },
        "calibration": {
            "n": n_correct,
            "ece": expected_calibration_error(bins),
            "n_label_outcomes": n_outcome,
            "brier": _mean(pick(columns.brier)[labelled]),
            "nll": _mean(pick(columns.nll)[labelled]),
            "bins": evaluation.calibration_bins,
            "reliability": bins,
        },
        "confidence": {
            "n": total,
            "mean": _mean(confidence),
            "p50": percentile(confidence, 50),
            "p95": percentile(confidence, 95),
            "histogram": histogram(confidence, evaluation.calibration_bins),
        },
        "threshold": threshold,
        "routing": {
            "n_actions": n_actions,
            "abstention_rate": _share(action[acted] == ABSTAIN, n_actions),
            "human_review_rate": _share(action[acted] == HUMAN_REVIEW, n_actions),
            "n_fallback": n_routed,
            "fallback_rate": _share(fell_back, n_routed),
        },
        "latency_ms": {**latency, "total": None},
        "cost": cost,
    }


def gate_values(metrics: dict[str, Any]) -> dict[str, float | None]:
    """The metric values production gates address."""
    threshold = metrics["threshold"]
    return {
        "accuracy": metrics["outcomes"]["accuracy"],
        "error_rate": metrics["outcomes"]["error_rate"],
        "ece": metrics["calibration"]["ece"],
        "brier": metrics["calibration"]["brier"],
        "nll": metrics["calibration"]["nll"],
        "threshold_coverage": None if threshold is None else threshold["coverage"],
        "abstention_rate": metrics["routing"]["abstention_rate"],
        "fallback_rate": metrics["routing"]["fallback_rate"],
    }
