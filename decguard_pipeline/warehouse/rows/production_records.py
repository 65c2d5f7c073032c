"""``production_records`` rows: every ingested record, normalised, built a stretch at a time
as the loader accepts records, and read back a batch at a time.

A stretch Arrow parsed becomes rows column-wise: codes to labels, flags to booleans, the
object fields' exact JSON proposed from Arrow's structs and confirmed against the line they
came from (``core.production.object_text``), the record's JSON assembled by
``core.production.record_text``. A record either cannot cover is encoded from its parsed
value, exactly as the record-by-record path encodes every record it reads.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from decguard_pipeline.core.contract.spec import DecisionSpec
from decguard_pipeline.core.production import jsonl_blocks
from decguard_pipeline.core.production.columns import ACTION_CODES, Batch
from decguard_pipeline.core.production.normalized import normalized_record
from decguard_pipeline.core.production.object_text import object_texts
from decguard_pipeline.core.production.record_text import (
    exact_objects,
    json_strings,
    record_texts,
)
from decguard_pipeline.core.production.records import Item
from decguard_pipeline.warehouse.rows.base import input_text, to_json
from decguard_pipeline.warehouse.rows.production import record_json
from decguard_pipeline.warehouse.schema import TABLES

RECORDS = "production_records"
SHOWN = 20  # records kept for the materialisation's metadata
# the normalised fields stored as they are (strings, numbers, flags)
_COPIED = (
    "id", "timestamp", "decision", "selected", "confidence", "outcome", "outcome_correct",
    "action", "fallback", "latency_ms", "cost", "backend", "model", "model_version",
)  # fmt: skip
_TEXTS = ("input_text", "input_json", "metadata_json", "record_json")
_NORMALISED = pa.schema([f for f in TABLES[RECORDS] if f.name in (*_COPIED, *_TEXTS)])
# columns whose values (nearly) never repeat within a day: neither a dictionary (built for
# each row group only to be dropped) nor min/max statistics (never used to skip a group)
_UNIQUE = ("position", "id", "timestamp", "input_text", "input_json", "record_json", "probs",
           "probabilities", "confidence", "latency_ms", "cost")  # fmt: skip
_REPEATING = [f.name for f in TABLES[RECORDS] if f.name not in _UNIQUE]
PARQUET = {"use_dictionary": _REPEATING, "write_statistics": _REPEATING}


def _labels(codes: np.ndarray, labels: pa.Array) -> pa.Array:
    """Label codes as label names, null where unknown (-1)."""
    known = codes >= 0
    names = labels.take(pa.array(np.where(known, codes, 0)))
    return pc.if_else(pa.array(known), names, pa.scalar(None, pa.string()))


def _flags(codes: np.ndarray) -> pa.Array:
    return pa.array(codes == 1, mask=codes < 0)


def _floats(values: np.ndarray) -> pa.Array:
    return pa.array(values, mask=np.isnan(values))


def _text(table: pa.Table, name: str) -> pa.Array:
    if name not in table.column_names:
        return pa.nulls(table.num_rows, pa.string())
    column = table.column(name).combine_chunks()
    return pa.nulls(len(column), pa.string()) if column.type == pa.null() else column


def record_starts(block: Any) -> np.ndarray:
    """Where each record's line starts in the block (blank lines skipped)."""
    starts = jsonl_blocks.line_starts(block)
    return starts[jsonl_blocks.nonblank_lines(block, starts)]


def _object(
    table: pa.Table, name: str, block: Any, starts: np.ndarray
) -> tuple[pa.Array | None, np.ndarray]:
    """The compact JSON of an object field where certain (text fields are left to the
    caller), and the records whose value must be encoded from the parsed record."""
    n = table.num_rows
    if name not in table.column_names:
        return None, np.zeros(n, dtype=bool)
    column = table.column(name).combine_chunks()
    if column.type == pa.null() or column.type == pa.string():
        return None, np.zeros(n, dtype=bool)
    if not pa.types.is_struct(column.type):  # e.g. a text Arrow read as a date
        return None, column.is_valid().to_numpy(zero_copy_only=False)
    return object_texts(column, block, starts, name)


