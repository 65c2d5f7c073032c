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

from itertools import chain
from operator import attrgetter
from typing import Any, Literal

import msgspec
import numpy as np

from decguard_pipeline.core.contract.decision import DecisionSpec
from decguard_pipeline.core.decision import select_many
from decguard_pipeline.core.exact import rows_sum_within
from decguard_pipeline.core.results import CaseResults
from decguard_pipeline.core.validation import redact

UNSET: Any = msgspec.UNSET


class _Error(msgspec.Struct, forbid_unknown_fields=True):
    kind: str
    message: str


class _Result(msgspec.Struct, forbid_unknown_fields=True):
    case_id: str
    decision: str
    decision_type: Literal["choice", "noul", "score"]
    labels: list[str]
    probabilities: dict[str, float]  # integers read as floats, booleans refused
    selected: str
    confidence: float
    backend: str
    provider: str
    latency_ms: float
    model: str | None = None
    model_version: str | None = None
    metadata: dict[str, Any] = {}


class _Record(msgspec.Struct, forbid_unknown_fields=True):
    case_id: str
    input: str | dict[str, Any]
    expected: str | None = None
    metadata: dict[str, Any] = {}
    result: _Result | None = None
    error: _Error | None = None


class _Stored(msgspec.Struct, forbid_unknown_fields=True):
    """The report's top level: ``results`` typed, every other key as plain JSON values and
    UNSET where absent (the header's schema, pydantic, says what is missing)."""

    results: list[_Record]
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
    properties: Any = UNSET


_CONTEXT = tuple(map(attrgetter, ("decision", "decision_type", "backend", "provider")))
_DECODER = msgspec.json.Decoder(_Stored)
_HEADER = tuple(name for name in _Stored.__struct_fields__ if name != "results")


def decode(raw: bytes) -> tuple[dict[str, Any], list[_Record]] | None:
    """The header as plain JSON values (``results`` an empty list) and the typed records,
    or None when msgspec refuses the document."""
    try:
        stored = _DECODER.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        return None
    header: dict[str, Any] = {"results": []}
    for name in _HEADER:
        value = getattr(stored, name)
        if value is not UNSET:
            header[name] = value
    return header, stored.results


def columns(
    spec: DecisionSpec, backend: str, provider: str, records: list[_Record], tolerance: float
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
    case_ids = [r.case_id for r in records]
    results = [r.result for r in records]
    errors = [r.error for r in records]
    if len(set(case_ids)) != n:
        return None
    if [x is None for x in results] != [x is not None for x in errors]:
        return None
    if not {r.expected for r in records} <= {None, *labels}:
        return None
    rows = [i for i, result in enumerate(results) if result is not None]
    ok: list[_Result] = [results[i] for i in rows]  # type: ignore[misc]
    if [r.case_id for r in ok] != [case_ids[i] for i in rows]:
        return None
    for field, value in zip(_CONTEXT, (spec.name, spec.type, backend, provider), strict=True):
        if list(map(field, ok)).count(value) != len(ok):
            return None
    if [r.labels for r in ok].count(labels) != len(ok):
        return None
    if not labels or len(set(labels)) != len(labels):
        return None
    k = len(labels)
    probabilities = [r.probabilities for r in ok]
    if list(map(list, probabilities)).count(labels) != len(ok):
        return None
    matrix = np.fromiter(
        chain.from_iterable(map(dict.values, probabilities)), dtype=np.float64, count=len(ok) * k
    ).reshape(len(ok), k)
    if not (np.isfinite(matrix).all() and (matrix >= 0.0).all()):
        return None
    if not rows_sum_within(matrix, 1.0, tolerance):
        return None
    chosen, top = select_many(matrix)
    if [r.selected for r in ok] != [labels[i] for i in chosen.tolist()]:
        return None
    confidence = [r.confidence for r in ok]
    if confidence != top.tolist():
        return None

    probs = np.full((n, k), np.nan)
    selected = np.full(n, -1, dtype=np.int64)
    conf = np.full(n, np.nan)
    latency = np.full(n, np.nan)
    where = np.asarray(rows, dtype=np.int64)
    probs[where] = matrix
    selected[where] = chosen
    conf[where] = confidence
    latency[where] = [r.latency_ms for r in ok]
    return CaseResults(
        spec=spec,
        backend=backend,
        provider=provider,
        case_ids=case_ids,
        inputs=[r.input for r in records],
        expected=[r.expected for r in records],
        metadata=[r.metadata for r in records],
        probs=probs,
        selected=selected,
        confidence=conf,
        latency_ms=latency,
        model=[None if r is None else r.model for r in results],
        model_version=[None if r is None else r.model_version for r in results],
        result_metadata=[
            {} if r is None or not r.metadata else redact(r.metadata) for r in results
        ],
        error_kind=[None if e is None else e.kind for e in errors],
        error_message=[None if e is None else e.message for e in errors],
    )
