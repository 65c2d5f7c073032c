"""Loading a production record set (``.jsonl``, ``.json`` or an Arrow table) into columns.

Semantics are DecGuard's (spec §11.1): every record is checked, the first invalid one stops
the load with its line (``.jsonl``), record number (``.json``) or row (table) and field, ids
must be unique, an empty set is an error, and the hash is sha256 of the file's bytes.

A JSONL file is read in blocks of whole lines: blocks pyarrow can take whole are checked
column-wise (:mod:`arrow_batches`), the rest record by record (:mod:`records`), so memory
holds the columns plus one block. The first error in file order wins, as in DecGuard, whose
loader stops at the first bad record: a block's first bad record is compared with the first
repeated id before it.
"""

from __future__ import annotations

import ctypes
import hashlib
import mmap
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from decguard_pipeline.core.collector import gc_paused
from decguard_pipeline.core.contract.spec import DecisionSpec
from decguard_pipeline.core.dataset import iter_items, read_text, require_file
from decguard_pipeline.core.errors import DatasetError
from decguard_pipeline.core.production import jsonl_blocks
from decguard_pipeline.core.production.arrow_batches import table_batch
from decguard_pipeline.core.production.columns import Batch, Columns, ColumnsBuilder, first_repeat
from decguard_pipeline.core.production.normalized import normalized_record
from decguard_pipeline.core.production.records import Item, check_items
from decguard_pipeline.core.validation import SURROGATE_ESCAPE

WHAT = "production dataset"
ITEMS_PER_CHECK = 50_000
PARSERS = 2  # threads parsing blocks with Arrow
AHEAD = 3  # blocks parsed ahead of the checks (bounds memory to a few blocks)
TRIM_EVERY = 32  # blocks between returns of freed heap memory to the system


@dataclass
class RecordSet:
    """Validated records: columns for the metrics, and a way back to the normalised records
    (streamed from the source again) for the report's ``records``."""

    path: str
    hash: str
    columns: Columns
    spec: DecisionSpec
    _items: Callable[[], Iterator[Item]]
    columnar: int = 0  # records checked on the Arrow path (the rest went record by record)

    def __len__(self) -> int:
        return len(self.columns)

    @property
    def n_outcomes(self) -> int:
        return int(np.count_nonzero(self.columns.outcome >= 0))

    @property
    def n_correctness(self) -> int:
        return int(np.count_nonzero(self.columns.correct >= 0))

    def records(self) -> Iterator[dict[str, Any]]:
        """The normalised records, in order, as DecGuard stores them in a check report."""
        for item in self._items():
            yield normalized_record(item.value, item.position, self.spec)


class RecordSink(Protocol):
    """Sees every accepted record once, in order, while a file is loaded (the pipeline
    stores them as they come): a stretch Arrow parsed and :func:`table_batch` accepted, with
    the block's bytes it came from, or parsed items checked record by record."""

    def arrow(self, table: pa.Table, batch: Batch, block: Any, starts: np.ndarray) -> None: ...

    def items(self, items: list[Item]) -> None: ...

    def finish(self) -> None:
        """Every record passed its own checks: complete what is in flight (before the ids
        are checked unique and the columns joined, so that its buffers are freed first; a
        repeated id still fails the load afterwards)."""


