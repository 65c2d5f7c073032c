"""``pipeline.calibration``'s calibrator keys: fit a calibrator on a calibration split, judge it
on held-out cases, route by conformal sets, and name the calibrator decisions apply.

The section also holds the guard's calibration keys (``bins``, ``gap_tolerance``,
``split_by``: ``guard_settings.CalibrationSettings``, which adds these); setting only the keys
below does not switch the guard extension on. docs/contracts.md describes every key.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from decguard_pipeline.core.contract.policy import PolicyAction
from decguard_pipeline.core.contract.types import Name, NonNegative, Probability
from decguard_pipeline.core.validation import Strict

CalibrationMethod = Literal["auto", "temperature", "vector", "isotonic", "histogram"]
Alpha = Annotated[float, Field(gt=0.0, lt=1.0)]
DEFAULT_FRACTION = 0.5


class SplitSettings(Strict):
    """Either a stratified share of the golden cases (``fraction``, ``seed``) or another file
    (``dataset``, relative to the contract) that fits the calibrator."""

    fraction: Annotated[float, Field(gt=0.0, lt=1.0)] | None = None
    seed: int = Field(default=0, ge=0, lt=2**63)
    dataset: Annotated[str, Field(min_length=1)] | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> SplitSettings:
        if self.dataset is not None and self.fraction is not None:
            raise ValueError("give either 'fraction' (and 'seed') or 'dataset', not both")
        if self.dataset is not None and "seed" in self.model_fields_set:
            raise ValueError("'seed' splits the golden cases; a calibration dataset needs none")
        return self

    @property
    def share(self) -> float | None:
        """The share of golden cases that fit (0.5 by default); None with a dataset."""
        return None if self.dataset is not None else (self.fraction or DEFAULT_FRACTION)


class ConformalSettings(Strict):
    """Split-conformal prediction sets at level ``alpha``; with ``route``, a decision whose
    set holds more than one label takes that action (``backend`` names a fallback's)."""

    alpha: Alpha = 0.1
    method: Literal["lac", "aps"] = "lac"
    route: PolicyAction | None = None
    backend: Name | None = None

    @model_validator(mode="after")
    def _backend_only_for_fallback(self) -> ConformalSettings:
        if self.route == "fallback" and self.backend is None:
            raise ValueError("route 'fallback' needs 'backend'")
        if self.route != "fallback" and self.backend is not None:
            raise ValueError("'backend' is only valid with route 'fallback'")
        return self


class AbstentionSettings(Strict):
    """The Learn-then-Test threshold suggested as ``abstain_below``: selective risk at most
    ``alpha`` with probability at least 1 − ``delta``."""

    alpha: Alpha = 0.1
    delta: Annotated[float, Field(gt=0.0, lt=0.5)] = 0.1


class CalibratorSettings(Strict):
    """The calibrator keys of ``pipeline.calibration`` (all optional)."""

    split: SplitSettings | None = None
    method: CalibrationMethod | None = None  # default auto
    histogram_bins: int | None = Field(default=None, ge=1, le=1000)  # default: calibration_bins
    folds: int = Field(default=5, ge=2, le=1000)  # auto's cross-validation
    conformal: ConformalSettings | None = None
    abstention: AbstentionSettings | None = None
    escalation_cost: NonNegative | None = None  # per decision handed to a person
    thresholds: tuple[Probability, ...] | None = Field(default=None, min_length=1)
    bootstrap_resamples: int = Field(default=200, ge=0, le=100_000)
    confidence: float = Field(default=0.95, gt=0.5, lt=1.0)
    apply: Annotated[str, Field(min_length=1)] | None = None  # calibrator.json, contract-relative

    @field_validator("thresholds")
    @classmethod
    def _ascending(cls, value: tuple[float, ...] | None) -> tuple[float, ...] | None:
        if value is not None and len(set(value)) != len(value):
            raise ValueError("thresholds must be unique")
        return None if value is None else tuple(sorted(value))


CALIBRATOR_KEYS = frozenset(CalibratorSettings.model_fields)
# keys that make a golden run fit and judge a calibrator (``apply`` alone only applies one)
FITTING_KEYS = CALIBRATOR_KEYS - {"apply"}
