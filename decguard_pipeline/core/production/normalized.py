"""A valid record as DecGuard stores it in a check report: every field in order, defaults
applied (``id``, ``confidence``), probabilities in canonical label order, coerced types,
and ``outcome_correct`` derived from the outcome when the record leaves it out."""

from __future__ import annotations

from functools import cache
from typing import Any

from decguard_pipeline.core.contract.decision import DecisionSpec
from decguard_pipeline.core.production.records import plain_record, prepared
from decguard_pipeline.core.production.schema import ProductionRecord


@cache
def _label_set(labels: tuple[str, ...]) -> frozenset[str]:
    return frozenset(labels)


def normalized_record(item: Any, position: int, spec: DecisionSpec) -> dict[str, Any]:
    """The stored form of an item already known to be valid."""
    labels = spec.labels
    plain = plain_record(item, position, _label_set(labels))
    if plain is None:
        values = ProductionRecord.model_validate(prepared(item, position)).model_dump()
    else:
        get = item.get
        values = {
            "id": plain.id, "timestamp": plain.timestamp, "decision": plain.decision,
            "input": get("input"), "probabilities": plain.probabilities,
            "selected": plain.selected, "confidence": plain.confidence,
            "backend": get("backend"), "model": get("model"),
            "model_version": plain.model_version, "outcome": plain.outcome,
            "outcome_correct": plain.outcome_correct, "latency_ms": plain.latency_ms,
            "cost": plain.cost, "action": plain.action, "fallback": plain.fallback,
            "metadata": plain.metadata,
        }  # fmt: skip
    probabilities = values["probabilities"]
    values["probabilities"] = {label: float(probabilities[label]) for label in labels}
    if values["outcome_correct"] is None and values["outcome"] is not None:
        values["outcome_correct"] = values["outcome"] == values["selected"]
    return values