class _Loader:
    """Shared bookkeeping: the columns so far and DecGuard's first-error rule."""

    def __init__(
        self,
        path: str,
        spec: DecisionSpec,
        tolerance: float,
        segment_keys: tuple[str, ...],
        sink: RecordSink | None = None,
    ) -> None:
        self.path = path
        self.spec = spec
        self.tolerance = tolerance
        self.keys = segment_keys
        self.builder = ColumnsBuilder(spec, segment_keys)
        self.columnar = 0
        self.sink = sink

    @property
    def count(self) -> int:
        return self.builder.n

    def add_items(self, items: list[Item], locate: Callable[[int], str]) -> None:
        """Check items (positions continue the record count) and keep their columns."""
        checked = check_items(
            items, self.spec, self.tolerance, self.keys,
            self.builder.versions, self.builder.segment_values,
        )  # fmt: skip
        if checked.batch is not None:
            self.builder.add(checked.batch)
        if checked.first_bad is not None:
            index, problem = checked.first_bad
            self.fail_at(items[index].position, problem, locate)
        if self.sink is not None:
            self.sink.items(items)

    def add_table(
        self, table: pa.Table, block: Any = None, starts: np.ndarray | None = None
    ) -> bool:
        """Keep the columns of ``table`` when Arrow's reading of it is certainly DecGuard's
        (``block``: the bytes it was parsed from and where its records start, for the
        sink)."""
        batch = table_batch(
            table, self.spec, self.tolerance, first_position=self.count + 1,
            segment_keys=self.keys, versions=self.builder.versions,
            segment_values=self.builder.segment_values,
        )  # fmt: skip
        if batch is None:
            return False
        self.builder.add(batch)
        self.columnar += table.num_rows
        if self.sink is not None:
            self.sink.arrow(table, batch, block, starts)
        return True

    def fail_at(self, position: int, problem: str, locate: Callable[[int], str]) -> None:
        """Raise the error of the record at ``position``, unless an id repeated earlier."""
        self.check_unique(locate, before=position)
        raise DatasetError(f"{self.path}: {locate(position)}: {problem}")

    def check_unique(self, locate: Callable[[int], str], before: int | None = None) -> None:
        parts = self.builder.parts
        hashes = np.concatenate(parts["id_hashes"]) if parts.get("id_hashes") else np.zeros(0)
        ids = pa.chunked_array(parts.get("ids", []), type=pa.string())
        if before is not None:
            hashes, ids = hashes[: before - 1], ids.slice(0, before - 1)
        repeat = first_repeat(hashes, ids)
        if repeat is not None:
            first, position = repeat
            record_id = ids[position - 1].as_py()
            raise DatasetError(
                f"{self.path}: {locate(position)}: duplicate record id {record_id!r} "
                f"(first at {locate(first)})"
            )

    def finish(self, locate: Callable[[int], str]) -> Columns:
        if not self.count:
            raise DatasetError(f"{self.path}: {WHAT} contains no records")
        if self.sink is not None:  # its buffers freed before the ids are sorted
            self.sink.finish()
        self.check_unique(locate)
        columns = self.builder.build()
        release_free_memory()
        return columns


def release_free_memory() -> None:
    """Hand freed heap memory back to the system: glibc keeps what thousands of per-block
    arrays freed, fragmented over thread arenas, and Arrow's allocator keeps freed pages for
    reuse (a no-op where neither applies)."""
    pa.default_memory_pool().release_unused()
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return
    trim(0)


def _cannot_read(path: Path, exc: OSError) -> DatasetError:
    return DatasetError(f"{path}: cannot read {WHAT}: {exc.strerror or exc}")


def _jsonl_line_of(path: Path) -> Callable[[int], str]:
    """Locates a record position by reading the file again (error paths only)."""

    def locate(position: int) -> str:
        with path.open("rb") as stream:
            for number, (lineno, _) in enumerate(jsonl_blocks.read_lines(stream), start=1):
                if number == position:
                    return f"line {lineno}"
        return f"record {position}"

    return locate


def _jsonl_items(path: Path) -> Iterator[Item]:
    with path.open("rb") as stream:
        for position, (_, raw) in enumerate(jsonl_blocks.read_lines(stream), start=1):
            yield Item(jsonl_blocks.json_value(raw), position)


def _mapped(path: Path, stream: Any) -> Any:
    """The file's bytes without copying them (an mmap), or b"" for an empty file."""
    size = os.fstat(stream.fileno()).st_size
    if not size:
        return b""
    mapped = mmap.mmap(stream.fileno(), 0, access=mmap.ACCESS_READ)
    if hasattr(mmap, "MADV_SEQUENTIAL"):
        mapped.madvise(mmap.MADV_SEQUENTIAL)
    return mapped


