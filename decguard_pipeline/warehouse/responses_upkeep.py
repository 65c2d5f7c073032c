"""Upkeep of the ``responses`` table: what ``decguard-pipeline cache stats`` and ``cache prune``
run. Pruning rewrites a partition's kept rows as one new file (atomically, through the
warehouse's write path) before deleting the old ones, so a reader never misses an answer kept."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq

from decguard_pipeline.warehouse.responses import (
    COMPRESSION,
    JOURNAL_GLOB,
    TABLE,
    ResponseTable,
    _newest_per_key,
    _sweep_new_journals,
)
from decguard_pipeline.warehouse.schema import NO_TARGET
from decguard_pipeline.warehouse.store import Warehouse, published_files


def partitions(warehouse: Warehouse) -> list[tuple[str, str, Path]]:
    """Every (contract, target, folder) of the responses table, the schema seed's aside."""
    root = warehouse.root / TABLE
    if not root.is_dir():
        return []
    out = []
    for folder in sorted(root.glob("contract=*/target=*")):
        contract = unquote(folder.parent.name.removeprefix("contract="))
        target = unquote(folder.name.removeprefix("target="))
        if (contract, target) != ("_", NO_TARGET) and folder.is_dir():
            out.append((contract, target, folder))
    return out


def response_stats(warehouse: Warehouse) -> list[dict[str, Any]]:
    """Per contract and target: answers stored (rows and distinct keys), files, bytes, the
    oldest and newest answer, tokens, and journals of runs still going (or dead, until the
    next run of that target publishes them)."""
    import pyarrow.compute as pc

    out = []
    for contract, target, folder in partitions(warehouse):
        files = published_files(folder)
        columns = ["key", "answered_at", "prompt_tokens", "completion_tokens"]
        tables = [pq.ParquetFile(p).read(columns=columns) for p in files]
        table = pa.concat_tables(tables) if tables else None
        journals = list(folder.glob(JOURNAL_GLOB))
        rows = table.num_rows if table is not None else 0
        answered = table.column("answered_at") if table is not None else None
        out.append(
            {
                "contract": contract,
                "target": target,
                "answers": rows,
                "distinct_keys": (len(pc.unique(table.column("key"))) if table is not None else 0),
                "files": len(files),
                "bytes": sum(p.stat().st_size for p in files),
                "oldest": pc.min(answered).as_py() if rows else None,
                "newest": pc.max(answered).as_py() if rows else None,
                "prompt_tokens": int(pc.sum(table.column("prompt_tokens")).as_py() or 0)
                if rows
                else 0,
                "completion_tokens": int(pc.sum(table.column("completion_tokens")).as_py() or 0)
                if rows
                else 0,
                "journals": len(journals),
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


def prune(warehouse: Warehouse, *, older_than_days: float, run_id: str) -> Pruned:
    """Drop answers older than ``older_than_days`` (by when they were answered) and duplicate
    rows of a key, partition by partition: the rows kept are written as one new file
    (atomically) before the old files are deleted, so a reader or a run going on meanwhile
    always finds every answer kept (and a run's files published meanwhile are not touched).
    Dead runs' journals are published first."""
    import pyarrow.compute as pc

    cutoff = datetime.now(UTC) - timedelta(days=older_than_days)
    done = Pruned()
    for contract, target, folder in partitions(warehouse):
        store = ResponseTable(
            warehouse,
            contract=contract,
            target=target,
            run_id=run_id,
            backend="",
            provider="",
            version="",
        )
        store._load()  # publishes dead journals
        done.recovered += store.recovered
        _sweep_new_journals(folder)
        files = published_files(folder)
        if not files:
            continue
        table = pa.concat_tables([pq.ParquetFile(p).read() for p in files])
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
            path.unlink(missing_ok=True)
        done.partitions += 1
        done.removed += removed
        done.kept += kept.num_rows
        done.files_removed += len(files)
    return done
