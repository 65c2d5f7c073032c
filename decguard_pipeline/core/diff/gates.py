"""Regression gates (spec §8 step 7): every gate is "value <= limit".

Requirements come in field order with ``max_error_rate_increase`` appended at 0 when the
contract does not set it (new errors always count), then warnings. Without a contract only
that implicit requirement is checked.
"""

from __future__ import annotations

from typing import Any

from decguard_pipeline.core.contract import Regression
from decguard_pipeline.core.gates import Check, make_check

IMPLICIT_GATE = "max_error_rate_increase"
SEGMENT_GATE = "max_segment_accuracy_drop"
MISSING = "no comparable cases"

# regression gate -> the diff value it limits
REGRESSION_GATES: dict[str, str] = {
    "max_answer_flip_rate": "answer_flip_rate",
    "max_accuracy_drop": "accuracy_drop",
    "max_macro_f1_drop": "macro_f1_drop",
    "max_ece_increase": "ece_increase",
    "max_brier_increase": "brier_increase",
    "max_nll_increase": "nll_increase",
    "max_mean_tv_distance": "mean_tv_distance",
    "max_mean_confidence_shift": "mean_abs_confidence_delta",
    "max_error_rate_increase": "error_rate_increase",
    "max_latency_p95_increase_ms": "latency_p95_increase_ms",
    "max_segment_accuracy_drop": "segment_accuracy_drop",
}


def _negated(value: float | None) -> float | None:
    return None if value is None else -value


def gate_values(
    metrics: dict[str, dict[str, float | None]],
    shift: dict[str, float | None],
    worst: dict[str, Any] | None,
) -> dict[str, float | None]:
    """The values regression gates limit, from the diff's metrics, shift and worst segment."""
    return {
        "answer_flip_rate": shift["answer_flip_rate"],
        "accuracy_drop": _negated(metrics["accuracy"]["delta"]),
        "macro_f1_drop": _negated(metrics["macro_f1"]["delta"]),
        "ece_increase": metrics["ece"]["delta"],
        "brier_increase": metrics["brier"]["delta"],
        "nll_increase": metrics["nll"]["delta"],
        "mean_tv_distance": shift["mean_tv_distance"],
        "mean_abs_confidence_delta": shift["mean_abs_confidence_delta"],
        "error_rate_increase": metrics["error_rate"]["delta"],
        "latency_p95_increase_ms": metrics["latency_p95_ms"]["delta"],
        "segment_accuracy_drop": None if worst is None else worst["accuracy_drop"],
    }


def configured_gates(regression: Regression) -> list[tuple[str, float, str]]:
    """``(gate, limit, level)`` in check order, the implicit requirement included."""
    required = regression.configured()
    required.setdefault(IMPLICIT_GATE, 0.0)
    return [(gate, limit, "requirement") for gate, limit in required.items()] + [
        (gate, limit, "warning") for gate, limit in regression.warnings.configured().items()
    ]


def worst_detail(worst: dict[str, Any] | None) -> str:
    return "" if worst is None else f"worst segment {worst['key']}={worst['value']}"


def point_check(
    gate: str, limit: float, level: str, values: dict[str, float | None], detail: str = ""
) -> Check:
    """DecGuard's check: the point estimate against the limit."""
    metric = REGRESSION_GATES[gate]
    return make_check(
        gate, metric, "<=", limit, values[metric], level=level, missing=MISSING, detail=detail
    )


def regression_checks(
    regression: Regression, values: dict[str, float | None], worst: dict[str, Any] | None
) -> list[Check]:
    detail = worst_detail(worst)
    return [
        point_check(gate, limit, level, values, detail if gate == SEGMENT_GATE else "")
        for gate, limit, level in configured_gates(regression)
    ]
