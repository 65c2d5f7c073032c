"""What every step shares: where it writes (:class:`Step`), a target's evaluation read back
from the warehouse, and the rows a run wrote. No Dagster here."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from decguard_pipeline.core.errors import DecGuardError
from decguard_pipeline.core.results import CaseResults
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline.warehouse.rows.base import row_keys
from decguard_pipeline.warehouse.rows.golden import case_results_from_table
from decguard_pipeline.warehouse.schema import NO_TARGET
from decguard_pipeline.warehouse.store import now


@dataclass
class Step:
    """Where a step writes: the warehouse, the run id, one timestamp for all its rows."""

    warehouse: Warehouse
    run_id: str
    at: datetime = field(default_factory=now)

    def keys(self, contract: str, target: str = NO_TARGET) -> dict[str, Any]:
        """The key columns of this step's rows of one partition, which are also the partition
        arguments of ``Warehouse.write``."""
        return row_keys(contract, target, self.run_id, self.at)


@dataclass
class Evaluated:
    results: CaseResults
    run: dict[str, Any]


def load_evaluated(
    entry: ContractEntry, target: str, warehouse: Warehouse, run_id: str | None = None
) -> Evaluated:
    """The evaluation of a target by run ``run_id`` when that run made one (a step reads what
    its own run wrote, not a parallel run's), else the newest that reached its verdict (not
    one killed midway or still running: warehouse/completion.py); read back from the
    warehouse."""
    loaded = entry.require()
    runs = None if run_id is None else warehouse.read_run("runs", entry.key, target, run_id)
    if runs is None or runs.num_rows == 0:
        runs = warehouse.read_latest("runs", entry.key, target)
    if runs is None or runs.num_rows == 0:
        raise DecGuardError(f"{entry.key}: target {target!r} has not been evaluated yet")
    run = runs.to_pylist()[-1]
    table = warehouse.read_run("case_results", entry.key, target, run["run_id"])
    if table is None:
        raise DecGuardError(f"{entry.key}: case results of run {run['run_id']} are missing")
    results = case_results_from_table(
        table, loaded.contract.spec(), backend=run["backend"], provider=run["provider"]
    )
    return Evaluated(results, run)


def run_rows(
    warehouse: Warehouse, table: str, contract: str, target: str, run_id: str | None = None
) -> list[dict[str, Any]] | None:
    """Rows of ``table`` written by run ``run_id``, else the newest write (of a table an
    evaluation writes, the newest of a run that reached its verdict); None if none."""
    rows = None if run_id is None else warehouse.read_run(table, contract, target, run_id)
    if rows is None:
        rows = warehouse.read_latest(table, contract, target)
    return None if rows is None else rows.to_pylist()
