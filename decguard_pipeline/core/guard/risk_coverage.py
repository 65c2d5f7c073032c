"""Risk-coverage: what happens when low-confidence decisions are handed to a person.

At a confidence threshold t the model keeps (covers) the cases with confidence >= t (DecGuard's
``selective`` rule) and hands the rest off. A sweep over thresholds gives, per threshold, the
coverage, the selective accuracy (and risk = 1 - accuracy) of the kept cases, the number handed
off and, with costs, the cost per 1,000 decisions. The area under the risk-coverage curve
(AURC, Geifman & El-Yaniv 2017) condenses how well confidence ranks right above wrong: lower is
better; the optimal AURC (every right decision ranked above every wrong one) and the excess
over it make models of different accuracy comparable.

Inputs are the top-label ``confidence`` and ``correct`` columns of the labeled, decided cases.
See docs/metrics.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from decguard_pipeline.core.exact import fsum
from decguard_pipeline.core.selective import PER, cost_per_thousand, sweep

__all__ = ["PER", "aurc", "cheapest", "cost_per_thousand", "optimal_aurc", "risk_coverage", "sweep"]


def aurc(confidence: np.ndarray, correct: np.ndarray) -> float | None:
    """Area under the risk-coverage curve; None for no cases.

    Cases enter from the most confident down; cases with equal confidence enter together
    (no threshold separates them), and each group adds its coverage step times the risk after
    it. Without ties this is the usual ``mean over k of (errors in the top k) / k``."""
    confidence = np.asarray(confidence, dtype=np.float64)
    n = len(confidence)
    if not n:
        return None
    order = np.argsort(-confidence, kind="stable")
    ranked = confidence[order]
    ends = np.append(np.flatnonzero(ranked[1:] != ranked[:-1]), n - 1)
    covered = ends + 1
    errors = np.cumsum(~np.asarray(correct, dtype=bool)[order], dtype=np.int64)[ends]
    steps = np.diff(covered, prepend=0)
    return fsum(steps * errors / covered) / n


def optimal_aurc(correct: np.ndarray) -> float | None:
    """The AURC of a perfect ranking of the same decisions: every right one before every
    wrong one, i.e. ``mean over k of max(0, k - right) / k``; None for no cases."""
    n = len(correct)
    if not n:
        return None
    right = int(np.count_nonzero(correct))
    k = np.arange(right + 1, n + 1, dtype=np.int64)
    return fsum((k - right) / k) / n


def cheapest(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The sweep row with the lowest cost (the lowest threshold among equals), if costed."""
    costed = [row for row in rows if row["cost_per_1000"] is not None]
    if not costed:
        return None
    best = min(costed, key=lambda row: (row["cost_per_1000"], row["threshold"]))
    return {"threshold": best["threshold"], "cost_per_1000": best["cost_per_1000"]}


def risk_coverage(
    confidence: np.ndarray,
    correct: np.ndarray,
    thresholds: Sequence[float],
    *,
    escalation_cost: float | None = None,
    error_cost: float = 0.0,
) -> dict[str, Any]:
    """The risk-coverage section: AURC (with its optimum and excess) and the sweep."""
    area = aurc(confidence, correct)
    best = optimal_aurc(correct)
    rows = sweep(
        confidence, correct, thresholds, escalation_cost=escalation_cost, error_cost=error_cost
    )
    return {
        "n": len(confidence),
        "aurc": area,
        "optimal_aurc": best,
        "excess_aurc": None if area is None or best is None else area - best,
        "escalation_cost": escalation_cost,
        "error_cost": error_cost,
        "cheapest": cheapest(rows),
        "sweep": rows,
    }
