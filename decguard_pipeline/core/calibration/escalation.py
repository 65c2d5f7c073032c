"""The escalation sweep: for every confidence threshold, what a decider that answers at or
above it and hands the rest to a person achieves, and what it costs.

Per threshold t over the held-out cases' (calibrated) confidence: how many are answered and
handed off, the coverage (answered / cases) and hand-off rate, the accuracy on the answered
cases, and per 1,000 decisions the escalation cost (hand-offs × ``escalation_cost``), the
backend's own cost (every case is asked, whatever happens next: the run's cost per 1,000
decisions, from its usage) and their total. The threshold sweep itself is
``core/selective.sweep``, as the guard's risk-coverage section uses it.

The suggested threshold (:func:`suggestion`) is not read off this table: it is the
Learn-then-Test threshold (``abstention.guaranteed_threshold``) on the same cases, whose
selective risk is at most α with probability at least 1 − δ.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from decguard_pipeline.core.calibration.abstention import Abstention
from decguard_pipeline.core.selective import sweep

DEFAULT_THRESHOLDS = tuple(i / 20 for i in range(21))  # 0, 0.05, ..., 1


def escalation_sweep(
    confidence: np.ndarray,
    correct: np.ndarray,
    thresholds: Sequence[float] = DEFAULT_THRESHOLDS,
    *,
    escalation_cost: float | None = None,
    backend_cost_per_1000: float | None = None,
) -> list[dict[str, Any]]:
    """One row per threshold (ascending)."""
    n = len(confidence)
    rows = sweep(confidence, correct, sorted(thresholds), escalation_cost=escalation_cost)
    out = []
    for row in rows:
        escalation = row["cost_per_1000"]
        parts = [c for c in (escalation, backend_cost_per_1000) if c is not None]
        out.append(
            {
                "threshold": row["threshold"],
                "answered": row["kept"],
                "handed_off": row["handed_off"],
                "coverage": row["coverage"],
                "hand_off_rate": row["handed_off"] / n if n else None,
                "accuracy_answered": row["selective_accuracy"],
                "escalation_cost_per_1000": escalation,
                "backend_cost_per_1000": backend_cost_per_1000,
                "total_cost_per_1000": sum(parts) if parts else None,
            }
        )
    return out


def suggestion(abstention: Abstention, n: int) -> dict[str, Any]:
    """The Learn-then-Test threshold as a suggested ``abstain_below``: answer when the
    calibrated confidence is at least it, hand off below (None when none is certified)."""
    return {
        "abstain_below": abstention.threshold,
        "alpha": abstention.alpha,
        "delta": abstention.delta,
        "n": n,
        "answered": abstention.kept,
        "coverage": abstention.coverage,
        "selective_risk": abstention.selective_risk,
        "p_value": abstention.p_value,
    }
