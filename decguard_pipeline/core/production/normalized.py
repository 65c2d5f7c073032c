"""A valid record as DecGuard stores it in a check report: every field in order, defaults
applied (``id``, ``confidence``), probabilities in canonical label order, coerced types,
and ``outcome_correct`` derived from the outcome when the record leaves it out.

Records are re-read from their source when a report is written, millions of them: the
usual record (every field of its plain JSON type) is rebuilt with a few type tests; any
other goes through the schema, which applies DecGuard's coercions.
"""

from __future__ import annotations

from typing import Any

from decguard_pipeline.core.contract.spec import DecisionSpec
from decguard_pipeline.core.production.records import RECORD_KEYS, prepared
from decguard_pipeline.core.production.schema import ProductionRecord

_NUMBER = (float, int)
_TEXT_OR_NONE = (str, type(None))
_FLAG_OR_NONE = (bool, type(None))
_MISSING = object()


def _coerced(item: Any, position: int) -> dict[str, Any]:
    return ProductionRecord.model_validate(prepared(item, position)).model_dump()


def normalized_record(item: Any, position: int, spec: DecisionSpec) -> dict[str, Any]:
    """The stored form of an item already known to be valid."""
    if type(item) is not dict or not item.keys() <= RECORD_KEYS:
        values = _coerced(item, position)
    else:
        values = _plain(item, position) or _coerced(item, position)
    probabilities = values["probabilities"]
    values["probabilities"] = {label: float(probabilities[label]) for label in spec.labels}
    if values["outcome_correct"] is None and values["outcome"] is not None:
        values["outcome_correct"] = values["outcome"] == values["selected"]
    return values


def _plain(item: dict[str, Any], position: int) -> dict[str, Any] | None:
    """The record rebuilt without the schema, or None if some field needs coercion (a valid
    record cannot be wrong here, only unusual: numbers as text, ints as booleans…)."""
    get = item.get
    selected, outcome = get("selected"), get("outcome")
    confidence = get("confidence", _MISSING)
    if confidence is _MISSING:
        if type(selected) is not str:
            return None
        confidence = item["probabilities"][selected]
    latency, cost = get("latency_ms"), get("cost")
    if (
        type(selected) is not str
        or type(confidence) not in _NUMBER
        or type(outcome) not in _TEXT_OR_NONE
        or (latency is not None and type(latency) not in _NUMBER)
        or (cost is not None and type(cost) not in _NUMBER)
        or type(get("outcome_correct")) not in _FLAG_OR_NONE
        or type(get("fallback")) not in _FLAG_OR_NONE
        or any(type(v) not in _NUMBER for v in item["probabilities"].values())
    ):
        return None
    return {
        "id": get("id") or f"record-{position}",
        "timestamp": get("timestamp"),
        "decision": item["decision"],
        "input": get("input"),
        "probabilities": item["probabilities"],
        "selected": selected,
        "confidence": float(confidence),
        "backend": get("backend"),
        "model": get("model"),
        "model_version": get("model_version"),
        "outcome": outcome,
        "outcome_correct": get("outcome_correct"),
        "latency_ms": None if latency is None else float(latency),
        "cost": None if cost is None else float(cost),
        "action": get("action"),
        "fallback": get("fallback"),
        "metadata": get("metadata", {}),
    }
