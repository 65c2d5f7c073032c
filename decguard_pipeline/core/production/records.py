"""Checking production records (spec §11.1) from parsed JSON items.

Every record is judged exactly as DecGuard judges it. Plainly typed records (the usual case)
are read straight into columns and checked with array operations; a record that is not plain
goes through :class:`~.schema.ProductionRecord`, which applies DecGuard's coercions or explains
the problem. Whatever a vectorised check flags is confirmed, and worded, by
:func:`record_problem`, the one-record reference check, so the first invalid record is always
reported with DecGuard's message.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pydantic import ValidationError

from decguard_pipeline.core.contract.spec import DecisionSpec
from decguard_pipeline.core.decision import select_index, validate_probabilities
from decguard_pipeline.core.errors import InvalidResponse
from decguard_pipeline.core.production.columns import (
    ACTION_CODES,
    UNKNOWN,
    Batch,
    Codebook,
    segment_problem,
)
from decguard_pipeline.core.production.invariants import semantic_suspects
from decguard_pipeline.core.production.schema import RECORD_FIELDS, ProductionRecord
from decguard_pipeline.core.production.timestamps import timestamps_ok
from decguard_pipeline.core.validation import format_errors, lone_surrogate

RECORD_KEYS = frozenset(RECORD_FIELDS)
_EXACT_INT = 2**53  # larger ints are left to pydantic's float conversion
_MISSING = object()


def default_id(position: int) -> str:
    return f"record-{position}"


def prepared(item: Any, position: int) -> Any:
    """The item with DecGuard's defaults: ``id`` from the position and ``confidence`` from
    the selected label's probability when the record leaves them out."""
    if not isinstance(item, dict):
        return item
    out = dict(item)
    out.setdefault("id", default_id(position))
    probabilities, selected = out.get("probabilities"), out.get("selected")
    if "confidence" not in out and isinstance(probabilities, dict):
        try:
            if selected in probabilities:
                out["confidence"] = probabilities[selected]
        except TypeError:
            pass  # an unhashable 'selected': the schema reports it (DecGuard crashes here)
    return out


def normalized_problem(
    record: ProductionRecord, spec: DecisionSpec, tolerance: float
) -> str | None:
    """DecGuard's contract-dependent checks of one parsed record, in its order."""
    if record.decision != spec.name:
        return f"decision {record.decision!r} does not match contract decision {spec.name!r}"
    try:
        probabilities = validate_probabilities(
            spec.labels, record.probabilities, tolerance=tolerance
        )
    except InvalidResponse as exc:
        return str(exc)
    selected = spec.labels[select_index(list(probabilities.values()))]
    if record.selected != selected:
        return f"selected {record.selected!r} is not the most probable label {selected!r}"
    confidence = probabilities[selected]
    if record.confidence != confidence:
        return (
            f"confidence {record.confidence!r} does not equal the probability of "
            f"{selected!r} ({confidence!r})"
        )
    if record.outcome is not None and record.outcome not in spec.labels:
        return f"outcome {record.outcome!r} is not one of the contract labels {list(spec.labels)}"
    if (
        record.outcome is not None
        and record.outcome_correct is not None
        and record.outcome_correct is not (record.outcome == selected)
    ):
        return f"outcome_correct {record.outcome_correct!r} disagrees with selected/outcome"
    if record.action == "fallback" and record.fallback is False:
        return "action 'fallback' conflicts with fallback=false"
    if record.action not in (None, "fallback") and record.fallback is True:
        return f"fallback=true conflicts with action {record.action!r}"
    return None


def parse_record(item: Any, position: int) -> ProductionRecord | str:
    """The record model of a raw item, or DecGuard's 'invalid production record' text."""
    try:
        return ProductionRecord.model_validate(prepared(item, position))
    except ValidationError as exc:
        return f"invalid production record:\n{format_errors(exc)}"


def record_problem(item: Any, position: int, spec: DecisionSpec, tolerance: float) -> str | None:
    """Everything DecGuard checks on one record (except id uniqueness), or None."""
    parsed = parse_record(item, position)
    if isinstance(parsed, str):
        return parsed
    return normalized_problem(parsed, spec, tolerance)


def _number(value: Any) -> bool:
    kind = type(value)
    return kind is float or (kind is int and -_EXACT_INT <= value <= _EXACT_INT)


def _finite(value: Any) -> bool:
    # NaN marks an absent latency/cost in the columns, so a NaN given in the record is left
    # to the schema, which rejects it
    return _number(value) and math.isfinite(value)


