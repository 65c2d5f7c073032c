"""The rows this process committed of each run, kept for its own later reads of them.

A step writes each of its tables once per run, and a committed write never changes, yet an
evaluation's later steps read back what its earlier steps wrote in the same process (gate
results, checks, the verdict's inputs, the summary). Against a SQLite catalog each such read
is a DuckLake query of 10-50 ms (sqlite_scanner pushes no filter down: DuckLake reads the
catalog's file and statistics tables whole), so ``Warehouse.read_run`` answers from here what
this process committed itself, and asks DuckLake for anything else.

Exact by construction: a run's rows are kept only when one commit of this process wrote all of
them under one ``recorded_at`` (the newest write ``read_run`` returns); a second write of the
same run's table forgets them (the reader goes to DuckLake). Maintenance that deletes rows
(``Warehouse.direct``) forgets the warehouse's runs. Bounded: a table of more than
``MAX_ROWS`` rows is not kept, and the oldest go once ``MAX_BYTES`` are held.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path

import pyarrow as pa

from decguard_pipeline.warehouse.schema import TABLES
from decguard_pipeline.warehouse.transaction import in_memory

MAX_ROWS = 200_000
MAX_BYTES = 256 << 20
_KEYS = ("contract", "target", "run_id", "recorded_at")

_Key = tuple[str, str, str, str, str]
_kept: OrderedDict[_Key, pa.Table] = OrderedDict()
_bytes = 0
_lock = threading.Lock()


def remember(warehouse: str, staged: dict[str, list[pa.Table | Path]]) -> None:
    """Keep the runs' rows of a transaction that has just committed (``staged``: each
    table's items in the order written)."""
    for table, items in staged.items():
        rows = _one_write(table, items)
        if rows is None:
            _forget_written(warehouse, table, items)
            continue
        first = rows.slice(0, 1).select(["contract", "target", "run_id"]).to_pylist()[0]
        key = (warehouse, table, first["contract"], first["target"], first["run_id"])
        with _lock:
            if key in _kept:  # a second write of the run's table: DuckLake decides
                _drop(key)
                continue
            _put(key, rows)


def recall(warehouse: str, table: str, contract: str, target: str, run_id: str) -> pa.Table | None:
    """The rows run ``run_id`` wrote of ``table``, when this process committed them."""
    with _lock:
        rows = _kept.get((warehouse, table, contract, target, run_id))
        if rows is not None:
            _kept.move_to_end((warehouse, table, contract, target, run_id))
        return rows


def forget(warehouse: str) -> None:
    """Forget every run of a warehouse (its rows may have been deleted)."""
    with _lock:
        for key in [k for k in _kept if k[0] == warehouse]:
            _drop(key)


def _one_write(table: str, items: list[pa.Table | Path]) -> pa.Table | None:
    """The staged rows of ``table`` when they are one run's write, small enough to keep."""
    rows = in_memory(items)
    if rows is None or not rows.num_rows or rows.num_rows > MAX_ROWS:
        return None
    if not rows.schema.equals(TABLES[table]):
        return None
    for name in _KEYS:
        column = rows.column(name)
        if column.null_count or len(column.unique()) != 1:
            return None
    return rows


def _forget_written(warehouse: str, table: str, items: list[pa.Table | Path]) -> None:
    """Forget the runs a write not kept touched (a spilled day, several runs at once)."""
    tables = [i for i in items if isinstance(i, pa.Table)]
    runs = {r for t in tables for r in t.column("run_id").unique().to_pylist()}
    spilled = len(tables) != len(items)
    with _lock:
        for key in list(_kept):
            if key[:2] == (warehouse, table) and (spilled or key[4] in runs):
                _drop(key)


def _put(key: _Key, rows: pa.Table) -> None:
    global _bytes
    _kept[key] = rows
    _bytes += rows.nbytes
    while _bytes > MAX_BYTES and _kept:
        _drop(next(iter(_kept)))


def _drop(key: _Key) -> None:
    global _bytes
    _bytes -= _kept.pop(key).nbytes
