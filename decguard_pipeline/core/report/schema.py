"""Pydantic schemas of stored documents, used to load them strictly.

They give DecGuard's structural error messages (``location: message``); the arithmetic
checks (recomputed metrics, checks, status) live in :mod:`verify`.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import chain
from operator import itemgetter
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator, model_validator

from decguard_pipeline.core.contract import Evaluation, Gates
from decguard_pipeline.core.decision import DecisionInput, select_many
from decguard_pipeline.core.exact import row_fsum
from decguard_pipeline.core.validation import redact

Status = Literal["pass", "warn", "fail"]
_STR = {str}
_FLOAT = frozenset({float})
_NUMBER = frozenset({float, int})
_PROBABILITIES = itemgetter("probabilities")
_SELECTED = itemgetter("selected")
_CONFIDENCE = itemgetter("confidence")
DecisionType = Literal["choice", "noul", "score"]


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


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


class ResultModel(Section):
    case_id: str
    decision: str
    decision_type: DecisionType
    labels: tuple[str, ...]
    probabilities: dict[str, float]
    selected: str
    confidence: float
    backend: str
    provider: str
    model: str | None = None
    model_version: str | None = None
    latency_ms: float
    metadata: dict[str, Any] = {}

    _redact = field_validator("metadata", mode="before")(redact)

    @model_validator(mode="after")
    def _consistent(self, info: ValidationInfo) -> ResultModel:
        context = info.context if isinstance(info.context, dict) else {}
        problem = check_result_invariants(
            {
                "labels": self.labels,
                "probabilities": self.probabilities,
                "selected": self.selected,
                "confidence": self.confidence,
            },
            context.get("probability_tolerance", 1e-3),
        )
        if problem:
            raise ValueError(problem)
        return self


class CaseErrorModel(Section):
    kind: str
    message: str


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


def check_result_invariants(result: dict[str, Any], tolerance: float) -> str | None:
    """Why a stored DecisionResult is inconsistent, or None when it holds."""
    from decguard_pipeline.core.decision import select_index, validate_probabilities
    from decguard_pipeline.core.errors import InvalidResponse

    labels = tuple(result["labels"])
    probabilities = result["probabilities"]
    if not labels:
        return "labels must not be empty"
    if len(set(labels)) != len(labels):
        return f"labels contain duplicates: {list(labels)}"
    if list(probabilities) != list(labels):
        return (
            f"probabilities must list exactly the labels {list(labels)} in that order, "
            f"got {list(probabilities)}"
        )
    try:
        validate_probabilities(labels, probabilities, tolerance=tolerance)
    except InvalidResponse as exc:
        return str(exc)
    best = labels[select_index([probabilities[label] for label in labels])]
    if result["selected"] != best:
        return f"selected {result['selected']!r} is not the most probable label {best!r}"
    if result["confidence"] != probabilities[best]:
        return (
            f"confidence {result['confidence']!r} does not equal the probability of "
            f"{best!r} ({probabilities[best]!r})"
        )
    return None


def results_hold(
    results: Iterable[dict[str, Any]], tolerance: float, *, floats: bool = False
) -> bool:
    """True when :func:`check_result_invariants` finds nothing wrong with any of ``results``
    (plain dicts whose ``labels`` are lists and ``probabilities`` dicts), checked for all of
    them at once: per label set, one probability matrix, its exact row sums (``row_fsum``,
    equal to ``math.fsum``) and its first maxima. ``floats``: the probabilities must also be
    floats (the schema's normalised form), not integers. It says only whether they all hold;
    the schema explains what does not."""
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    try:
        for result in results:
            groups.setdefault(tuple(result["labels"]), []).append(result)
    except TypeError:  # a label that is a list or an object
        return False
    allowed = _FLOAT if floats else _NUMBER
    for labels, members in groups.items():
        if not labels or len(set(labels)) != len(labels) or set(map(type, labels)) != _STR:
            return False
        order = list(labels)
        probabilities = list(map(_PROBABILITIES, members))
        if list(map(list, probabilities)).count(order) != len(members):
            return False
        # every row has exactly the labels' values, in order: one flat list of them all
        values = list(chain.from_iterable(map(dict.values, probabilities)))
        # numbers only (a bool is none), each finite and >= 0, summing to 1 within tolerance
        if not set(map(type, values)) <= allowed:
            return False
        try:
            matrix = np.array(values, dtype=np.float64).reshape(len(members), len(labels))
        except OverflowError:  # an integer no float can hold
            return False
        if not (np.isfinite(matrix).all() and (matrix >= 0.0).all()):
            return False
        if (np.abs(row_fsum(matrix) - 1.0) > tolerance).any():
            return False
        selected, confidence = select_many(matrix)
        if list(map(_SELECTED, members)) != [labels[i] for i in selected.tolist()]:
            return False
        if list(map(_CONFIDENCE, members)) != confidence.tolist():
            return False
    return True