def arrow_rows(
    table: pa.Table,
    batch: Batch,
    block: Any,
    starts: np.ndarray | None,
    spec: DecisionSpec,
    first_position: int,
) -> tuple[pa.Table, np.ndarray]:
    """The normalised rows of a stretch Arrow parsed and the loader accepted (``block``: the
    bytes it was parsed from, ``starts``: where its records' lines start), and the
    probabilities in label order."""
    n = table.num_rows
    labels = pa.array(spec.labels)
    correct = np.where(
        (batch.correct < 0) & (batch.outcome >= 0), batch.outcome == batch.selected, batch.correct
    )
    columns: dict[str, pa.Array] = {
        "id": batch.ids,
        "selected": _labels(batch.selected, labels),
        "confidence": pa.array(batch.probs[np.arange(n), batch.selected]),
        "outcome": _labels(batch.outcome, labels),
        "outcome_correct": _flags(correct),
        "action": _labels(batch.action, pa.array(list(ACTION_CODES))),
        "fallback": _flags(batch.fallback),
        "latency_ms": _floats(batch.latency_ms),
        "cost": _floats(batch.cost),
    }
    for name in ("timestamp", "decision", "backend", "model", "model_version"):
        columns[name] = pc.cast(_text(table, name), pa.string())
    starts = record_starts(block) if starts is None else starts
    input_json, odd_input = _object(table, "input", block, starts)
    metadata_json, odd_metadata = _object(table, "metadata", block, starts)
    if input_json is None:  # text inputs (or none)
        text = _text(table, "input")
        input_json = pc.if_else(text.is_valid(), json_strings(text), pa.scalar(None, pa.string()))
        columns["input_text"] = text
    else:
        columns["input_text"] = input_json
    columns["input_json"] = input_json
    if metadata_json is None:
        metadata_json = pa.array(["{}"] * n, pa.string())
    columns["metadata_json"] = pc.fill_null(metadata_json, "{}")
    plain = exact_objects(columns["metadata_json"]) & exact_objects(pc.fill_null(input_json, ""))
    odd = odd_input | odd_metadata | ~plain
    fields = {name: columns[name] for name in _COPIED}
    fields["input"], fields["metadata"] = columns["input_json"], columns["metadata_json"]
    columns["record_json"] = record_texts(
        pa.table(fields), spec.labels, batch.probs, indented=False
    )
    rows = pa.table({f.name: columns[f.name] for f in _NORMALISED})
    if odd.any():  # encoded from the parsed record, as the record-by-record path does
        ends = np.append(starts[1:], len(block))
        items = [
            Item(jsonl_blocks.json_value(bytes(block[starts[i] : ends[i]])), first_position + i)
            for i in np.flatnonzero(odd).tolist()
        ]
        exact, _ = items_rows(items, spec)
        rows = _replace_rows(rows, np.flatnonzero(odd), exact)
    probs = batch.probs
    return rows.cast(_NORMALISED), probs


def _replace_rows(rows: pa.Table, where: np.ndarray, exact: pa.Table) -> pa.Table:
    """``rows`` with the rows at ``where`` taken from ``exact`` (same columns)."""
    pick = np.full(rows.num_rows, -1, dtype=np.int64)
    pick[where] = np.arange(len(where))
    mask = pa.array(pick >= 0)
    out = {}
    for name in rows.column_names:
        mine = rows.column(name).combine_chunks()
        theirs = exact.column(name).combine_chunks().take(pa.array(np.maximum(pick, 0)))
        out[name] = pc.if_else(mask, theirs.cast(mine.type), mine)
    return pa.table(out)


def items_rows(items: list[Item], spec: DecisionSpec) -> tuple[pa.Table, np.ndarray]:
    """Normalised rows of records checked one by one (parsed JSON values)."""
    cols: dict[str, list[Any]] = {name: [] for name in (*_COPIED, *_TEXTS)}
    probs = []
    for item in items:
        record = normalized_record(item.value, item.position, spec)
        value = record["input"]
        probs.append([record["probabilities"][label] for label in spec.labels])
        cols["input_text"].append(None if value is None else input_text(value))
        cols["input_json"].append(None if value is None else to_json(value))
        cols["metadata_json"].append(to_json(record["metadata"]))
        cols["record_json"].append(record_json(record))
        for name in _COPIED:
            cols[name].append(record[name])
    table = pa.table({f.name: pa.array(cols[f.name], type=f.type) for f in _NORMALISED})
    matrix = np.array(probs, dtype=np.float64).reshape(len(items), len(spec.labels))
    return table, matrix


