"""Pydantic schemas of production records and stored check reports (``check_version`` 0.1).

They reproduce DecGuard's validation exactly, coercions included (a record may give a
probability as ``"0.5"`` or ``outcome_correct`` as ``1``), and its ``location: message``
errors. The fast paths never build these models for plainly valid data; they are used to
explain a rejected record or document and to coerce the rare record that is not plain.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from decguard_pipeline.core.contract import Evaluation, Production
from decguard_pipeline.core.contract.policy import PolicyAction
from decguard_pipeline.core.decision import DecisionInput
from decguard_pipeline.core.production.timestamps import timestamp_problem

NonNegative = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]
Probability = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
SegmentValue = str | int | float | bool | None
Status = Literal["pass", "warn", "fail"]

# Field order of a record, as DecGuard writes it.
RECORD_FIELDS = (
    "id", "timestamp", "decision", "input", "probabilities", "selected", "confidence",
    "backend", "model", "model_version", "outcome", "outcome_correct", "latency_ms", "cost",
    "action", "fallback", "metadata",
)  # fmt: skip
ACTIONS: tuple[str, ...] = ("accept", "abstain", "fallback", "human_review")


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _int_to_text(value: Any) -> Any:
    # score levels are written as numbers; labels are strings
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


class ProductionRecord(_Frozen):
    """One decision observed after deployment; outcome and routing fields arrive later, so
    they are optional and stay unknown when absent."""

    id: str = Field(min_length=1)
    timestamp: str | None = None
    decision: str
    input: DecisionInput | None = None
    probabilities: dict[str, float]
    selected: str
    confidence: Probability
    backend: str | None = None
    model: str | None = None
    model_version: str | None = None
    outcome: str | None = None
    outcome_correct: bool | None = None
    latency_ms: NonNegative | None = None
    cost: NonNegative | None = None
    action: PolicyAction | None = None
    fallback: bool | None = None
    metadata: dict[str, Any] = {}

    _labels = field_validator("selected", "outcome", mode="before")(_int_to_text)

    @field_validator("timestamp")
    @classmethod
    def _iso_with_zone(cls, value: str | None) -> str | None:
        problem = None if value is None else timestamp_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value


# --- the stored check report -------------------------------------------------------------


class ReliabilityBin(_Frozen):
    lower: float
    upper: float
    count: int
    mean_confidence: float | None
    accuracy: float | None


class ProductionCounts(_Frozen):
    total: int
    with_outcome: int
    with_correctness: int
    with_action: int
    with_fallback: int
    with_latency: int
    with_cost: int


class OutcomeMetrics(_Frozen):
    n: int
    accuracy: float | None
    error_rate: float | None


class ProductionCalibration(_Frozen):
    n: int
    ece: float | None
    n_label_outcomes: int
    brier: float | None
    nll: float | None
    bins: int
    reliability: list[ReliabilityBin]


class ConfidenceMetrics(_Frozen):
    n: int
    mean: float | None
    p50: float | None
    p95: float | None
    histogram: list[int]


class ThresholdMetrics(_Frozen):
    threshold: float
    n: int
    coverage: float | None


class RoutingMetrics(_Frozen):
    n_actions: int
    abstention_rate: float | None
    human_review_rate: float | None
    n_fallback: int
    fallback_rate: float | None


class OptionalAggregate(_Frozen):
    n: int
    mean: float | None
    p95: float | None
    total: float | None = None


class ProductionMetrics(_Frozen):
    counts: ProductionCounts
    outcomes: OutcomeMetrics
    calibration: ProductionCalibration
    confidence: ConfidenceMetrics
    threshold: ThresholdMetrics | None
    routing: RoutingMetrics
    latency_ms: OptionalAggregate
    cost: OptionalAggregate


class Check(_Frozen):
    gate: str
    level: Literal["requirement", "warning"]
    metric: str
    comparison: Literal[">=", "<="]
    threshold: float
    value: float | None
    status: Status
    message: str


class ContractInfo(_Frozen):
    name: str
    type: Literal["choice", "noul", "score"]
    labels: tuple[str, ...]
    schema_version: str
    hash: str
    path: str


class ProductionDatasetInfo(_Frozen):
    path: str
    hash: str
    n_records: int
    n_outcomes: int
    n_correctness: int


class BaselineInfo(_Frozen):
    source: Literal["dataset", "report"]
    path: str
    hash: str
    n_records: int
    metrics: ProductionMetrics


class ProductionDrift(_Frozen):
    confidence_mean_delta: float | None
    confidence_tv_distance: float | None
    accuracy_drop: float | None
    ece_increase: float | None


class SegmentReport(_Frozen):
    key: str
    value: SegmentValue
    metrics: ProductionMetrics
    checks: list[Check]
    status: Status


class ReportHeader(_Frozen):
    """Everything of a check report but its records, which are checked column-wise.
    (Model names are DecGuard's: pydantic puts them in some messages.)"""

    check_version: Literal["0.1"] = "0.1"
    decguard_version: str
    created_at: str
    status: Status
    exit_code: int
    contract: ContractInfo
    evaluation: Evaluation
    config: Production
    dataset: ProductionDatasetInfo
    baseline: BaselineInfo | None = None
    metrics: ProductionMetrics
    drift: ProductionDrift
    segments: list[SegmentReport]
    checks: list[Check]


class ProductionReport(ReportHeader):
    records: list[ProductionRecord]
