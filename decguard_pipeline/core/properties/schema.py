"""Pydantic schema of a stored ``properties`` section, for strict loading with DecGuard's
structural messages (``properties.pairs.3.comparison: ...``). The arithmetic checks live in
:mod:`report`."""

from __future__ import annotations

from typing import Any

from pydantic import model_validator

from decguard_pipeline.core.contract.names import PropertyName
from decguard_pipeline.core.contract.properties import Fuzz, Properties
from decguard_pipeline.core.decision import DecisionInput
from decguard_pipeline.core.result_records import CaseErrorModel, ResultModel, Section

PresentationModel = tuple[tuple[str, str], ...]


class ComparisonModel(Section):
    tv_distance: float
    js_divergence: float
    max_abs_delta: float
    confidence_delta: float
    selected_before: str
    selected_after: str
    flipped: bool
    rank_changed: bool
    level_delta: float | None = None


class ReducedModel(Section):
    steps: tuple[dict[str, Any], ...]
    input: DecisionInput
    presentation: PresentationModel | None = None
    result: ResultModel
    comparison: ComparisonModel
    violations: tuple[str, ...]
    backend_calls: int


class PairModel(Section):
    id: str
    property: PropertyName
    case_id: str
    sample: int
    steps: tuple[dict[str, Any], ...]
    provenance: dict[str, Any] = {}
    input: DecisionInput
    presentation: PresentationModel | None = None
    result: ResultModel | None = None
    error: CaseErrorModel | None = None
    comparison: ComparisonModel | None = None
    violations: tuple[str, ...] = ()
    reduced: ReducedModel | None = None

    @model_validator(mode="after")
    def _consistent(self) -> PairModel:
        if (self.result is None) == (self.error is None):
            raise ValueError("a transformed case must have exactly one of 'result' or 'error'")
        if (self.result is None) != (self.comparison is None):
            raise ValueError("'comparison' must be present exactly when 'result' is")
        if self.error is not None and (self.violations or self.reduced is not None):
            raise ValueError("an errored transformed case cannot have violations")
        if self.result is not None and self.result.case_id != self.id:
            raise ValueError(
                f"result.case_id {self.result.case_id!r} does not match id {self.id!r}"
            )
        if self.reduced is not None and not self.violations:
            raise ValueError("only failing transformed cases can have a reduced example")
        return self


class SkipModel(Section):
    property: PropertyName
    case_id: str
    reason: str


class SummaryModel(Section):
    property: PropertyName
    level: str
    relation: str
    n_cases: int
    n_transformed: int
    n_skipped: int
    n_errors: int
    errors_by_kind: dict[str, int]
    n_evaluated: int
    n_violations: int
    violation_rate: float | None
    n_flips: int
    flip_rate: float | None
    mean_tv_distance: float | None
    max_tv_distance: float | None
    max_js_divergence: float | None
    max_abs_delta: float | None
    max_abs_confidence_delta: float | None
    max_level_decrease: float | None = None
    n_reduced: int


class PropertyRunModel(Section):
    seed: int
    fuzz: Fuzz
    config: Properties
    summaries: tuple[SummaryModel, ...]
    pairs: tuple[PairModel, ...]
    skipped: tuple[SkipModel, ...] = ()
