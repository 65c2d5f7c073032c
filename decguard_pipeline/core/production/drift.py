"""Drift against a baseline (spec §11.3): how the current records moved from earlier ones.

Confidence drift is the total variation distance between the two confidence histograms
(same bins); accuracy and ECE drift are plain differences. Every value is None without a
baseline or when either side cannot compute its metric.
"""

from __future__ import annotations

import math
from typing import Any

from decguard_pipeline.core.errors import ReportError

DRIFT_METRICS = ("confidence_tv_distance", "accuracy_drop", "ece_increase")


def _minus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def histogram_tv(left: list[int], right: list[int]) -> float | None:
    """½·Σ|a_i/Σa − b_i/Σb| (exact sum); None when either histogram is empty."""
    if len(left) != len(right):
        raise ReportError("baseline and current confidence histograms use different bin counts")
    left_total, right_total = sum(left), sum(right)
    if not (left_total and right_total):
        return None
    return 0.5 * math.fsum(
        abs(a / left_total - b / right_total) for a, b in zip(left, right, strict=True)
    )


def compute_drift(current: dict[str, Any], baseline: dict[str, Any] | None) -> dict[str, Any]:
    """The report's ``drift`` section from two ``metrics`` sections."""
    if baseline is None:
        return dict.fromkeys(
            ("confidence_mean_delta", "confidence_tv_distance", "accuracy_drop", "ece_increase")
        )
    tv = histogram_tv(current["confidence"]["histogram"], baseline["confidence"]["histogram"])
    return {
        "confidence_mean_delta": _minus(
            current["confidence"]["mean"], baseline["confidence"]["mean"]
        ),
        "confidence_tv_distance": tv,
        "accuracy_drop": _minus(baseline["outcomes"]["accuracy"], current["outcomes"]["accuracy"]),
        "ece_increase": _minus(current["calibration"]["ece"], baseline["calibration"]["ece"]),
    }


def drift_gate_values(drift: dict[str, Any]) -> dict[str, float | None]:
    return {name: drift[name] for name in DRIFT_METRICS}
