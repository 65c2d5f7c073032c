"""``pipeline.requirements`` / ``pipeline.warnings``: gates on the extension metrics.

Same semantics as DecGuard's golden gates (inclusive; a metric that cannot be computed fails).
Guard gates apply to every guarded label and are checked on the worst of them, by the guard
extension; the cost gate applies to every run of every contract (``core/usage.py``) and does
not turn the guard extension on.
"""

from __future__ import annotations

from decguard_pipeline.core.contract.gates import _Configured
from decguard_pipeline.core.contract.types import NonNegative, Probability


class GuardGates(_Configured):
    min_auroc: Probability | None = None
    min_auprc: Probability | None = None
    min_precision: Probability | None = None
    min_recall: Probability | None = None
    min_f1: Probability | None = None
    max_fpr: Probability | None = None
    max_fnr: Probability | None = None
    max_ece_equal_mass: Probability | None = None
    max_confidence_gap: Probability | None = None  # |mean confidence - accuracy|
    max_overconfidence: Probability | None = None  # mean confidence - accuracy (signed)
    max_aurc: Probability | None = None


class ExtensionGates(GuardGates):
    """The section as written: the guard's gates (:meth:`configured`, what the guard
    extension checks) and the cost gate (:meth:`cost`)."""

    max_cost_per_1000: NonNegative | None = None  # API cost per 1,000 decisions

    def configured(self) -> dict[str, float]:
        """The guard's gates that are set, in field order."""
        return {k: v for k, v in super().configured().items() if k in GuardGates.model_fields}

    def cost(self) -> dict[str, float]:
        """The cost gates that are set."""
        return {k: v for k, v in super().configured().items() if k not in GuardGates.model_fields}
