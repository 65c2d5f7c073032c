"""Extension subsections for guard metrics, calibration, risk-coverage, suites and partial runs.

Each is optional under ``pipeline:``; docs/contracts.md describes every key. Label names in
``guard.labels`` are checked against the decision by :func:`check_against_decision` (a
subsection cannot see the rest of the contract while it is parsed).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, field_validator, model_validator

from decguard_pipeline.core.contract.calibrator import (
    CALIBRATOR_KEYS,
    FITTING_KEYS,
    CalibratorSettings,
)
from decguard_pipeline.core.contract.types import Name, NonNegative, Probability
from decguard_pipeline.core.errors import ContractError
from decguard_pipeline.core.validation import Strict

DEFAULT_SWEEP = tuple(i / 20 for i in range(21))  # 0, 0.05, ..., 1
DEFAULT_THRESHOLD_GRID = tuple(i / 10 for i in range(1, 10))  # 0.1, 0.2, ..., 0.9


def _numbers_to_text(value: Any) -> Any:
    # score levels are often written as bare numbers in YAML; labels are strings
    if isinstance(value, list | tuple):
        return [str(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in value]
    return value


class GuardSettings(Strict):
    """Binary guard metrics, one-vs-rest per guarded label."""

    threshold: Probability = 0.5
    # default: the positive (first) label of a noul decision, every label otherwise
    labels: tuple[str, ...] | None = Field(default=None, min_length=1)
    # the threshold table: the guard's numbers at each of these thresholds
    threshold_grid: tuple[Probability, ...] = Field(default=DEFAULT_THRESHOLD_GRID, min_length=1)
    # and the operating point that meets each target given (core/guard/thresholds.py)
    target_recall: Probability | None = None
    target_fpr: Probability | None = None

    _text = field_validator("labels", mode="before")(_numbers_to_text)

    @field_validator("labels")
    @classmethod
    def _unique(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is not None and len(set(value)) != len(value):
            raise ValueError("labels must be unique")
        return value

    @field_validator("threshold_grid")
    @classmethod
    def _ascending(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if len(set(value)) != len(value):
            raise ValueError("thresholds must be unique")
        return tuple(sorted(value))


class CalibrationSettings(CalibratorSettings):
    """Equal-mass ECE, the confidence gap and metadata splits (the guard's); a calibrator's
    split, method, conformal sets, suggested threshold and escalation sweep, and the
    calibrator decisions apply (``calibrator.CalibratorSettings``)."""

    bins: int | None = Field(default=None, ge=1, le=1000)  # default: evaluation.calibration_bins
    gap_tolerance: Probability = 0.02
    split_by: tuple[Annotated[str, Field(min_length=1)], ...] = ()

    @field_validator("split_by")
    @classmethod
    def _unique(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(value)) != len(value):
            raise ValueError("split_by keys must be unique")
        return value

    @property
    def guard_keys(self) -> bool:
        """Whether the guard's calibration section is asked for: a key of its own is set, or
        none of the calibrator's (``calibration: {}``)."""
        given = self.model_fields_set
        return bool(given - CALIBRATOR_KEYS) or not (given & CALIBRATOR_KEYS)

    @property
    def fits_calibrator(self) -> bool:
        """Whether a golden run fits and judges a calibrator."""
        return bool(self.model_fields_set & FITTING_KEYS)


class RiskCoverageSettings(Strict):
    """The confidence-threshold sweep and the costs of handing off and of being wrong."""

    thresholds: tuple[Probability, ...] = Field(default=DEFAULT_SWEEP, min_length=1)
    escalation_cost: NonNegative | None = None  # per decision handed to a person
    error_cost: NonNegative = 0.0  # per wrong decision the model kept

    @field_validator("thresholds")
    @classmethod
    def _ascending(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if len(set(value)) != len(value):
            raise ValueError("thresholds must be unique")
        return tuple(sorted(value))


class PartialRunSettings(Strict):
    """When a run with errored cases is flagged (drop rate = errored / all cases)."""

    warn_from: Probability = 0.05
    partial_above: Probability = 0.20
    fail_partial: bool = False  # a partial run fails (instead of warning)

    @model_validator(mode="after")
    def _ordered(self) -> PartialRunSettings:
        if self.warn_from > self.partial_above:
            raise ValueError("warn_from must not exceed partial_above")
        return self


SuiteDataset = Annotated[str, Field(min_length=1)]
# suite name -> golden dataset path, relative to the contract; evaluated in this order
Suites = Annotated[dict[Name, SuiteDataset], Field(min_length=1)]


def check_against_decision(
    source: str, guard: GuardSettings | None, labels: tuple[str, ...]
) -> None:
    """Raise ``ContractError`` (naming file and field) for guarded labels the decision lacks."""
    if guard is None or guard.labels is None:
        return
    unknown = [label for label in guard.labels if label not in labels]
    if unknown:
        raise ContractError(
            f"{source}: invalid contract:\n  pipeline.guard.labels: unknown labels {unknown}; "
            f"the decision's labels are {list(labels)}"
        )
