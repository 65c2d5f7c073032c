"""What every step shares: where it writes (:class:`Step`), what the parts of one target's
run hand each other in memory (:class:`TargetRun`), a target's evaluation (in memory, else
read back from the warehouse), and the rows a run wrote. No Dagster here."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from decguard_pipeline.core.errors import DecGuardError
from decguard_pipeline.core.results import CaseResults
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline.warehouse.rows.base import row_keys
from decguard_pipeline.warehouse.rows.golden import case_results_from_table
from decguard_pipeline.warehouse.schema import NO_TARGET
from decguard_pipeline.warehouse.store import now

if TYPE_CHECKING:
    from decguard_pipeline.backends.base import Backend
    from decguard_pipeline.runs.cache import CacheOptions


@dataclass
class Evaluated:
    results: CaseResults
    run: dict[str, Any]


@dataclass
class TargetRun:
    """What the parts of one target's run (the evaluation step) hand each other in memory, so
    that each thing is made once a run: the evaluation (set by ``case_results``, else read
    back from the warehouse by the first part that needs it), the target's DecGuard report
    (``steps/golden.golden_report``), and the backend with its health answer and response
    cache (``steps/backend.target_backend``: built and health-checked at its first use,
    closed by :meth:`close` when the run's parts are done)."""

    evaluated: Evaluated | None = None
    golden: Any = None  # steps.golden.GoldenReport (steps/golden.py imports this module)
    backend: Backend | None = None
    health: dict[str, str] | None = None
    cache: CacheOptions | None = None

    def close(self) -> None:
        backend, self.backend = self.backend, None
        if backend is not None:
            backend.close()


@dataclass
class Step:
    """Where a step writes: the warehouse, the run id, one timestamp for all its rows, and the
    target run it is a part of (None: a step called on its own, which reads what it needs
    back from the warehouse and closes what it opens)."""

    warehouse: Warehouse
    run_id: str
    at: datetime = field(default_factory=now)
    shared: TargetRun | None = None

    def keys(self, contract: str, target: str = NO_TARGET) -> dict[str, Any]:
        """The key columns of this step's rows of one partition, which are also the partition
        arguments of ``Warehouse.write``."""
        return row_keys(contract, target, self.run_id, self.at)


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


def evaluated_of(entry: ContractEntry, target: str, step: Step) -> Evaluated:
    """The evaluation a step works on: the one its target run holds in memory, else
    :func:`load_evaluated` for the step's run (kept for the run's later parts)."""
    shared = step.shared
    if shared is not None and shared.evaluated is not None:
        return shared.evaluated
    evaluated = load_evaluated(entry, target, step.warehouse, step.run_id)
    if shared is not None:
        shared.evaluated = evaluated
    return evaluated


def run_rows(
    warehouse: Warehouse, table: str, contract: str, target: str, run_id: str | None = None
) -> list[dict[str, Any]] | None:
    """Rows of ``table`` written by run ``run_id``, else the newest write (of a table an
    evaluation writes, the newest of a run that reached its verdict); None if none."""
    rows = None if run_id is None else warehouse.read_run(table, contract, target, run_id)
    if rows is None:
        rows = warehouse.read_latest(table, contract, target)
    return None if rows is None else rows.to_pylist()
