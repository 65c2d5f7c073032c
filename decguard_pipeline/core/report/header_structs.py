"""A stored report's header as msgspec structs: :class:`schema.ReportModel` read without
pydantic.

The structs accept part of what the models accept (JSON's own types only, see
``core.contract.settings_structs``) and give the same values and the same dict
(:func:`header_document`, the model's ``model_dump(mode="json")`` without ``results`` and
``properties``). What they refuse goes to the models. A differential test holds them to the
models.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from decguard_pipeline.core.contract.settings_structs import Evaluation, Gates, Strict, read
from decguard_pipeline.core.secrets import redact

Status = Literal["pass", "warn", "fail"]
DecisionType = Literal["choice", "noul", "score"]


class ContractInfo(Strict, kw_only=True):
    name: str
    type: DecisionType
    labels: list[str]
    schema_version: str
    hash: str
    path: str


class DatasetInfo(Strict, kw_only=True):
    path: str
    hash: str
    n_cases: int
    n_labeled: int


class BackendInfo(Strict, kw_only=True):
    name: str
    provider: str
    model: str | None = None
    model_version: str | None = None
    details: dict[str, Any] = {}

    def __post_init__(self) -> None:
        self.details = redact(self.details)


class Health(Strict, kw_only=True):
    status: Literal["ok", "unhealthy", "unknown"]
    detail: str = ""


class Counts(Strict, kw_only=True):
    total: int
    succeeded: int
    errored: int
    labeled: int
    errors_by_kind: dict[str, int]
    error_rate: float


class LabelScores(Strict, kw_only=True):
    precision: float
    recall: float
    f1: float
    support: int


class Classification(Strict, kw_only=True):
    n: int
    accuracy: float | None
    macro_f1: float | None
    per_label: dict[str, LabelScores]
    ordinal_mae: float | None = None


class Bin(Strict, kw_only=True):
    lower: float
    upper: float
    count: int
    mean_confidence: float | None
    accuracy: float | None


class Calibration(Strict, kw_only=True):
    n: int
    ece: float | None
    brier: float | None
    nll: float | None
    bins: int
    reliability: list[Bin]


class Selective(Strict, kw_only=True):
    threshold: float
    n: int
    coverage: float | None
    abstention_rate: float | None
    selective_accuracy: float | None
    n_covered_labeled: int


class Latency(Strict, kw_only=True):
    n: int
    mean_ms: float | None
    p50_ms: float | None
    p90_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    max_ms: float | None


class Metrics(Strict, kw_only=True):
    counts: Counts
    classification: Classification
    calibration: Calibration
    selective: Selective | None
    latency: Latency


class Check(Strict, kw_only=True):
    gate: str
    level: Literal["requirement", "warning"]
    metric: str
    comparison: Literal[">=", "<="]
    threshold: float
    value: float | None
    status: Status
    message: str


class Failure(Strict, kw_only=True):
    case_id: str
    kind: Literal["error", "mismatch"]
    input: str | dict[str, Any]
    expected: str | None = None
    selected: str | None = None
    confidence: float | None = None
    error: str | None = None


class Header(Strict, kw_only=True):
    """The header of a test/fuzz report: all of it but ``results`` and ``properties``."""

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
    checks: list[Check]
    failures: list[Failure]


def header_of(data: dict[str, Any]) -> Header | None:
    """The header of ``data`` (a report's top level, plain JSON values), or None when it is
    not plainly one (the model then says whether, and where, it is wrong)."""
    return read({k: v for k, v in data.items() if k not in ("results", "properties")}, Header)  # type: ignore[no-any-return]


def header_document(header: Header) -> dict[str, Any]:
    """``header`` as ``ReportModel.model_dump(mode="json", exclude={"results",
    "properties"})`` makes it."""
    return msgspec.to_builtins(header)  # type: ignore[no-any-return]
