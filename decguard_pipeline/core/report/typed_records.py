"""A stored report decoded straight into typed records (msgspec), its results into columns.

The fastest of ``verify``'s ways to read a report: msgspec checks every record's shape and
types while it parses (in C, no dict per record), and the results' invariants are checked a
column at a time. It accepts only what the plain-dict path (``verify._record_ok``,
``results_hold`` and the per-record checks of ``verify._semantics``) accepts and builds the
same columns; anything else (a problem, or anything unusual) returns None and the report
goes the way it always went, which finds and words the problem exactly.

msgspec reads JSON as the standard library does where it accepts it: integers of any size
stay exact, a repeated key keeps its last value, floats are correctly rounded. It refuses
NaN, Infinity, numbers beyond a float and lone surrogates, which the standard library reads:
those reports take the other path.
"""

from __future__ import annotations

from itertools import repeat
from operator import attrgetter, is_, is_not
from typing import Any, Generic, NamedTuple

import msgspec
import numpy as np

from decguard_pipeline.core.contract.spec import DecisionSpec
from decguard_pipeline.core.decision import DEFAULT_TOLERANCE
from decguard_pipeline.core.properties.typed_section import TypedSection
from decguard_pipeline.core.result_structs import (
    SHALLOW_OBJECT_DEPTH,
    Free,
    Shallow,
    TypedResult,
    deepest,
    probabilities_hold,
)
from decguard_pipeline.core.results import CaseResults
from decguard_pipeline.core.secrets import redact

UNSET: Any = msgspec.UNSET