def stored_rows(
    rows: pa.Table, probs: np.ndarray, spec: DecisionSpec, first: int, keys: dict[str, Any]
) -> pa.Table:
    """A stretch of normalised rows as ``production_records`` rows (``first``: the 0-based
    position of its first record; ``keys``: contract, target, run_id, recorded_at, source,
    source_path, dataset_hash)."""
    n, k = rows.num_rows, len(spec.labels)
    offsets = pa.array(np.arange(0, n * k + 1, k, dtype=np.int32))
    names = pa.array(spec.labels, pa.string()).take(pa.array(np.tile(np.arange(k), n)))
    values = pa.array(probs.ravel(), pa.float64())
    columns = {
        **{name: rows.column(name) for name in rows.column_names},
        "position": pa.array(np.arange(first, first + n, dtype=np.int64)),
        "labels": pa.ListArray.from_arrays(offsets, names),
        "probs": pa.ListArray.from_arrays(offsets, values),
        "probabilities": pa.MapArray.from_arrays(offsets, names, values),
    }
    schema = TABLES[RECORDS]
    out = [
        columns[f.name] if f.name in columns else pa.repeat(pa.scalar(keys[f.name], f.type), n)
        for f in schema
    ]
    return pa.Table.from_arrays(out, schema=schema)


class RecordsWriter:
    """The loader's sink while a day is ingested: each accepted stretch becomes
    ``production_records`` rows, handed to ``write`` once the source's hash is known (the
    rows carry it; it is computed beside the load). ``pools``: two threads, one building
    each stretch's rows and one writing them in order, so that the rows of the next stretch
    are built while the last is encoded and compressed (Parquet releases the GIL), while
    the loader parses and checks the stretches after (at most ``AHEAD`` wait); without
    them, each stretch is stored as it comes."""

    AHEAD = 2

    def __init__(
        self,
        spec: DecisionSpec,
        keys: dict[str, Any],
        digest: Future[str] | None,
        write: Callable[[pa.Table], None],
        pools: tuple[Executor, Executor] | None = None,
    ) -> None:
        self.spec = spec
        self.keys = keys
        self.digest = digest
        self.write = write
        self.pools = pools
        self.count = 0
        self.writing: deque[Future[None]] = deque()
        self.shown: pa.Table | None = None

    def arrow(self, table: pa.Table, batch: Batch, block: Any, starts: np.ndarray) -> None:
        first = self.count
        self._add(lambda: arrow_rows(table, batch, block, starts, self.spec, first + 1), first)
        self.count += table.num_rows

    def items(self, items: list[Item]) -> None:
        self._add(lambda: items_rows(items, self.spec), self.count)
        self.count += len(items)

    def _add(self, rows: Callable[[], tuple[pa.Table, np.ndarray]], first: int) -> None:
        if self.pools is None:
            self._store(*rows(), first)
            return
        building, writing = self.pools
        built = building.submit(rows)
        # the writer is one thread: stretches are written in the order they came
        self.writing.append(writing.submit(lambda: self._store(*built.result(), first)))
        while len(self.writing) > self.AHEAD:
            self.writing.popleft().result()

    def _store(self, rows: pa.Table, probs: np.ndarray, first: int) -> None:
        """One stretch's rows written (once the hash is known: the rows carry it)."""
        if self.digest is not None:
            self.keys["dataset_hash"] = self.digest.result()
        table = stored_rows(rows, probs, self.spec, first, self.keys)
        if self.shown is None or self.shown.num_rows < SHOWN:
            head = table.slice(0, SHOWN)
            self.shown = head if self.shown is None else pa.concat_tables([self.shown, head])
        self.write(table)

    def finish(self) -> None:
        """Everything written (errors of a write raised here)."""
        while self.writing:
            self.writing.popleft().result()

    def abandon(self) -> None:
        """The load failed: nothing more is written (what is running ends first)."""
        for future in self.writing:
            future.cancel()
        for future in self.writing:
            if not future.cancelled():
                future.exception()
        self.writing.clear()


