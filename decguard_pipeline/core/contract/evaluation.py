"""A contract's ``evaluation`` settings (also read from every stored report's header)."""

from __future__ import annotations

from pydantic import Field

from decguard_pipeline.core.contract.types import Probability
from decguard_pipeline.core.validation import Strict


class Evaluation(Strict):
    confidence_threshold: Probability | None = None
    calibration_bins: int = Field(default=10, ge=1, le=1000)
    probability_tolerance: float = Field(default=1e-3, gt=0.0, le=0.1)
    max_concurrency: int = Field(default=4, ge=1, le=256)
