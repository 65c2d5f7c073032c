"""Selective decisions: keep the cases whose confidence reaches a threshold, hand the rest to a
person. One sweep over thresholds, shared by the guard extension's risk-coverage section
(``core/guard/risk_coverage.py``) and the calibrator's escalation sweep
(``core/calibration/escalation.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

PER = 1000  # costs are reported per this many decisions


def cost_per_thousand(
    handed_off: int, wrong_kept: int, n: int, *, escalation_cost: float, error_cost: float
) -> float | None:
    """``PER * (handed_off * escalation_cost + wrong_kept * error_cost) / n``; None for n = 0."""
    if not n:
        return None
    return PER * (handed_off * escalation_cost + wrong_kept * error_cost) / n


def sweep(
    confidence: np.ndarray,
    correct: np.ndarray,
    thresholds: Sequence[float],
    *,
    escalation_cost: float | None = None,
    error_cost: float = 0.0,
) -> list[dict[str, Any]]:
    """One row per threshold: kept and handed-off counts, coverage, selective accuracy and
    risk (None when nothing is kept), and the cost per 1,000 decisions (None without an
    escalation cost)."""
    confidence = np.asarray(confidence, dtype=np.float64)
    correct = np.asarray(correct, dtype=bool)
    n = len(confidence)
    order = np.argsort(confidence, kind="stable")
    ranked = confidence[order]
    # right decisions at or above each sorted position: suffix sums of the sorted column
    right_from = np.concatenate((np.cumsum(correct[order][::-1])[::-1], [0]))
    starts = np.searchsorted(ranked, np.asarray(thresholds, dtype=np.float64), side="left")
    rows = []
    for t, start in zip(thresholds, starts.tolist(), strict=True):
        kept = n - start
        right = int(right_from[start])
        accuracy = right / kept if kept else None
        cost = None
        if escalation_cost is not None:
            cost = cost_per_thousand(
                start, kept - right, n, escalation_cost=escalation_cost, error_cost=error_cost
            )
        rows.append(
            {
                "threshold": float(t),
                "kept": kept,
                "handed_off": start,
                "coverage": kept / n if n else None,
                "selective_accuracy": accuracy,
                "selective_risk": None if accuracy is None else (kept - right) / kept,
                "cost_per_1000": cost,
            }
        )
    return rows
