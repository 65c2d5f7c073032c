"""Upkeep of the ``responses`` table: what ``decguard-pipeline cache stats`` and ``cache prune``
run, on a local folder or an object store alike. Pruning rewrites a partition's kept rows as
one new file (atomically, through the warehouse's write path) before deleting the old ones, so
a reader never misses an answer kept. A damaged file is said (``events``) and left out of the
figures; ``prune`` moves it aside as a run would."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa

from decguard_pipeline.warehouse.locations import Location
from decguard_pipeline.warehouse.responses import (
    COMPRESSION,
    JOURNAL_GLOB,
    TABLE,
    CacheEvents,
    ResponseTable,
    Unheard,
    _newest_per_key,
    _sweep_new_journals,
    read_unless_damaged,
)
from decguard_pipeline.warehouse.schema import NO_TARGET
from decguard_pipeline.warehouse.store import Warehouse, published_files


def partitions(warehouse: Warehouse) -> list[tuple[str, str, Location]]:
    """Every (contract, target, folder) of the responses table, the schema seed's aside."""
    storage = warehouse.storage
    out = []
    for contract_dir in storage.folders(warehouse.root / TABLE, "contract=*"):
        for folder in storage.folders(contract_dir, "target=*"):
            contract = unquote(contract_dir.name.removeprefix("contract="))
            target = unquote(folder.name.removeprefix("target="))
            if (contract, target) != ("_", NO_TARGET):
                out.append((contract, target, folder))
    return out


def _journals(folder: Location) -> int:
    """Journals of runs going on (or dead, until the next run publishes them): local only."""
    return len(list(folder.glob(JOURNAL_GLOB))) if isinstance(folder, Path) else 0


def response_stats(warehouse: Warehouse, events: CacheEvents | None = None) -> list[dict[str, Any]]:
    """Per contract and target: answers stored (rows and distinct keys), files, bytes, the
    oldest and newest answer, tokens, and journals of runs still going (or dead, until the
    next run of that target publishes them). A damaged file is said and not counted."""
    import pyarrow.compute as pc

    events = events or Unheard()
    out = []
    for contract, target, folder in partitions(warehouse):
        files, tables = [], []
        for path in published_files(folder):
            table = read_unless_damaged(path, events, move=False)
            if table is not None:
                files.append(path)
                tables.append(table)
        table = pa.concat_tables(tables) if tables else None
        rows = table.num_rows if table is not None else 0
        answered = table.column("answered_at") if table is not None else None
        out.append(
            {
                "contract": contract,
                "target": target,
                "answers": rows,
                "distinct_keys": (len(pc.unique(table.column("key"))) if table is not None else 0),
                "files": len(files),
                "bytes": sum(warehouse.storage.size(p) for p in files),
                "oldest": pc.min(answered).as_py() if rows else None,
                "newest": pc.max(answered).as_py() if rows else None,
                "prompt_tokens": int(pc.sum(table.column("prompt_tokens")).as_py() or 0)
                if rows
                else 0,
                "completion_tokens": int(pc.sum(table.column("completion_tokens")).as_py() or 0)
                if rows
                else 0,
                "journals": _journals(folder),
            }
        )
    return out


@dataclass
class Pruned:
    partitions: int = 0  # partitions rewritten
    removed: int = 0  # rows dropped: older than the cutoff, or superseded duplicates
    kept: int = 0
    files_removed: int = 0
    recovered: int = 0  # answers of dead runs' journals published first


def prune(
    warehouse: Warehouse,
    *,
    older_than_days: float,
    run_id: str,
    events: CacheEvents | None = None,
) -> Pruned:
    """Drop answers older than ``older_than_days`` (by when they were answered) and duplicate
    rows of a key, partition by partition: the rows kept are written as one new file
    (atomically) before the old files are deleted, so a reader or a run going on meanwhile
    always finds every answer kept (and a run's files published meanwhile are not touched).
    Dead runs' journals are published first, damaged files moved aside."""
    import pyarrow.compute as pc

    cutoff = datetime.now(UTC) - timedelta(days=older_than_days)
    done = Pruned()
    storage = warehouse.storage
    for contract, target, folder in partitions(warehouse):
        store = ResponseTable(
            warehouse,
            contract=contract,
            target=target,
            run_id=run_id,
            backend="",
            provider="",
            version="",
            events=events,
        )
        store._load()  # publishes dead journals, moves damaged files aside
        done.recovered += store.recovered
        if isinstance(folder, Path):
            _sweep_new_journals(folder)
        files = published_files(folder)
        if not files:
            continue
        table = pa.concat_tables([storage.read_table(p) for p in files])
        newest = _newest_per_key(table)
        kept = newest.filter(pc.greater_equal(newest.column("answered_at"), cutoff))
        removed = table.num_rows - kept.num_rows
        if not removed:
            done.kept += kept.num_rows
            continue
        if kept.num_rows:
            warehouse.write(
                TABLE, kept, contract=contract, target=target, run_id=run_id,
                compression=COMPRESSION,
            )  # fmt: skip
        for path in files:
            storage.delete(path)
        done.partitions += 1
        done.removed += removed
        done.kept += kept.num_rows
        done.files_removed += len(files)
    return done