def release_pages(data: Any, end: int) -> None:
    """Let the kernel drop the mapped pages before ``end`` from this process (they stay in
    the page cache; a page still wanted is simply read again), so resident memory stays at
    a few blocks whatever the file size."""
    if isinstance(data, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
        upto = end - end % mmap.PAGESIZE
        if upto:
            data.madvise(mmap.MADV_DONTNEED, 0, upto)


def load_jsonl(
    path: Path,
    spec: DecisionSpec,
    tolerance: float,
    segment_keys: tuple[str, ...],
    sink: RecordSink | None = None,
    hashed: Future[str] | None = None,
) -> RecordSet:
    """``hashed``: the file's ``sha256:`` digest, computed by the caller (else here)."""
    loader = _Loader(str(path), spec, tolerance, segment_keys, sink)
    reader = jsonl_blocks.ArrowReader(spec, segment_keys)
    locate = _jsonl_line_of(path)
    digest = hashlib.sha256()

    try:
        with path.open("rb") as stream, ThreadPoolExecutor(PARSERS) as parsers, \
                ThreadPoolExecutor(1) as hasher:  # fmt: skip
            data = _mapped(path, stream)
            view = memoryview(data)
            ranges = list(jsonl_blocks.block_ranges(data))

            def submit(a: int, b: int) -> Future[tuple[pa.Table | None, int, Any]]:
                # worker threads: hashing (in order, on its own thread) and Arrow parsing
                # release the GIL while the main thread checks the previous block
                if hashed is None:
                    hasher.submit(digest.update, view[a:b])
                return parsers.submit(reader.fast_table, view[a:b], (data, a))

            pending = deque(submit(a, b) for a, b in ranges[:AHEAD])
            line = 1
            for index, (start, end) in enumerate(ranges):
                table, n_lines, starts = pending.popleft().result()
                if index + AHEAD < len(ranges):
                    pending.append(submit(*ranges[index + AHEAD]))
                if table is None or not loader.add_table(table, view[start:end], starts):
                    block = bytes(view[start:end])
                    items, _ = jsonl_blocks.python_items(block, line, loader.count + 1)
                    for first in range(0, len(items), ITEMS_PER_CHECK):
                        loader.add_items(items[first : first + ITEMS_PER_CHECK], locate)
                line += n_lines
                release_pages(data, end)
                if index % TRIM_EVERY == TRIM_EVERY - 1:
                    release_free_memory()
            hasher.shutdown(wait=True)
    except OSError as exc:
        raise _cannot_read(path, exc) from exc
    columns = loader.finish(locate)
    digest_text = "sha256:" + digest.hexdigest() if hashed is None else hashed.result()
    items = lambda: _jsonl_items(path)  # noqa: E731
    return RecordSet(str(path), digest_text, columns, spec, items, loader.columnar)


def load_json(
    path: Path,
    spec: DecisionSpec,
    tolerance: float,
    segment_keys: tuple[str, ...],
    sink: RecordSink | None = None,
) -> RecordSet:
    raw, text = read_text(path, WHAT)
    values = [value for _, value in iter_items(path, text, what=WHAT)]
    loader = _Loader(str(path), spec, tolerance, segment_keys, sink)
    locate = lambda position: f"record {position}"  # noqa: E731
    escapes = SURROGATE_ESCAPE.search(text) is not None
    for start in range(0, len(values), ITEMS_PER_CHECK):
        chunk = values[start : start + ITEMS_PER_CHECK]
        loader.add_items(
            [
                Item(v, start + i + 1, jsonl_blocks.unwritable_text(v) if escapes else None)
                for i, v in enumerate(chunk)
            ],
            locate,
        )
    columns = loader.finish(locate)

    def items() -> Iterator[Item]:
        return (Item(v, i) for i, v in enumerate(values, start=1))

    return RecordSet(str(path), "sha256:" + hashlib.sha256(raw).hexdigest(), columns, spec, items)


def load_records(
    path: str | Path,
    spec: DecisionSpec,
    *,
    tolerance: float,
    segment_keys: tuple[str, ...] = (),
    sink: RecordSink | None = None,
    hashed: Future[str] | None = None,
) -> RecordSet:
    """Load and check a ``.jsonl``/``.json`` records file (DecGuard's rules and messages);
    ``sink`` sees every record as it is accepted; ``hashed``: the file's digest when the
    caller computes it (a ``.jsonl`` file is not hashed again)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        try:  # mapped, then read again for its records: a pipe or device cannot be
            require_file(path, WHAT)
        except OSError as exc:
            raise _cannot_read(path, exc) from exc
        with gc_paused():  # the record-by-record path builds many small acyclic objects
            return load_jsonl(path, spec, tolerance, segment_keys, sink, hashed)
    if suffix == ".json":
        with gc_paused():
            return load_json(path, spec, tolerance, segment_keys, sink)
    raise DatasetError(f"{path}: unsupported {WHAT} format (use .jsonl or .json)")


# a stretch of records as a table in record-field shape, and its records as parsed items
# (given the position of its first record) for when the table cannot be taken column-wise
Stretch = tuple[pa.Table, Callable[[int], list[Item]]]


def load_stretches(
    stretches: Iterable[Stretch],
    spec: DecisionSpec,
    *,
    tolerance: float,
    segment_keys: tuple[str, ...] = (),
    path: str,
    hash: str,
    items: Callable[[], Iterator[Item]],
    word: str = "line",
) -> RecordSet:
    """Records already parsed (stored rows read back): each stretch checked column-wise when
    it can be, else record by record from its items; errors name ``path`` and ``<word> N``
    (N the record's position). ``items`` streams every record again for the report."""
    loader = _Loader(path, spec, tolerance, segment_keys)
    locate = lambda position: f"{word} {position}"  # noqa: E731
    for index, (table, parsed) in enumerate(stretches):
        if not loader.add_table(table):
            loader.add_items(parsed(loader.count + 1), locate)
        if index % 8 == 7:  # what reading and checking each stretch freed
            release_free_memory()
    columns = loader.finish(locate)
    return RecordSet(path, hash, columns, spec, items, loader.columnar)


def table_rows(table: pa.Table, start: int = 0) -> Iterator[Item]:
    """A table's rows as record items; a null reads as an absent field."""
    for batch in table.to_batches(max_chunksize=ITEMS_PER_CHECK):
        for row in batch.to_pylist():
            start += 1
            yield Item({k: v for k, v in row.items() if v is not None}, start)


def load_table(
    table: pa.Table,
    spec: DecisionSpec,
    *,
    tolerance: float,
    segment_keys: tuple[str, ...] = (),
    path: str = "<table>",
    hash: str | None = None,
) -> RecordSet:
    """Records held in an Arrow table (columns named like the record fields; ``input`` and
    ``metadata`` may be structs). Null means absent. The hash defaults to sha256 of the
    table's Arrow IPC stream."""
    loader = _Loader(path, spec, tolerance, segment_keys)
    locate = lambda position: f"row {position}"  # noqa: E731
    for batch in table.to_batches(max_chunksize=1 << 20):
        part = pa.Table.from_batches([batch])
        if not loader.add_table(part):
            loader.add_items(list(table_rows(part, loader.count)), locate)
    columns = loader.finish(locate)
    if hash is None:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        hash = "sha256:" + hashlib.sha256(sink.getvalue()).hexdigest()
    items = lambda: table_rows(table)  # noqa: E731
    return RecordSet(path, hash, columns, spec, items, loader.columnar)
