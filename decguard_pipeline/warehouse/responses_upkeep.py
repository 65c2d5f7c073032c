"""Upkeep of the ``responses`` table: what ``decguard-pipeline cache stats`` and ``cache prune``
run, on a local folder or an object store alike. Pruning deletes a partition's old and
superseded rows in one transaction, so a reader or a run going on meanwhile finds every answer
kept (the space goes at the next ``warehouse compact``, once the snapshots before the deletion
expire)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from decguard_pipeline.warehouse.responses import (
    JOURNAL_GLOB,
    TABLE,
    CacheEvents,
    ResponseTable,
    Unheard,
    _sweep_new_journals,
)
from decguard_pipeline.warehouse.store import JOURNALS, Warehouse


def _journal_partitions(warehouse: Warehouse) -> dict[tuple[str, str], Path]:
    """The (contract, target) partitions with a journal folder (local warehouses only)."""
    if warehouse.remote:
        return {}
    root = Path(str(warehouse.root)) / JOURNALS / TABLE
    out = {}
    for folder in sorted(root.glob("contract=*/target=*")):
        if folder.is_dir():
            contract = unquote(folder.parent.name.removeprefix("contract="))
            out[(contract, unquote(folder.name.removeprefix("target=")))] = folder
    return out


def partitions(warehouse: Warehouse) -> list[tuple[str, str]]:
    """Every (contract, target) with answers, or with journals of runs."""
    found = warehouse.query(f"SELECT DISTINCT contract, target FROM {TABLE}").to_pylist()
    keys = {(r["contract"], r["target"]) for r in found}
    return sorted(keys | set(_journal_partitions(warehouse)))


def _journals(folder: Path | None) -> int:
    """Journals of runs going on (or dead, until the next run commits them): local only."""
    return len(list(folder.glob(JOURNAL_GLOB))) if folder is not None else 0


def response_stats(warehouse: Warehouse, events: CacheEvents | None = None) -> list[dict[str, Any]]:
    """Per contract and target: answers stored (rows and distinct keys), the oldest and
    newest answer, tokens, and journals of runs still going (or dead, until the next run of
    that target commits them)."""
    events = events or Unheard()
    if not warehouse.exists():
        return []
    figures = {
        (r["contract"], r["target"]): r
        for r in warehouse.query(
            "SELECT contract, target, count(*) AS answers, count(DISTINCT key) AS distinct_keys, "
            "min(answered_at) AS oldest, max(answered_at) AS newest, "
            "coalesce(sum(prompt_tokens), 0) AS prompt_tokens, "
            f"coalesce(sum(completion_tokens), 0) AS completion_tokens FROM {TABLE} "
            "GROUP BY contract, target"
        ).to_pylist()
    }
    journals = _journal_partitions(warehouse)
    out = []
    for contract, target in partitions(warehouse):
        row = figures.get((contract, target)) or {
            "answers": 0, "distinct_keys": 0, "oldest": None, "newest": None,
            "prompt_tokens": 0, "completion_tokens": 0,
        }  # fmt: skip
        out.append(
            {
                "contract": contract,
                "target": target,
                "answers": int(row["answers"]),
                "distinct_keys": int(row["distinct_keys"]),
                "oldest": row["oldest"],
                "newest": row["newest"],
                "prompt_tokens": int(row["prompt_tokens"]),
                "completion_tokens": int(row["completion_tokens"]),
                "journals": _journals(journals.get((contract, target))),
            }
        )
    return out


@dataclass
class Pruned:
    partitions: int = 0  # partitions with rows deleted
    removed: int = 0  # rows dropped: older than the cutoff, or superseded duplicates
    kept: int = 0
    recovered: int = 0  # answers of dead runs' journals committed first


def prune(
    warehouse: Warehouse,
    *,
    older_than_days: float,
    run_id: str,
    events: CacheEvents | None = None,
) -> Pruned:
    """Drop answers older than ``older_than_days`` (by when they were answered) and the
    older rows of a key written again, partition by partition, each in one transaction.
    Dead runs' journals are committed first."""
    cutoff = datetime.now(UTC) - timedelta(days=older_than_days)
    done = Pruned()
    journals = _journal_partitions(warehouse)
    for contract, target in partitions(warehouse):
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
        store._load()  # commits dead journals
        done.recovered += store.recovered
        if (contract, target) in journals:
            _sweep_new_journals(journals[(contract, target)])
        where = "contract = $c AND target = $t"
        params = {"c": contract, "t": target, "cutoff": cutoff}
        with warehouse.direct() as con:
            deleted = con.execute(
                f"DELETE FROM {TABLE} WHERE {where} AND (answered_at < $cutoff OR rowid NOT IN "
                f"(SELECT max(rowid) FROM {TABLE} WHERE {where} GROUP BY key))",
                params,
            ).fetchone()
            kept = con.execute(
                f"SELECT count(*) FROM {TABLE} WHERE {where}", {"c": contract, "t": target}
            ).fetchone()
        removed = int(deleted[0]) if deleted else 0
        done.kept += int(kept[0]) if kept else 0
        if removed:
            done.partitions += 1
            done.removed += removed
    return done