def _label(value: Any) -> str | None:
    kind = type(value)
    if kind is str:
        return value
    if kind is int:
        return str(value)
    return None


@dataclass
class Plain:
    """The fields of one record in plain Python types, defaults applied."""

    id: str
    timestamp: str | None
    decision: str
    probabilities: dict[str, Any]
    selected: str
    confidence: float
    outcome: str | None
    outcome_correct: bool | None
    latency_ms: float | None
    cost: float | None
    action: str | None
    fallback: bool | None
    model_version: str | None
    metadata: dict[str, Any]


_OPTIONAL_TEXT = ("timestamp", "backend", "model", "model_version")


def plain_record(item: Any, position: int, labels: frozenset[str]) -> Plain | None:
    """The record's fields when every one has exactly the expected JSON type (so no coercion
    applies); None sends the record to the schema, which coerces or explains."""
    if type(item) is not dict or not item.keys() <= RECORD_KEYS:
        return None
    get = item.get
    record_id = get("id", _MISSING)
    if record_id is _MISSING:
        record_id = default_id(position)
    elif type(record_id) is not str or not record_id:
        return None
    elif not record_id.isascii() and lone_surrogate(record_id) is not None:
        return None  # the schema refuses it, in DecGuard's words
    for key in _OPTIONAL_TEXT:
        value = get(key)
        if value is not None and type(value) is not str:
            return None
    decision, probabilities = get("decision"), get("probabilities")
    if type(decision) is not str or type(probabilities) is not dict:
        return None
    if probabilities.keys() != labels or not all(map(_number, probabilities.values())):
        return None
    raw_selected = get("selected")
    selected = _label(raw_selected)
    if selected is None:
        return None
    confidence = get("confidence", _MISSING)
    if confidence is _MISSING:
        # DecGuard defaults it from the raw 'selected' key (an int never matches)
        if type(raw_selected) is not str or raw_selected not in probabilities:
            return None
        confidence = probabilities[raw_selected]
    elif not _number(confidence):
        return None
    value = get("input")
    if value is not None and type(value) is not str and type(value) is not dict:
        return None
    outcome = get("outcome")
    if outcome is not None and (outcome := _label(outcome)) is None:
        return None
    correct, fallback = get("outcome_correct"), get("fallback")
    if (correct is not None and type(correct) is not bool) or (
        fallback is not None and type(fallback) is not bool
    ):
        return None
    latency, cost = get("latency_ms"), get("cost")
    if (latency is not None and not _finite(latency)) or (cost is not None and not _finite(cost)):
        return None
    action = get("action")
    if action is not None and action not in ACTION_CODES:
        return None
    metadata = get("metadata", _MISSING)
    if metadata is _MISSING:
        metadata = {}
    elif type(metadata) is not dict:
        return None
    return Plain(
        record_id, get("timestamp"), decision, probabilities, selected, float(confidence),
        outcome, correct, None if latency is None else float(latency),
        None if cost is None else float(cost), action, fallback, get("model_version"), metadata,
    )  # fmt: skip


def _from_model(record: ProductionRecord) -> Plain:
    return Plain(
        record.id, record.timestamp, record.decision, dict(record.probabilities),
        record.selected, record.confidence, record.outcome, record.outcome_correct,
        record.latency_ms, record.cost, record.action, record.fallback, record.model_version,
        record.metadata,
    )  # fmt: skip


@dataclass
class Checked:
    """Items turned into a batch: ``first_bad`` is the earliest invalid item (index into the
    items) and its problem, when there is one; the batch holds the items before it."""

    batch: Batch | None
    first_bad: tuple[int, str] | None


@dataclass
class Item:
    """A raw item, or a problem met before it could be parsed (bad JSON, bad UTF-8)."""

    value: Any
    position: int  # 1-based among the non-blank items of the source
    problem: str | None = None


