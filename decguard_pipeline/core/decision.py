"""Decisions: requests, raw predictions and their validation into normalised results.

A backend's answer is checked, never repaired: the probabilities must cover exactly the
contract's labels, be finite and non-negative, and sum to 1 within the contract's tolerance.
They are then put in canonical label order; the selected label is the most probable one,
ties going to the label listed first, and confidence is its probability.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from decguard_pipeline.core.contract.spec import DecisionSpec
from decguard_pipeline.core.errors import InvalidResponse
from decguard_pipeline.core.exact import row_fsum

DEFAULT_TOLERANCE = 1e-3
# Limits on what a model may ask us to store with each answer (a pipeline extension; DecGuard
# keeps whatever it gets). The depth keeps every report readable by DecGuard's parser, which
# refuses a value inside more than 200 arrays and objects; a result's metadata sits at most
# 7 levels down in any document written here.
DEFAULT_MAX_METADATA_BYTES = 64 * 1024
MAX_METADATA_DEPTH = 128

DecisionInput = str | dict[str, Any]


class DecisionRequest(NamedTuple):
    """One decision to make. ``decision.labels`` are the labels as presented to the model.
    (Immutable; a named tuple because a run builds one per case and a frozen dataclass
    costs four times as much to build.)"""

    case_id: str
    decision: DecisionSpec
    input: DecisionInput


@dataclass(frozen=True, slots=True)
class Prediction:
    """A backend's raw answer, before validation.

    ``usage`` is (prompt_tokens, completion_tokens) spent on the case when the backend says;
    ``queued_ms`` is time the backend spent waiting for its own rate limit, which is
    queueing, not model latency: the runner subtracts it from the measured latency. Neither
    enters DecGuard's report."""

    probabilities: Any
    model: str | None = None
    model_version: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    usage: tuple[int, int] | None = None
    queued_ms: float = 0.0


def _row_values(labels: Sequence[str], raw: Any) -> list[float]:
    """Values of ``raw`` in label order; raises InvalidResponse for a malformed mapping."""
    if not isinstance(raw, Mapping):
        raise InvalidResponse(f"probabilities must be an object, got {type(raw).__name__}")
    missing = [label for label in labels if label not in raw]
    unknown = sorted(str(key) for key in raw if key not in labels)
    if missing or unknown:
        parts = []
        if missing:
            parts.append(f"missing labels {missing}")
        if unknown:
            parts.append(f"unknown labels {unknown}")
        raise InvalidResponse("probabilities do not match the contract labels: " + "; ".join(parts))
    values = []
    for label in labels:
        value = raw[label]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InvalidResponse(f"probability for {label!r} is not a number: {value!r}")
        number = float(value)
        if not math.isfinite(number):
            raise InvalidResponse(f"probability for {label!r} is not finite: {number!r}")
        if number < 0.0:
            raise InvalidResponse(f"probability for {label!r} is negative: {number!r}")
        values.append(number)
    return values


def sum_message(total: float, tolerance: float) -> str:
    """Why a distribution's sum is refused."""
    return f"probabilities sum to {total:.6g}, outside 1 ± {tolerance:g}"


def validate_probabilities(
    labels: Sequence[str], raw: Any, *, tolerance: float = DEFAULT_TOLERANCE
) -> dict[str, float]:
    """One distribution in canonical order, or InvalidResponse describing what is wrong."""
    values = _row_values(labels, raw)
    total = math.fsum(values)
    if abs(total - 1.0) > tolerance:
        raise InvalidResponse(sum_message(total, tolerance))
    return dict(zip(labels, values, strict=True))


def metadata_problem(metadata: Mapping[str, Any], max_bytes: int) -> str | None:
    """Why a result's ``metadata`` cannot be stored, or None: nested more than
    MAX_METADATA_DEPTH levels (the object itself is level 1), or larger than ``max_bytes``
    as compact JSON."""
    stack: list[tuple[Any, int]] = [(metadata, 1)]
    while stack:
        value, depth = stack.pop()
        children = value.values() if isinstance(value, Mapping) else value
        for child in children:
            if isinstance(child, Mapping | list | tuple):
                if depth + 1 > MAX_METADATA_DEPTH:
                    return f"metadata is nested more than {MAX_METADATA_DEPTH} levels deep"
                stack.append((child, depth + 1))
    size = _json_size(metadata)
    if size > max_bytes:
        return f"metadata is {size} bytes as JSON, over the limit of {max_bytes} bytes"
    return None


