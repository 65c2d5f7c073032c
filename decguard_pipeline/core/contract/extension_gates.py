"""``pipeline.requirements`` / ``pipeline.warnings``: gates on the pipeline's own metrics.

Same semantics as DecGuard's golden gates (inclusive; a metric that cannot be computed fails).
One mapping holds every extension gate, so a contract author writes them in one place; each
feature owns a group of them (a class below) and checks only its own
(:meth:`ExtensionGates.owned`), so using one feature's gate never switches another feature on.
A feature with gates adds its class as a base of :class:`ExtensionGates`.

* :class:`GuardGates`: the guard extension's (``core/guard/gates.py``), checked on the worst
  guarded label;
* :class:`CalibrationGates`: the calibration measures' (``core/calibration/gates.py``), checked
  on every golden run of a contract that sets one (``pipeline.calibration_measures``);
* :class:`CostGates`: the API cost's (``core/usage.py``), checked on every run of every
  contract whose backend reports usage.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from decguard_pipeline.core.contract.gates import _Configured
from decguard_pipeline.core.contract.types import BrierRange, NonNegative, Probability

# a selective-risk target: the guarantee needs 0 < alpha < 1
RiskTarget = Annotated[float, Field(gt=0.0, lt=1.0)]


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


class CalibrationGates(_Configured):
    max_smece: Probability | None = None  # smooth ECE (point estimate)
    max_classwise_ece: Probability | None = None  # mean one-vs-rest ECE over the labels
    max_miscalibration: BrierRange | None = None  # CORP miscalibration of DecGuard's Brier
    # a confidence threshold must exist whose selective risk is <= this with probability
    # >= 1 - pipeline.calibration_measures.delta
    max_selective_risk: RiskTarget | None = None


class CostGates(_Configured):
    max_cost_per_1000: NonNegative | None = None  # API cost per 1,000 decisions


class ExtensionGates(CostGates, CalibrationGates, GuardGates):
    """Every extension gate (fields: the guard's, the calibration measures', the cost's)."""

    def owned(self, group: type[_Configured]) -> dict[str, float]:
        """The configured gates that ``group`` declares, in field order."""
        return {k: v for k, v in self.configured().items() if k in group.model_fields}

    def cost(self) -> dict[str, float]:
        """The cost gates that are set."""
        return self.owned(CostGates)
