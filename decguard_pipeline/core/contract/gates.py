"""Gate sections: golden ``requirements``/``warnings``, ``regression`` and ``production``."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator, model_validator

from decguard_pipeline.core.contract.names import set_gates
from decguard_pipeline.core.contract.types import BrierRange, NonNegative, Probability
from decguard_pipeline.core.validation import Strict


class _Configured(Strict):
    def configured(self) -> dict[str, float]:
        """The gates that are set, in field order."""
        return set_gates(self, type(self).model_fields)


class Gates(_Configured):
    """Golden gates; unset ones are not checked."""

    min_accuracy: Probability | None = None
    min_macro_f1: Probability | None = None
    max_nll: NonNegative | None = None
    max_brier: BrierRange | None = None
    max_ece: Probability | None = None
    min_coverage: Probability | None = None
    max_abstention_rate: Probability | None = None
    min_selective_accuracy: Probability | None = None
    max_error_rate: Probability | None = None
    max_latency_p95_ms: NonNegative | None = None
    max_ordinal_mae: NonNegative | None = None


class RegressionGates(_Configured):
    max_answer_flip_rate: Probability | None = None
    max_accuracy_drop: Probability | None = None
    max_macro_f1_drop: Probability | None = None
    max_ece_increase: Probability | None = None
    max_brier_increase: BrierRange | None = None
    max_nll_increase: NonNegative | None = None
    max_mean_tv_distance: Probability | None = None
    max_mean_confidence_shift: Probability | None = None
    max_error_rate_increase: Probability | None = None
    max_latency_p95_increase_ms: NonNegative | None = None
    max_segment_accuracy_drop: Probability | None = None


class Regression(RegressionGates):
    """``decguard diff`` gates: top-level keys are requirements, ``warnings`` holds warnings."""

    warnings: RegressionGates = RegressionGates()
    segment_by: tuple[Annotated[str, Field(min_length=1)], ...] = ()
    min_segment_size: int = Field(default=5, ge=1)

    def configured(self) -> dict[str, float]:
        return {k: v for k, v in super().configured().items() if k in RegressionGates.model_fields}

    @model_validator(mode="after")
    def _segment_gate_needs_segments(self) -> Regression:
        gate = "max_segment_accuracy_drop"
        if gate in {**self.configured(), **self.warnings.configured()} and not self.segment_by:
            raise ValueError(f"{gate} needs segment_by (case metadata keys)")
        return self


class SegmentGates(_Configured):
    """Production gates applied to every metadata segment on its own."""

    min_accuracy: Probability | None = None
    max_error_rate: Probability | None = None
    max_ece: Probability | None = None
    max_brier: BrierRange | None = None
    max_nll: NonNegative | None = None
    min_threshold_coverage: Probability | None = None
    max_abstention_rate: Probability | None = None
    max_fallback_rate: Probability | None = None


class ProductionGates(SegmentGates):
    """Production gates on the whole record set, including drift against a baseline."""

    max_confidence_tv_distance: Probability | None = None
    max_accuracy_drop: Probability | None = None
    max_ece_increase: Probability | None = None


class Production(Strict):
    segments: tuple[str, ...] = ()
    requirements: ProductionGates = ProductionGates()
    warnings: ProductionGates = ProductionGates()
    segment_requirements: SegmentGates = SegmentGates()
    segment_warnings: SegmentGates = SegmentGates()

    @field_validator("segments")
    @classmethod
    def _clean_keys(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any(not key or key != key.strip() for key in value):
            raise ValueError("segment keys must be non-empty and have no surrounding spaces")
        if len(set(value)) != len(value):
            raise ValueError("segment keys must be unique")
        return value
