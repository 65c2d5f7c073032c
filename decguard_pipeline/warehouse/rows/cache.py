"""Rows of the ``responses`` table: answers (``core.cache.answers``) to Arrow and back.

Built and read column-wise from buffers: a 100,000-answer run is a few arrays, not 100,000
dicts, and no ``pyarrow.array``, scalar or ``to_numpy`` call is made on the way, because the
first of any of those imports pandas (a third of a second, in a run that replays every answer
in a fraction of that). Metadata is stored as JSON text, ``{}`` for the usual empty metadata.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow as pa

from decguard_pipeline.core.cache.answers import Answers, Hits
from decguard_pipeline.warehouse.schema.cache import RESPONSES

EMPTY_JSON = "{}"
# the columns a lookup reads (``labels`` is not needed: the key names the labels shown)
LOOKUP_COLUMNS = [
    "key",
    "probabilities",
    "model",
    "model_version",
    "latency_ms",
    "prompt_tokens",
    "completion_tokens",
    "metadata_json",
    "answered_at",
]
_US = pa.timestamp("us", "UTC")
_NO_METADATA: dict[str, Any] = {}  # shared by every answer without metadata (never mutated)


def metadata_json(metadata: dict[str, Any]) -> str | None:
    """Result metadata as JSON text; None when JSON cannot hold it (the answer is then not
    cached, since replaying it would not give back the same metadata)."""
    if not metadata:
        return EMPTY_JSON
    try:
        return json.dumps(metadata, ensure_ascii=False, separators=(",", ":"), allow_nan=True)
    except (TypeError, ValueError):
        return None


def storable(answers: Answers) -> int:
    """How many of ``answers`` can be stored (metadata JSON can hold)."""
    odd = sum(1 for meta in answers.metadata if meta and metadata_json(meta) is None)
    return len(answers) - odd


# -- arrays from buffers ---------------------------------------------------------------------


def _validity(present: np.ndarray) -> pa.Buffer | None:
    return None if present.all() else pa.py_buffer(np.packbits(present, bitorder="little"))


def _offsets(lengths: np.ndarray) -> np.ndarray:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return offsets


def strings(values: Sequence[str | None]) -> pa.Array:
    n = len(values)
    distinct = set(values)
    if len(distinct) == 1:  # a model name, no metadata: the same value on every row
        (only,) = distinct
        return pa.nulls(n, pa.string()) if only is None else constant(only, n)
    validity = None
    if None in distinct:
        present = np.fromiter((v is not None for v in values), dtype=bool, count=n)
        validity = _validity(present)
        values = ["" if v is None else v for v in values]
    text = "".join(values)  # type: ignore[arg-type]
    if text.isascii():  # one encode; a character is a byte
        data = text.encode("ascii")
        lengths = np.fromiter(map(len, values), dtype=np.int64, count=n)  # type: ignore[arg-type]
    else:
        encoded = [v.encode("utf-8", "surrogatepass") for v in values]  # type: ignore[union-attr]
        data = b"".join(encoded)
        lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=n)
    buffers = [pa.py_buffer(_offsets(lengths)), pa.py_buffer(data)]
    return pa.Array.from_buffers(pa.string(), n, [validity, *buffers])


def constant(value: str, n: int) -> pa.Array:
    data = value.encode("utf-8", "surrogatepass")
    offsets = (np.arange(n + 1, dtype=np.int64) * len(data)).astype(np.int32)
    return pa.Array.from_buffers(
        pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data * n)]
    )


def _numbers(kind: pa.DataType, values: np.ndarray, present: np.ndarray | None = None) -> pa.Array:
    n = len(values)
    validity = None if present is None else _validity(present)
    return pa.Array.from_buffers(kind, n, [validity, pa.py_buffer(np.ascontiguousarray(values))])


def nullable_ints(values: np.ndarray) -> pa.Array:
    """int64 from floats, null where NaN."""
    present = ~np.isnan(values)
    return _numbers(pa.int64(), np.where(present, values, 0).astype(np.int64), present)


def float_lists(matrix: np.ndarray) -> pa.Array:
    n, k = matrix.shape
    values = _numbers(pa.float64(), matrix.astype(np.float64).reshape(-1))
    offsets = (np.arange(n + 1, dtype=np.int64) * k).astype(np.int32)
    return pa.Array.from_buffers(
        pa.list_(pa.float64()), n, [None, pa.py_buffer(offsets)], children=[values]
    )


def label_lists(labels: Sequence[tuple[str, ...]]) -> pa.Array:
    """``list<string>`` per row, from the few distinct label orders a run shows."""
    n = len(labels)
    if n and len(set(map(id, labels))) == 1:  # a golden run: one order, one tuple
        parts = [label.encode("utf-8", "surrogatepass") for label in labels[0]]
        sizes = np.asarray([len(part) for part in parts], dtype=np.int64)
        child = pa.Array.from_buffers(
            pa.string(),
            n * len(parts),
            [None, pa.py_buffer(_offsets(np.tile(sizes, n))), pa.py_buffer(b"".join(parts) * n)],
        )
        counts = np.full(n, len(parts), dtype=np.int64)
        return pa.Array.from_buffers(
            pa.list_(pa.string()), n, [None, pa.py_buffer(_offsets(counts))], children=[child]
        )
    slot_of: dict[tuple[str, ...], int] = {}
    slots = np.fromiter(
        (slot_of.setdefault(shown, len(slot_of)) for shown in labels), dtype=np.intp, count=n
    )
    orders = list(slot_of)
    encoded = [[label.encode("utf-8", "surrogatepass") for label in shown] for shown in orders]
    joined = [b"".join(parts) for parts in encoded]
    counts = np.asarray([len(shown) for shown in orders], dtype=np.int64)[slots]
    sizes = [np.asarray([len(b) for b in parts], dtype=np.int64) for parts in encoded]
    child_lengths = np.concatenate([sizes[s] for s in slots.tolist()]) if n else np.zeros(0)
    data = b"".join(joined[s] for s in slots.tolist())
    child = pa.Array.from_buffers(
        pa.string(),
        len(child_lengths),
        [None, pa.py_buffer(_offsets(child_lengths.astype(np.int64))), pa.py_buffer(data)],
    )
    return pa.Array.from_buffers(
        pa.list_(pa.string()), n, [None, pa.py_buffer(_offsets(counts))], children=[child]
    )


# -- columns back to numpy -------------------------------------------------------------------


def _chunk_values(chunk: pa.Array, dtype: type) -> np.ndarray:
    """A fixed-width chunk's values (whatever sits under a null)."""
    width = np.dtype(dtype).itemsize
    data = chunk.buffers()[1]
    return np.frombuffer(data, dtype=dtype, count=len(chunk), offset=chunk.offset * width)