@contextlib.contextmanager
def threaded_writer(
    spec: DecisionSpec,
    keys: dict[str, Any],
    digest: Future[str] | None,
    write: Callable[[pa.Table], None],
) -> Iterator[RecordsWriter]:
    """A :class:`RecordsWriter` on its two threads for the block: finished (every stretch
    written) when the block ends without error, abandoned otherwise; either way its threads
    are done before the block's caller closes the file ``write`` appends to."""
    with ThreadPoolExecutor(1) as building, ThreadPoolExecutor(1) as writing:
        writer = RecordsWriter(spec, keys, digest, write, (building, writing))
        try:
            yield writer
            writer.finish()
        except BaseException:
            writer.abandon()
            raise


def read_batches(path: Path, columns: list[str], size: int = 1 << 16) -> Iterator[pa.RecordBatch]:
    """A stored file's rows a batch at a time (the file may hold ten million records)."""
    yield from pq.ParquetFile(path).iter_batches(batch_size=size, columns=columns)


# -- read back ----------------------------------------------------------------------------

# the stored columns a record is read back from as they are (the report too: production_report)
COPIED_BACK = (
    "id", "timestamp", "decision", "selected", "confidence", "backend", "model",
    "model_version", "outcome", "outcome_correct", "latency_ms", "cost", "action", "fallback",
)  # fmt: skip
_FOR_CHECK = [*COPIED_BACK, "input_text", "labels", "probs", "metadata_json"]


def stored_probs(batch: pa.Table) -> tuple[list[str], np.ndarray]:
    """The stored labels (one ingestion, one label order) and probabilities as a matrix."""
    labels = batch.column("labels")[0].as_py() if batch.num_rows else []
    values = batch.column("probs").combine_chunks().flatten().to_numpy(zero_copy_only=False)
    return labels, values.reshape(batch.num_rows, len(labels))


def _segment_values(texts: pa.Array, keys: tuple[str, ...]) -> pa.Array:
    """The metadata objects (JSON texts) as a struct of the segment keys, as Arrow reads
    them, each distinct text parsed once; the texts themselves when Arrow cannot read them
    (the column checks then decline the stretch and read its records one by one)."""
    encoded = pc.dictionary_encode(texts)
    parsed = jsonl_blocks.read_objects(encoded.dictionary, keys)
    if parsed is None:
        return texts
    return parsed.take(encoded.indices)


def _row_groups(
    path: Path, columns: list[str]
) -> Iterator[tuple[pa.Table, Callable[[], pa.Array]]]:
    """A stored file a row group at a time (one stretch of records as ingested), and a way
    to read the group's ``record_json`` when it is needed."""
    file = pq.ParquetFile(path)
    for group in range(file.num_row_groups):

        def stored(group: int = group) -> pa.Array:
            return file.read_row_group(group, ["record_json"]).column(0).combine_chunks()

        yield file.read_row_group(group, columns), stored


def stored_stretches(
    path: Path, segment_keys: tuple[str, ...]
) -> Iterator[tuple[pa.Table, Callable[[int], list[Item]]]]:
    """Stored records, a stretch at a time, in record-field shape for the loader (the
    probabilities a struct of the stored labels, the metadata only as far as the segment
    keys), with their items parsed from ``record_json`` for the record-by-record path."""
    for batch, stored in _row_groups(path, _FOR_CHECK):
        labels, probs = stored_probs(batch)
        fields = {name: batch.column(name) for name in COPIED_BACK}
        fields["input"] = batch.column("input_text")
        fields["probabilities"] = pa.StructArray.from_arrays(
            [pa.array(probs[:, j]) for j in range(len(labels))], names=labels
        )
        if segment_keys:
            metadata = batch.column("metadata_json").combine_chunks()
            fields["metadata"] = _segment_values(metadata, segment_keys)

        def parsed(first: int, stored: Callable[[], pa.Array] = stored) -> list[Item]:
            texts = stored().to_pylist()
            return [
                Item(jsonl_blocks.json_value(t.encode()), first + i) for i, t in enumerate(texts)
            ]

        yield pa.table(fields), parsed


def stored_items(path: Path) -> Iterator[Item]:
    """Every stored record parsed from ``record_json``, in order."""
    position = 0
    for batch in read_batches(path, ["record_json"]):
        for text in batch.column("record_json").to_pylist():
            position += 1
            yield Item(jsonl_blocks.json_value(text.encode()), position)
