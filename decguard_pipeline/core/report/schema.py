"""Pydantic schemas of stored documents, used to load them strictly.

They give DecGuard's structural error messages (``location: message``); the arithmetic
checks (recomputed metrics, checks, status) live in :mod:`verify`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import field_validator, model_validator

from decguard_pipeline.core.contract import Evaluation, Gates
from decguard_pipeline.core.decision import DecisionInput
from decguard_pipeline.core.result_records import (
    CaseErrorModel,
    DecisionType,
    ResultModel,
    Section,
)
from decguard_pipeline.core.secrets import redact

Status = Literal["pass", "warn", "fail"]


class ContractInfo(Section):
    name: str
    type: DecisionType
    labels: tuple[str, ...]
    schema_version: str
    hash: str
    path: str


class DatasetInfo(Section):
    path: str
    hash: str
    n_cases: int
    n_labeled: int


class BackendInfo(Section):
    name: str
    provider: str
    model: str | None = None
    model_version: str | None = None
    details: dict[str, Any] = {}

    _redact = field_validator("details", mode="before")(redact)


class Health(Section):
    status: Literal["ok", "unhealthy", "unknown"]
    detail: str = ""


class Counts(Section):
    total: int
    succeeded: int
    errored: int
    labeled: int
    errors_by_kind: dict[str, int]
    error_rate: float


class LabelScores(Section):
    precision: float
    recall: float
    f1: float
    support: int


class Classification(Section):
    n: int
    accuracy: float | None
    macro_f1: float | None
    per_label: dict[str, LabelScores]
    ordinal_mae: float | None = None


class Bin(Section):
    lower: float
    upper: float
    count: int
    mean_confidence: float | None
    accuracy: float | None


class Calibration(Section):
    n: int
    ece: float | None
    brier: float | None
    nll: float | None
    bins: int
    reliability: list[Bin]


class Selective(Section):
    threshold: float
    n: int
    coverage: float | None
    abstention_rate: float | None
    selective_accuracy: float | None
    n_covered_labeled: int


class Latency(Section):
    n: int
    mean_ms: float | None
    p50_ms: float | None
    p90_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    max_ms: float | None


class Metrics(Section):
    counts: Counts
    classification: Classification
    calibration: Calibration
    selective: Selective | None
    latency: Latency


class CheckModel(Section):
    gate: str
    level: Literal["requirement", "warning"]
    metric: str
    comparison: Literal[">=", "<="]
    threshold: float
    value: float | None
    status: Status
    message: str


class FailureModel(Section):
    case_id: str
    kind: Literal["error", "mismatch"]
    input: DecisionInput
    expected: str | None = None
    selected: str | None = None
    confidence: float | None = None
    error: str | None = None


class CaseRecordModel(Section):
    case_id: str
    input: DecisionInput
    expected: str | None = None
    metadata: dict[str, Any] = {}
    result: ResultModel | None = None
    error: CaseErrorModel | None = None

    @model_validator(mode="after")
    def _result_xor_error(self) -> CaseRecordModel:
        if (self.result is None) == (self.error is None):
            raise ValueError("a case record must have exactly one of 'result' or 'error'")
        if self.result is not None and self.result.case_id != self.case_id:
            raise ValueError(
                f"result.case_id {self.result.case_id!r} does not match case_id {self.case_id!r}"
            )
        return self


class ReportModel(Section):
    """A test/fuzz report; ``results`` and ``properties`` are checked separately."""

    report_version: Literal["0.1"] = "0.1"
    decguard_version: str
    created_at: str
    mode: Literal["test", "fuzz", "all"] = "test"
    status: Status
    exit_code: int
    contract: ContractInfo
    dataset: DatasetInfo
    backend: BackendInfo
    health: Health | None = None
    evaluation: Evaluation
    requirements: Gates
    warnings: Gates
    metrics: Metrics
    checks: list[CheckModel]
    failures: list[FailureModel]
    results: list[Any]
    properties: dict[str, Any] | None = None


class ReportDocument(ReportModel):
    """A whole report with typed case records: the slow path that explains what is wrong."""

    results: list[CaseRecordModel]  # type: ignore[assignment]