def _chunk_present(chunk: pa.Array) -> np.ndarray:
    if not chunk.null_count:
        return np.ones(len(chunk), dtype=bool)
    bits = np.unpackbits(np.frombuffer(chunk.buffers()[0], dtype=np.uint8), bitorder="little")
    return bits[chunk.offset : chunk.offset + len(chunk)].astype(bool)


def floats(column: pa.ChunkedArray) -> np.ndarray:
    """A numeric column as float64, NaN for nulls."""
    parts = []
    for chunk in column.chunks:
        dtype = np.int64 if pa.types.is_integer(chunk.type) else np.float64
        values = _chunk_values(chunk, dtype).astype(np.float64)
        if chunk.null_count:
            values[~_chunk_present(chunk)] = np.nan
        parts.append(values)
    return np.concatenate(parts) if parts else np.zeros(0)


def timestamps_us(column: pa.ChunkedArray) -> np.ndarray:
    parts = [_chunk_values(chunk, np.int64) for chunk in column.chunks]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def list_rows(column: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A ``list<double>`` column as (flat values, start of each row, length of each row)."""
    values, starts, lengths = [], [], []
    base = 0
    for chunk in column.chunks:
        offsets = np.frombuffer(chunk.buffers()[1], dtype=np.int32, count=len(chunk) + 1,
                                offset=chunk.offset * 4)  # fmt: skip
        child = chunk.values  # the whole child array: offsets index into it
        flat = _chunk_values(child, np.float64)
        starts.append(offsets[:-1].astype(np.int64) + base)
        lengths.append(np.diff(offsets).astype(np.int64))
        values.append(flat)
        base += len(flat)
    if not values:
        empty = np.zeros(0, dtype=np.int64)
        return np.zeros(0), empty, empty
    return np.concatenate(values), np.concatenate(starts), np.concatenate(lengths)


# -- the table -------------------------------------------------------------------------------


def answers_table(
    answers: Answers,
    *,
    contract: str,
    target: str,
    run_id: str,
    recorded_at: datetime,
    backend: str,
    provider: str,
    keyed_version: str,
) -> tuple[pa.Table, int]:
    """The rows of ``answers`` that can be stored, with their key cells (for
    ``Warehouse.write_built``), and how many that is."""
    texts = [EMPTY_JSON if not m else metadata_json(m) for m in answers.metadata]
    if None in texts:
        keep = [i for i, text in enumerate(texts) if text is not None]
        answers = _subset(answers, keep)
        texts = [texts[i] for i in keep]
    n = len(answers)
    k = answers.probs.shape[1] if answers.probs.ndim == 2 else 0
    at = np.asarray(answers.answered_at, dtype=float) * 1e6
    answered = np.broadcast_to(at.astype(np.int64), n)
    recorded = int(recorded_at.timestamp() * 1e6)
    columns = [
        constant(contract, n),
        constant(target, n),
        constant(run_id, n),
        _numbers(_US, np.full(n, recorded, dtype=np.int64)),
        pa.Array.from_buffers(pa.binary(16), n, [None, pa.py_buffer(b"".join(answers.keys))]),
        strings(answers.case_ids),
        constant(backend, n),
        constant(provider, n),
        constant(keyed_version, n),
        label_lists(answers.labels),
        float_lists(answers.probs.reshape(n, k)),
        strings(answers.model),
        strings(answers.model_version),
        _numbers(pa.float64(), answers.latency_ms.astype(np.float64)),
        nullable_ints(answers.prompt_tokens),
        nullable_ints(answers.completion_tokens),
        strings(texts),
        _numbers(_US, answered),
    ]
    return pa.Table.from_arrays(columns, schema=RESPONSES), n


def _subset(answers: Answers, keep: list[int]) -> Answers:
    index = np.asarray(keep, dtype=np.intp)
    return Answers(
        keys=[answers.keys[i] for i in keep],
        case_ids=[answers.case_ids[i] for i in keep],
        labels=[answers.labels[i] for i in keep],
        probs=answers.probs[index],
        model=[answers.model[i] for i in keep],
        model_version=[answers.model_version[i] for i in keep],
        latency_ms=answers.latency_ms[index],
        prompt_tokens=answers.prompt_tokens[index],
        completion_tokens=answers.completion_tokens[index],
        metadata=[answers.metadata[i] for i in keep],
        answered_at=(
            answers.answered_at
            if np.ndim(answers.answered_at) == 0
            else np.asarray(answers.answered_at)[index]
        ),
    )


LOOKUP_SCHEMA = pa.schema([RESPONSES.field(name) for name in LOOKUP_COLUMNS])
_INT64 = (-(2**63), 2**63 - 1)
_HEX = frozenset("0123456789abcdef")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _tokens(value: Any) -> bool:
    return value is None or (
        isinstance(value, int) and not isinstance(value, bool) and _INT64[0] <= value <= _INT64[1]
    )


def journal_row_problem(item: Any) -> str | None:
    """Why a journal line cannot be an answer (None: it can), naming the field: a journal
    damaged by anything but a kill (which only cuts its last line short) must not stop the
    run that reads it."""
    if not isinstance(item, dict):
        return "not an answer object"
    key = item.get("key")
    if not (isinstance(key, str) and len(key) == 32 and set(key) <= _HEX):
        return "field 'key' is not 32 hexadecimal digits"
    labels, probs = item.get("labels"), item.get("probabilities")
    if not (isinstance(labels, list) and labels and all(isinstance(x, str) for x in labels)):
        return "field 'labels' is not a list of labels"
    if not (isinstance(probs, list) and len(probs) == len(labels) and all(map(_number, probs))):
        return "field 'probabilities' is not one number per label"
    if not isinstance(item.get("case_id"), str):
        return "field 'case_id' is not a string"
    for name in ("model", "model_version"):
        if not (item.get(name) is None or isinstance(item[name], str)):
            return f"field {name!r} is not a string"
    for name in ("latency_ms", "answered_at"):
        if not _number(item.get(name)):
            return f"field {name!r} is not a number"
    for name in ("prompt_tokens", "completion_tokens"):
        if not _tokens(item.get(name)):
            return f"field {name!r} is not a token count"
    if not (item.get("metadata") is None or isinstance(item["metadata"], dict)):
        return "field 'metadata' is not an object"
    return None


def journal_answers(rows: list[dict[str, Any]]) -> Answers:
    """Rows of a journal (``warehouse/responses.py``), each checked by
    :func:`journal_row_problem` and all with the same number of labels, as answers."""
    nan = float("nan")
    return Answers(
        keys=[bytes.fromhex(r["key"]) for r in rows],
        case_ids=[r["case_id"] for r in rows],
        labels=[tuple(r["labels"]) for r in rows],
        probs=np.asarray([r["probabilities"] for r in rows], dtype=float).reshape(len(rows), -1),
        model=[r["model"] for r in rows],
        model_version=[r["model_version"] for r in rows],
        latency_ms=np.asarray([r["latency_ms"] for r in rows], dtype=float),
        prompt_tokens=np.asarray(
            [nan if r["prompt_tokens"] is None else r["prompt_tokens"] for r in rows], dtype=float
        ),
        completion_tokens=np.asarray(
            [nan if r["completion_tokens"] is None else r["completion_tokens"] for r in rows],
            dtype=float,
        ),
        metadata=[r.get("metadata") or {} for r in rows],
        answered_at=np.asarray([r["answered_at"] for r in rows], dtype=float),
    )


class Stored:
    """The answers a lookup reads, as columns: read once per run, each column converted the
    first time a lookup needs it (a run looks up once per batch it sends)."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table
        self.keys: list[bytes] = table.column("key").to_pylist()
        self.answered_us = timestamps_us(table.column("answered_at"))
        self._columns: dict[str, Any] = {}

    def _column(self, name: str) -> Any:
        if name not in self._columns:
            column = self.table.column(name)
            if name == "probabilities":
                value: Any = list_rows(column)
            elif name in ("latency_ms", "prompt_tokens", "completion_tokens"):
                value = floats(column)
            else:
                value = column.to_pylist()
            self._columns[name] = value
        return self._columns[name]

    def hits(self, positions: np.ndarray, rows: np.ndarray, k: int) -> Hits:
        """The answers at ``positions`` for the requests ``rows``; a stored answer with
        another number of labels than ``k`` is left out (it cannot answer these requests)."""
        flat, starts, lengths = self._column("probabilities")
        fits = lengths[positions] == k
        if not fits.all():
            positions, rows = positions[fits], rows[fits]
        probs = flat[starts[positions][:, None] + np.arange(k)]
        pick = positions.tolist()
        first, last = (pick[0], pick[-1]) if pick else (0, -1)
        consecutive = last - first == len(pick) - 1  # a rerun of the same cases, in order

        def listed(name: str) -> list[Any]:
            values = self._column(name)
            if consecutive:
                return list(values[first : last + 1])
            return [values[p] for p in pick]

        return Hits(
            rows=np.asarray(rows, dtype=np.intp),
            probs=probs.reshape(len(pick), k),
            latency_ms=self._column("latency_ms")[positions],
            model=listed("model"),
            model_version=listed("model_version"),
            metadata=[
                _NO_METADATA if t == EMPTY_JSON or t is None else json.loads(t)
                for t in listed("metadata_json")
            ],
            prompt_tokens=self._column("prompt_tokens")[positions],
            completion_tokens=self._column("completion_tokens")[positions],
        )


def datetime_us(at: datetime) -> int:
    return int(at.astimezone(UTC).timestamp() * 1e6)