def check_items(
    items: Sequence[Item],
    spec: DecisionSpec,
    tolerance: float,
    segment_keys: tuple[str, ...],
    versions: Codebook,
    segment_values: dict[str, Codebook],
) -> Checked:
    """Check items in order and return the columns of the valid prefix."""
    labels = spec.labels
    label_set = frozenset(labels)
    rows: list[Plain] = []
    first_bad: tuple[int, str] | None = None
    for i, item in enumerate(items):
        if item.problem is not None:
            first_bad = (i, item.problem)
            break
        plain = plain_record(item.value, item.position, label_set)
        if plain is None:
            parsed = parse_record(item.value, item.position)
            if isinstance(parsed, str):
                first_bad = (i, parsed)
                break
            plain = _from_model(parsed)
        rows.append(plain)
    # array checks over the parsed prefix; a flagged row is confirmed and worded one by one
    suspects = _suspects(rows, spec, tolerance)
    for i in np.flatnonzero(suspects).tolist():
        if first_bad is not None and i >= first_bad[0]:
            break
        item = items[i]
        problem = record_problem(item.value, item.position, spec, tolerance)
        if problem is not None:
            first_bad = (i, problem)
            break
    end = len(rows) if first_bad is None else first_bad[0]
    batch = _batch(rows[:end], items[:end], spec, segment_keys, versions, segment_values)
    return Checked(batch, first_bad)


def _suspects(rows: list[Plain], spec: DecisionSpec, tolerance: float) -> np.ndarray:
    """Rows some contract-dependent check may reject (a superset of the invalid ones)."""
    n, labels = len(rows), spec.labels
    if not n:
        return np.zeros(0, dtype=bool)
    # a coerced record may name other labels: its row reads NaN and is flagged
    probs = np.array(
        [[float(r.probabilities.get(label, np.nan)) for label in labels] for r in rows]
    )
    bad = np.array([len(r.probabilities) != len(labels) for r in rows])
    index = {label: i for i, label in enumerate(labels)}
    selected = np.array([index.get(r.selected, -1) for r in rows])
    confidence = np.array([r.confidence for r in rows])
    outcome = np.array([-1 if r.outcome is None else index.get(r.outcome, -2) for r in rows])
    correct = np.array([-1 if r.outcome_correct is None else int(r.outcome_correct) for r in rows])
    action = np.array([ACTION_CODES.get(r.action, -1) if r.action else -1 for r in rows])
    fallback = np.array([-1 if r.fallback is None else int(r.fallback) for r in rows])
    latency = np.array([np.nan if r.latency_ms is None else r.latency_ms for r in rows])
    cost = np.array([np.nan if r.cost is None else r.cost for r in rows])
    bad |= np.array([r.decision != spec.name for r in rows])
    bad |= semantic_suspects(
        probs, selected, confidence, outcome, correct, action, fallback, tolerance
    )
    bad |= ~np.isnan(latency) & ~((latency >= 0) & np.isfinite(latency))
    bad |= ~np.isnan(cost) & ~((cost >= 0) & np.isfinite(cost))
    stamps = pa.array([r.timestamp for r in rows], type=pa.string())
    bad |= ~timestamps_ok(stamps)
    return bad


def _batch(
    rows: list[Plain],
    items: Sequence[Item],
    spec: DecisionSpec,
    segment_keys: tuple[str, ...],
    versions: Codebook,
    segment_values: dict[str, Codebook],
) -> Batch | None:
    if not rows:
        return None
    labels = spec.labels
    index = {label: i for i, label in enumerate(labels)}
    probs = np.array([[float(r.probabilities[label]) for label in labels] for r in rows])
    outcome = np.array([-1 if r.outcome is None else index[r.outcome] for r in rows])
    selected = np.array([index[r.selected] for r in rows])
    correct = [
        r.outcome_correct if r.outcome_correct is not None
        else (None if r.outcome is None else r.outcome == r.selected)
        for r in rows
    ]  # fmt: skip
    segments = {}
    for key in segment_keys:
        book = segment_values[key]
        values = []
        for row, item in zip(rows, items, strict=False):
            value = row.metadata.get(key)
            problem = segment_problem(value)
            if problem is not None:
                book.note_invalid(item.position, row.id, problem)
                value = None
            values.append(value)
        segments[key] = book.codes(values)
    return Batch(
        ids=pa.array([r.id for r in rows], type=pa.string()),
        probs=probs,
        selected=selected,
        outcome=outcome,
        correct=np.array([UNKNOWN if c is None else int(c) for c in correct]),
        action=np.array([UNKNOWN if r.action is None else ACTION_CODES[r.action] for r in rows]),
        fallback=np.array([UNKNOWN if r.fallback is None else int(r.fallback) for r in rows]),
        latency_ms=np.array([np.nan if r.latency_ms is None else r.latency_ms for r in rows]),
        cost=np.array([np.nan if r.cost is None else r.cost for r in rows]),
        model_version=versions.codes([r.model_version for r in rows]),
        segments=segments,
    )
