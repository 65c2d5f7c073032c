"""DecGuard's golden gates: which metric each gate of ``requirements``/``warnings`` bounds, and
the checks of a golden run."""

from __future__ import annotations

from typing import TYPE_CHECKING

from decguard_pipeline.core.gates import Check, Comparison, make_check

if TYPE_CHECKING:  # or their structs (``core.contract.settings_structs``): free of pydantic
    from decguard_pipeline.core.contract.gates import Gates

# golden gate -> (metric, comparison that must hold)
GOLDEN_GATES: dict[str, tuple[str, Comparison]] = {
    "min_accuracy": ("accuracy", ">="),
    "min_macro_f1": ("macro_f1", ">="),
    "max_nll": ("nll", "<="),
    "max_brier": ("brier", "<="),
    "max_ece": ("ece", "<="),
    "min_coverage": ("coverage", ">="),
    "max_abstention_rate": ("abstention_rate", "<="),
    "min_selective_accuracy": ("selective_accuracy", ">="),
    "max_error_rate": ("error_rate", "<="),
    "max_latency_p95_ms": ("latency_p95_ms", "<="),
    "max_ordinal_mae": ("ordinal_mae", "<="),
}


# DecGuard requires every case to be decided unless the contract sets max_error_rate itself
IMPLICIT_REQUIREMENTS = {"max_error_rate": 0.0}


def configured_gates(requirements: Gates, warnings: Gates) -> list[tuple[str, str, float]]:
    """``(gate, level, threshold)`` of every golden check, in DecGuard's order: the requirements
    in field order (the implicit ones appended unless set), then the warnings."""
    required = requirements.configured()
    for gate, threshold in IMPLICIT_REQUIREMENTS.items():
        required.setdefault(gate, threshold)
    return [(gate, "requirement", threshold) for gate, threshold in required.items()] + [
        (gate, "warning", threshold) for gate, threshold in warnings.configured().items()
    ]


def golden_checks(
    requirements: Gates, warnings: Gates, values: dict[str, float | None]
) -> list[Check]:
    """The checks of :func:`configured_gates` on a run's gate values."""
    checks = []
    for gate, level, threshold in configured_gates(requirements, warnings):
        metric, comparison = GOLDEN_GATES[gate]
        checks.append(make_check(gate, metric, comparison, threshold, values[metric], level=level))
    return checks
