"""One stored decision result (a ``results[]`` record of DecGuard's report files): its
schema and the invariants every result satisfies. Shared by the test/fuzz report, the
``properties`` section (whose originals and transformed results are the same records) and the
runtime decision models."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import chain
from operator import itemgetter
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator, model_validator

from decguard_pipeline.core.decision import select_many
from decguard_pipeline.core.exact import row_fsum
from decguard_pipeline.core.secrets import redact

_STR = {str}
_FLOAT = frozenset({float})
_NUMBER = frozenset({float, int})
_PROBABILITIES = itemgetter("probabilities")
_SELECTED = itemgetter("selected")
_CONFIDENCE = itemgetter("confidence")
DecisionType = Literal["choice", "noul", "score"]


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


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
