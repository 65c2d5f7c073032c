"""Checks for the guard extension: ``pipeline.requirements`` / ``pipeline.warnings`` gates on
the extension metrics, then the partial-run check.

Checks have DecGuard's shape and semantics (``core.gates.make_check``), so the CLI and the
Dagster asset checks treat them like golden checks.
"""

from __future__ import annotations

from typing import Any

from decguard_pipeline.core.gates import Check, Comparison, levelled, table_check
from decguard_pipeline.core.guard.extension import GuardConfig, worst_label
from decguard_pipeline.core.guard.partial_runs import partial_run_check

# gate -> (metric, comparison that must hold)
GUARD_GATES: dict[str, tuple[str, Comparison]] = {
    "min_auroc": ("auroc", ">="),
    "min_auprc": ("auprc", ">="),
    "min_precision": ("precision", ">="),
    "min_recall": ("recall", ">="),
    "min_f1": ("f1", ">="),
    "max_fpr": ("fpr", "<="),
    "max_fnr": ("fnr", "<="),
    "max_ece_equal_mass": ("ece_equal_mass", "<="),
    "max_confidence_gap": ("abs_confidence_gap", "<="),
    "max_overconfidence": ("confidence_gap", "<="),
    "max_aurc": ("aurc", "<="),
}
_GUARD_METRICS = frozenset({"auroc", "auprc", "precision", "recall", "f1", "fpr", "fnr"})
_NO_CASES = "no eligible cases"


def gate_input(block: dict[str, Any], metric: str) -> tuple[float | None, str, str]:
    """``(value, detail, reason when None)`` of a gated metric in an extension block."""
    if metric in _GUARD_METRICS:
        value, label, reason = worst_label(block, metric)
        several = len(block["guard"]["labels"]) > 1
        detail = "" if label is None else (f"worst label {label}" if several else f"label {label}")
        return value, "" if value is None else detail, reason or _NO_CASES
    cal, rc = block["calibration"], block["risk_coverage"]
    gap = cal["confidence_gap"]
    values = {
        "ece_equal_mass": (cal["ece_equal_mass"], f"{len(cal['reliability_equal_mass'])} bins"),
        "abs_confidence_gap": (None if gap is None else abs(gap), cal["direction"] or ""),
        "confidence_gap": (gap, cal["direction"] or ""),
        "aurc": (rc["aurc"], ""),
    }
    value, detail = values[metric]
    return value, "" if value is None else detail, _NO_CASES


def guard_checks(block: dict[str, Any], config: GuardConfig) -> list[Check]:
    """Requirements (gate field order), warnings, then the partial-run check."""
    checks = []
    gates = levelled(config.requirements.configured(), config.warnings.configured())
    for level, gate, threshold in gates:
        value, detail, missing = gate_input(block, GUARD_GATES[gate][0])
        checks.append(
            table_check(
                GUARD_GATES, gate, threshold, value, level=level, missing=missing, detail=detail
            )
        )
    checks.append(partial_run_check(block["run"], fail_partial=config.partial_runs.fail_partial))
    return checks
