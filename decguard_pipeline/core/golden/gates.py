"""DecGuard's golden gates: which metric each gate of ``requirements``/``warnings`` bounds, and
the checks of a golden run."""

from __future__ import annotations

from decguard_pipeline.core.contract.gates import Gates
from decguard_pipeline.core.gates import Check, Comparison, make_check

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


def golden_checks(
    requirements: Gates, warnings: Gates, values: dict[str, float | None]
) -> list[Check]:
    """Requirements in field order (``max_error_rate`` appended at 0 unless set), then
    warnings."""
    required = requirements.configured()
    required.setdefault("max_error_rate", 0.0)
    checks = []
    for level, gates in (("requirement", required), ("warning", warnings.configured())):
        for gate, threshold in gates.items():
            metric, comparison = GOLDEN_GATES[gate]
            checks.append(
                make_check(gate, metric, comparison, threshold, values[metric], level=level)
            )
    return checks
