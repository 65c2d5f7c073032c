"""The columnar path: production records as an Arrow table, checked without Python loops.

A table comes from ``pyarrow.json`` (a stretch of a JSONL file) or from a caller (a
warehouse table). :func:`table_batch` accepts it only when every record is certainly valid
and its values certainly mean what DecGuard would read; anything else (an unexpected column
or type, a flagged invariant, a segment value whose JSON type Arrow may have changed)
returns None and the caller re-reads those records on the exact Python path. So this path
may be conservative but never accepts a record DecGuard rejects.

Arrow cannot tell an absent field from an explicit ``null``; the caller guarantees that
``id``, ``confidence`` and ``metadata`` are never explicitly null (the JSONL reader scans
the bytes for that), so a null there means "absent" and gets DecGuard's default.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from decguard_pipeline.core.contract.spec import DecisionSpec
from decguard_pipeline.core.production.columns import (
    ACTION_CODES,
    UNKNOWN,
    Batch,
    Codebook,
)
from decguard_pipeline.core.production.invariants import semantic_suspects
from decguard_pipeline.core.production.schema import RECORD_FIELDS
from decguard_pipeline.core.production.timestamps import timestamps_ok

_TEXT = (pa.string(), pa.large_string())
_TEXT_OR_NULL = (*_TEXT, pa.null())
_EXACT_INT = 2**53
_INVALID_SEGMENT = "must be a string, number, boolean or null when used as a segment"


def _column(table: pa.Table, name: str) -> pa.Array | None:
    if name not in table.column_names:
        return None
    column = table.column(name)
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def _codes(column: pa.Array | None, values: tuple[str, ...], n: int) -> np.ndarray | None:
    """Index of each value in ``values`` (-1 null, -2 other); None for a non-text column."""
    if column is None or column.type == pa.null():
        return np.full(n, UNKNOWN, dtype=np.int64)
    if column.type in (pa.int64(), pa.int32()):
        column = pc.cast(column, pa.string())
    elif column.type not in _TEXT:
        return None
    found = pc.index_in(column, value_set=pa.array(values, type=column.type))
    codes = pc.fill_null(found, -2).to_numpy(zero_copy_only=False).astype(np.int64)
    codes[~column.is_valid().to_numpy(zero_copy_only=False)] = UNKNOWN
    return codes


def _floats(column: pa.Array | None, n: int) -> tuple[np.ndarray, bool]:
    """Values as float64 with NaN for null, and whether every present value is a finite
    non-negative number that float conversion reads exactly as DecGuard does."""
    if column is None or column.type == pa.null():
        return np.full(n, np.nan), True
    if pa.types.is_integer(column.type):
        ints = pc.fill_null(column, 0).to_numpy(zero_copy_only=False)
        if len(ints) and np.abs(ints).max() > _EXACT_INT:
            return np.zeros(n), False
        column = pc.cast(column, pa.float64())
    elif column.type != pa.float64():
        return np.zeros(n), False
    values = np.array(pc.fill_null(column, np.nan).to_numpy(zero_copy_only=False))
    present = column.is_valid().to_numpy(zero_copy_only=False)
    ok = bool(np.all(~present | (np.isfinite(values) & (values >= 0.0))))
    return values, ok


def _flags(column: pa.Array | None, n: int) -> np.ndarray | None:
    """Booleans as 1/0 with -1 for null; None for a non-boolean column."""
    if column is None or column.type == pa.null():
        return np.full(n, UNKNOWN, dtype=np.int64)
    if column.type != pa.bool_():
        return None
    values = pc.fill_null(column, False).to_numpy(zero_copy_only=False).astype(np.int64)
    values[~column.is_valid().to_numpy(zero_copy_only=False)] = UNKNOWN
    return values


def _probabilities(column: pa.Array | None, labels: tuple[str, ...]) -> np.ndarray | None:
    """The (n, k) matrix in canonical order when every record gives exactly the labels."""
    if column is None or not pa.types.is_struct(column.type) or column.null_count:
        return None
    names = [column.type.field(i).name for i in range(column.type.num_fields)]
    if sorted(names) != sorted(labels) or len(set(names)) != len(names):
        return None
    matrix = np.empty((len(column), len(labels)))
    for j, label in enumerate(labels):
        child = column.field(label)
        if child.null_count:
            return None
        if pa.types.is_integer(child.type):
            ints = child.to_numpy(zero_copy_only=False)
            if len(ints) and np.abs(ints).max() > _EXACT_INT:
                return None
        elif child.type != pa.float64():
            return None
        matrix[:, j] = child.to_numpy(zero_copy_only=False)
    return matrix


def _segment_column(child: pa.Array | None, n: int) -> tuple[pa.Array, np.ndarray, str] | None:
    """Per record, the value DecGuard would read from ``metadata[key]`` (null when absent),
    the rows whose value cannot segment and why; None when Arrow's type leaves the JSON
    value uncertain."""
    none = np.zeros(n, dtype=bool)
    if child is None or child.type == pa.null():
        return pa.nulls(n), none, ""
    kind = child.type
    if kind in _TEXT or kind == pa.bool_() or pa.types.is_integer(kind):
        return child, none, ""
    present = child.is_valid().to_numpy(zero_copy_only=False)
    if kind == pa.float64():
        values = pc.fill_null(child, 0.5).to_numpy(zero_copy_only=False)
        finite = np.isfinite(values)
        # an integral double may have been written as an int: only the exact path can tell
        if np.any(present & finite & (values == np.floor(np.where(finite, values, 0.5)))):
            return None
        bad = present & ~finite
        return pc.if_else(pa.array(~bad), child, pa.scalar(None, kind)), bad, "must be finite"
    if pa.types.is_struct(kind) or pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return pa.nulls(n), present, _INVALID_SEGMENT
    return None  # e.g. a string Arrow read as a timestamp: the original text is lost


def table_batch(
    table: pa.Table,
    spec: DecisionSpec,
    tolerance: float,
    *,
    first_position: int,
    segment_keys: tuple[str, ...],
    versions: Codebook,
    segment_values: dict[str, Codebook],
) -> Batch | None:
    """The columns of ``table`` when all of its records are valid, else None."""
    n = table.num_rows
    if not set(table.column_names) <= set(RECORD_FIELDS) or n == 0:
        return None
    labels = spec.labels
    col = lambda name: _column(table, name)  # noqa: E731
    probs = _probabilities(col("probabilities"), labels)
    decision = col("decision")
    if probs is None or decision is None or decision.type not in _TEXT or decision.null_count:
        return None
    for name in ("id", "timestamp", "backend", "model", "model_version", "action"):
        column = col(name)
        if column is not None and column.type not in _TEXT_OR_NULL:
            return None
    value = col("input")
    if value is not None and not (
        value.type in _TEXT_OR_NULL
        or pa.types.is_struct(value.type)
        or pa.types.is_timestamp(value.type)  # strings Arrow took for dates: still strings
    ):
        return None
    selected_column = col("selected")
    selected = _codes(selected_column, labels, n)
    outcome = _codes(col("outcome"), labels, n)
    action = _codes(col("action"), tuple(ACTION_CODES), n)
    correct, fallback = _flags(col("outcome_correct"), n), _flags(col("fallback"), n)
    if selected is None or outcome is None or action is None or correct is None:
        return None
    if fallback is None or (action == -2).any() or (selected == UNKNOWN).any():
        return None
    latency, latency_ok = _floats(col("latency_ms"), n)
    cost, cost_ok = _floats(col("cost"), n)
    if not (latency_ok and cost_ok):
        return None

    confidence_column = col("confidence")
    chosen = probs[np.arange(n), np.where(selected >= 0, selected, 0)]
    if confidence_column is None or confidence_column.type == pa.null():
        confidence = chosen.copy()
        defaulted = np.ones(n, dtype=bool)
    else:
        kind = confidence_column.type
        if not (kind == pa.float64() or pa.types.is_integer(kind)):
            return None
        confidence, _ = _floats(confidence_column, n)
        defaulted = ~confidence_column.is_valid().to_numpy(zero_copy_only=False)
        confidence[defaulted] = chosen[defaulted]
    # DecGuard defaults confidence only from a text 'selected' that names a label
    if defaulted.any() and (
        selected_column is None or selected_column.type not in _TEXT or (selected < 0).any()
    ):
        return None
    suspects = semantic_suspects(
        probs, selected, confidence, outcome, correct, action, fallback, tolerance
    )
    if suspects.any() or not pc.all(pc.equal(decision, spec.name)).as_py():
        return None
    stamps = col("timestamp")
    if stamps is not None and stamps.type != pa.null() and not timestamps_ok(stamps).all():
        return None
    ids = col("id")
    if (
        ids is not None
        and ids.type != pa.null()
        and not pc.all(pc.greater(pc.utf8_length(pc.fill_null(ids, "x")), 0)).as_py()
    ):
        return None

    metadata = col("metadata")
    if metadata is not None and not (
        metadata.type == pa.null() or pa.types.is_struct(metadata.type)
    ):
        return None
    segment_columns = {}
    for key in segment_keys:
        child = None
        if metadata is not None and metadata.type != pa.null():
            names = [metadata.type.field(i).name for i in range(metadata.type.num_fields)]
            if key in names:
                # a record without metadata (null struct) has no value for the key either
                child = metadata.field(key)
                child = pc.if_else(metadata.is_valid(), child, pa.scalar(None, child.type))
        found = _segment_column(child, n)
        if found is None:
            return None
        segment_columns[key] = found
    versions_column = col("model_version")

    # every record holds: only now touch the shared codebooks
    ids = _ids(ids, first_position, n)
    segments = {}
    for key, (values, bad, problem) in segment_columns.items():
        book = segment_values[key]
        if bad.any():
            row = int(np.argmax(bad))
            book.note_invalid(first_position + row, ids[row].as_py(), problem)
        segments[key] = _encode(book, values)
    if versions_column is None:
        versions_column = pa.nulls(n)
    return Batch(
        ids=ids,
        probs=probs,
        selected=selected,
        outcome=outcome,
        correct=correct,
        action=action,
        fallback=fallback,
        latency_ms=latency,
        cost=cost,
        model_version=_encode(versions, versions_column),
        segments=segments,
    )


def _ids(column: pa.Array | None, first_position: int, n: int) -> pa.Array:
    """Ids with DecGuard's default ``record-<position>`` where absent."""
    if column is not None and column.type != pa.null() and not column.null_count:
        return pc.cast(column, pa.string())
    positions = pa.array(np.arange(first_position, first_position + n))
    defaults = pc.binary_join_element_wise("record-", pc.cast(positions, pa.string()), "")
    if column is None or column.type == pa.null():
        return defaults
    return pc.cast(pc.if_else(column.is_valid(), column, defaults), pa.string())


def _encode(book: Codebook, column: pa.Array) -> np.ndarray:
    """Codes of a column's values (null reads as None); distinct values are looked up once."""
    encoded = pc.dictionary_encode(column)
    distinct = encoded.dictionary.to_pylist()
    lookup = np.array([book.code(v) for v in distinct] + [book.code(None)], dtype=np.int32)
    indices = pc.fill_null(encoded.indices, len(distinct)).to_numpy(zero_copy_only=False)
    return lookup[indices]
