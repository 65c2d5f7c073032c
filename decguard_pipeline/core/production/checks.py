"""Production gates become checks (spec §11.4), on the whole record set and per segment."""

from __future__ import annotations

from typing import Any

from decguard_pipeline.core.contract import Production, ProductionGates, SegmentGates
from decguard_pipeline.core.gates import Check, Comparison, make_check
from decguard_pipeline.core.production.drift import DRIFT_METRICS, drift_gate_values
from decguard_pipeline.core.production.metrics import gate_values

# production gate -> (metric, comparison that must hold), in the contract's field order
PRODUCTION_GATES: dict[str, tuple[str, Comparison]] = {
    "min_accuracy": ("accuracy", ">="),
    "max_error_rate": ("error_rate", "<="),
    "max_ece": ("ece", "<="),
    "max_brier": ("brier", "<="),
    "max_nll": ("nll", "<="),
    "min_threshold_coverage": ("threshold_coverage", ">="),
    "max_abstention_rate": ("abstention_rate", "<="),
    "max_fallback_rate": ("fallback_rate", "<="),
    "max_confidence_tv_distance": ("confidence_tv_distance", "<="),
    "max_accuracy_drop": ("accuracy_drop", "<="),
    "max_ece_increase": ("ece_increase", "<="),
}
assert tuple(PRODUCTION_GATES) == tuple(ProductionGates.model_fields)

NO_RECORDS = "no eligible production records"
NO_BASELINE = "no baseline was provided or the metric is unavailable"


def section_checks(
    gates: ProductionGates | SegmentGates,
    metrics: dict[str, Any],
    drift: dict[str, Any],
    *,
    level: str,
    prefix: str = "",
) -> list[Check]:
    """One check per configured gate, gate and metric names prefixed (segments)."""
    values = {**gate_values(metrics), **drift_gate_values(drift)}
    checks = []
    for gate, threshold in gates.configured().items():
        metric, comparison = PRODUCTION_GATES[gate]
        missing = NO_BASELINE if metric in DRIFT_METRICS else NO_RECORDS
        value = values[metric]
        check = make_check(
            prefix + gate, prefix + metric, comparison, threshold, value, level=level,
            missing=missing,
        )  # fmt: skip
        checks.append(check)
    return checks


def aggregate_checks(
    config: Production, metrics: dict[str, Any], drift: dict[str, Any]
) -> list[Check]:
    """Requirements, then warnings, on the whole record set."""
    return section_checks(config.requirements, metrics, drift, level="requirement") + (
        section_checks(config.warnings, metrics, drift, level="warning")
    )