class _Error(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    kind: str
    message: str


class _Record(msgspec.Struct, Generic[Free], forbid_unknown_fields=True, gc=False):
    case_id: str
    input: str | dict[str, Free]
    expected: str | None = None
    metadata: dict[str, Free] = {}
    result: TypedResult[Free] | None = None
    error: _Error | None = None


class _Stored(msgspec.Struct, Generic[Free], forbid_unknown_fields=True, gc=False):
    """The report's top level: ``results`` typed, every other key as plain JSON values and
    UNSET where absent (the header's schema, pydantic, says what is missing)."""

    results: list[_Record[Free]]
    report_version: Any = UNSET
    decguard_version: Any = UNSET
    created_at: Any = UNSET
    mode: Any = UNSET
    status: Any = UNSET
    exit_code: Any = UNSET
    contract: Any = UNSET
    dataset: Any = UNSET
    backend: Any = UNSET
    health: Any = UNSET
    evaluation: Any = UNSET
    requirements: Any = UNSET
    warnings: Any = UNSET
    metrics: Any = UNSET
    checks: Any = UNSET
    failures: Any = UNSET
    properties: TypedSection[Free] | msgspec.UnsetType | None = UNSET  # the typed pairs


_CASE_ID, _RESULT, _ERROR, _EXPECTED, _INPUT, _METADATA = map(
    attrgetter, ("case_id", "result", "error", "expected", "input", "metadata")
)
_CONFIDENCE, _LATENCY = map(attrgetter, ("confidence", "latency_ms"))
_CONTEXT = tuple(map(attrgetter, ("decision", "decision_type", "backend", "provider")))
_SHALLOW = msgspec.json.Decoder(_Stored[Shallow])  # type: ignore[valid-type]
_ANY = msgspec.json.Decoder(_Stored[Any])
_HEADER = tuple(name for name in _Stored.__struct_fields__ if name != "results")


class Decoded(NamedTuple):
    header: dict[str, Any]  # plain JSON values, ``results`` an empty list
    records: list[_Record[Any]]
    shallow: bool  # the free values were read as ``Shallow``: no deeper than its type


def stored_tolerance(data: Any) -> float:
    """The tolerance the report was made with (DecGuard's default when malformed)."""
    try:
        value = data["evaluation"]["probability_tolerance"]
    except (TypeError, KeyError):
        return DEFAULT_TOLERANCE
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 0.1:
        return DEFAULT_TOLERANCE
    return float(value)


def decode(raw: bytes) -> Decoded | None:
    """The header and the typed records, or None when msgspec refuses the document. The
    free values are read as ``Shallow`` ones, or when any is deeper, as any JSON value."""
    try:
        stored, shallow = _SHALLOW.decode(raw), True
    except msgspec.ValidationError:  # something deeper, or anything else: read again
        try:
            stored, shallow = _ANY.decode(raw), False
        except (msgspec.DecodeError, RecursionError):
            return None
    except (msgspec.DecodeError, RecursionError):
        return None
    return decoded(stored, shallow=shallow)


def decoded(stored: _Stored[Any], *, shallow: bool) -> Decoded:
    """``stored`` as :class:`Decoded`: its header as a dict of the keys present."""
    header: dict[str, Any] = {"results": []}
    for name in _HEADER:
        value = getattr(stored, name)
        if value is not UNSET:
            header[name] = value
    return Decoded(header, stored.results, shallow)


def nested_within(decoded: Decoded, limit: int) -> bool:
    """Whether no value of the document is inside more than ``limit`` arrays and objects
    (``json_limits.too_deep`` finds none), decided from the decoded values: the header's
    (inside the document), each record's input and metadata (inside the document, its
    results and the record) and each result's metadata (one deeper), unless they were read
    as ``Shallow`` values. The typed fields are shallower than those; the properties
    section is measured apart (``typed_section.nested_within``)."""
    header, records, shallow = decoded
    free = [v for k, v in header.items() if k not in ("results", "properties")]
    if deepest(free, 1) > limit:
        return False
    if shallow:  # the result's metadata, the deepest of them, is at most this deep
        return limit >= 4 + SHALLOW_OBJECT_DEPTH
    # strings, nulls and empty objects among them hold nothing deeper: no filtering needed
    if deepest([*map(_INPUT, records), *map(_METADATA, records)], 3) > limit:
        return False
    results = map(_RESULT, records)
    return deepest(list(map(getattr, results, repeat("metadata"), repeat(None))), 4) <= limit


def columns(
    spec: DecisionSpec, backend: str, provider: str, records: list[_Record[Any]], tolerance: float
) -> CaseResults | None:
    """The results as columns (those of ``verify.columns_from_records``), or None when any
    record breaks a rule: each holds exactly one of result and error, case ids are unique,
    each result's case id is its record's, ``expected`` is a label or null, every result is
    of the report's decision and backend, and its probabilities hold (the labels in order,
    finite, >= 0, summing to 1 within ``tolerance``, ``selected`` their first maximum and
    ``confidence`` its probability)."""
    n, labels = len(records), list(spec.labels)
    if n == 0:
        return None
    # map(attrgetter) and map(getattr): loops in C (getattr(None, name, None) is None)
    case_ids = list(map(_CASE_ID, records))
    results = list(map(_RESULT, records))
    errors = list(map(_ERROR, records))
    if len(set(case_ids)) != n:
        return None
    if list(map(is_, results, repeat(None))) != list(map(is_not, errors, repeat(None))):
        return None
    expected = list(map(_EXPECTED, records))
    if not set(expected) <= {None, *labels}:
        return None
    rows = [i for i, result in enumerate(results) if result is not None]
    ok: list[TypedResult[Any]] = results if len(rows) == n else [results[i] for i in rows]  # type: ignore[assignment]
    if list(map(_CASE_ID, ok)) != (case_ids if len(rows) == n else [case_ids[i] for i in rows]):
        return None
    for field, value in zip(_CONTEXT, (spec.name, spec.type, backend, provider), strict=True):
        if list(map(field, ok)).count(value) != len(ok):
            return None
    held = probabilities_hold(ok, labels, tolerance)
    if held is None:
        return None
    matrix, chosen, _ = held
    confidence = list(map(_CONFIDENCE, ok))
    k = len(labels)

    probs = np.full((n, k), np.nan)
    selected = np.full(n, -1, dtype=np.int64)
    conf = np.full(n, np.nan)
    latency = np.full(n, np.nan)
    where = np.asarray(rows, dtype=np.int64)
    probs[where] = matrix
    selected[where] = chosen
    conf[where] = confidence
    latency[where] = list(map(_LATENCY, ok))
    metadata = list(map(getattr, results, repeat("metadata"), repeat(None)))
    return CaseResults(
        spec=spec,
        backend=backend,
        provider=provider,
        case_ids=case_ids,
        inputs=list(map(_INPUT, records)),
        expected=expected,
        metadata=list(map(_METADATA, records)),
        probs=probs,
        selected=selected,
        confidence=conf,
        latency_ms=latency,
        model=list(map(getattr, results, repeat("model"), repeat(None))),
        model_version=list(map(getattr, results, repeat("model_version"), repeat(None))),
        result_metadata=[redact(m) if m else {} for m in metadata],
        error_kind=list(map(getattr, errors, repeat("kind"), repeat(None))),
        error_message=list(map(getattr, errors, repeat("message"), repeat(None))),
    )