def _json_size(value: Any) -> int:
    import orjson

    try:
        return len(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS))
    except (orjson.JSONEncodeError, TypeError):  # integers beyond 64 bits, odd plugin values
        import json

        return len(json.dumps(value, separators=(",", ":"), default=str).encode("utf-8"))


def select_index(values: Sequence[float]) -> int:
    """Index of the most probable label; ties go to the first."""
    best = 0
    for i in range(1, len(values)):
        if values[i] > values[best]:
            best = i
    return best


@dataclass
class ValidatedBatch:
    """Many predictions validated at once: a probability matrix in canonical label order plus
    one error message per invalid row (None where valid)."""

    probs: np.ndarray  # (n, k); NaN rows where invalid
    errors: list[str | None]
    # error kind per invalid row: invalid_response, or exception for a value no float can
    # hold (a 400-digit integer), which DecGuard reports as an unexpected exception
    kinds: list[str | None] = field(default_factory=list)

    @property
    def ok(self) -> np.ndarray:
        return np.array([e is None for e in self.errors], dtype=bool)


def validate_many(
    labels: Sequence[str], raws: Sequence[Any], *, tolerance: float = DEFAULT_TOLERANCE
) -> ValidatedBatch:
    """Validate many raw probability mappings; sum checks are vectorised and exact.

    Backends may hand back the same (read-only) mapping for many cases, as the mock does
    for its configured answers: each distinct mapping (found by identity, column-wise) is
    read and summed once, and its row copied to every case that got it."""
    n, k = len(raws), len(labels)
    probs = np.full((n, k), np.nan)
    errors: list[str | None] = [None] * n
    kinds: list[str | None] = [None] * n
    if not n:
        return ValidatedBatch(probs, errors, kinds)
    # the mappings by identity: ``first`` holds one row per distinct mapping, ``slot`` maps
    # every row to its distinct mapping (the raws are alive, so identities are unique)
    identities = np.fromiter(map(id, raws), dtype=np.uint64, count=n)
    _, first, slot = np.unique(identities, return_index=True, return_inverse=True)
    label_tuple = tuple(labels)
    label_set = frozenset(labels)
    table: list[list[float]] = []
    table_slot: list[int] = []  # distinct mapping of each table row
    failed: dict[int, tuple[str, str]] = {}  # distinct mapping -> (kind, message)
    for distinct, row_index in enumerate(first.tolist()):
        raw = raws[row_index]
        row: list[float] | None = None
        # fast path: a plain dict with exactly the labels and float values
        if type(raw) is dict and len(raw) == k and raw.keys() == label_set:
            row = [raw[label] for label in label_tuple]
            if not all(type(v) is float and v >= 0.0 and v != math.inf for v in row):
                row = None
        if row is None:
            try:
                row = _row_values(label_tuple, raw)
            except InvalidResponse as exc:
                failed[distinct] = (InvalidResponse.kind, str(exc))
                continue
            except OverflowError as exc:  # a 400-digit integer: DecGuard's "exception"
                failed[distinct] = ("exception", f"OverflowError: {exc}")
                continue
        table.append(row)
        table_slot.append(distinct)
    # per distinct mapping: its table row, or -1 when it failed
    row_of = np.full(len(first), -1, dtype=np.intp)
    row_of[np.asarray(table_slot, dtype=np.intp)] = np.arange(len(table_slot))
    if table:
        rows = np.array(table, dtype=np.float64)
        totals = row_fsum(rows)
        outside = np.abs(totals - 1.0) > tolerance
        for t in np.flatnonzero(outside).tolist():
            failed[table_slot[t]] = (
                InvalidResponse.kind, sum_message(float(totals[t]), tolerance)
            )  # fmt: skip
            row_of[table_slot[t]] = -1
        good = row_of[slot]
        ok = good >= 0
        probs[ok] = rows[good[ok]]
    if failed:
        bad = np.fromiter(failed, dtype=np.intp, count=len(failed))
        for i in np.flatnonzero(np.isin(slot, bad)).tolist():
            kinds[i], errors[i] = failed[int(slot[i])]
    return ValidatedBatch(probs, errors, kinds)


def select_many(probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Selected index (first maximum, -1 for NaN rows) and confidence per row."""
    n = probs.shape[0]
    ok = ~np.isnan(probs).any(axis=1) if n else np.zeros(0, dtype=bool)
    selected = np.full(n, -1, dtype=np.int64)
    confidence = np.full(n, np.nan)
    if ok.any():
        rows = probs[ok]
        idx = np.argmax(rows, axis=1)
        selected[ok] = idx
        confidence[ok] = rows[np.arange(len(rows)), idx]
    return selected, confidence
