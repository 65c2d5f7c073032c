"""The views kept in the warehouse's catalog beside its tables: per table ``latest_<table>``
(per contract and target, the rows of the newest write; of a table a target's evaluation
writes, the newest write of a run that reached its verdict: warehouse/completion.py) and
``latest_all_checks``. They are DuckLake views, so any DuckDB that attaches the catalog has
them, and they name their tables unqualified: they work whatever name the catalog is attached
as.

A write is one ``(run_id, recorded_at)`` of a table's contract and target (every row a step
writes carries the step's run id and one timestamp). The newest is the greatest
``recorded_at``, then ``run_id``: a window maximum per contract and target, one scan of the
table and no sort by time (a year of nightly metrics, 570,000 rows, in a fifth of the time a
ranking takes: docs/adr/warehouse-format.md)."""

from __future__ import annotations

from decguard_pipeline.warehouse.completion import completed_condition, gated
from decguard_pipeline.warehouse.schema import TABLES

ALL_CHECKS = "latest_all_checks"
# every gate of every feature in one place: golden gates plus each feature's ``<feature>_checks``
# table (same columns as gate_results)
CHECK_TABLES = ("gate_results", *(t for t in TABLES if t.endswith("_checks")))


# the newest write of each contract and target: its (recorded_at, run_id) is the greatest
NEWEST = (
    "QUALIFY {'at': recorded_at, 'run': run_id} = "
    "max({'at': recorded_at, 'run': run_id}) OVER (PARTITION BY contract, target)"
)


def latest(table: str) -> str:
    """``latest_<table>``: the newest write per contract and target; of a table a target's
    evaluation writes, among the writes of runs that reached their verdict
    (warehouse/completion.py)."""
    where = f" WHERE {completed_condition('_t')}" if gated(table) else ""
    return (
        f'CREATE OR REPLACE VIEW "latest_{table}" AS SELECT _t.* FROM "{table}" AS _t'
        f"{where} {NEWEST}"
    )


def names() -> list[str]:
    return [*(f"latest_{t}" for t in TABLES), ALL_CHECKS]


def statements() -> list[str]:
    """Every view's ``CREATE OR REPLACE`` statement, in ``names()`` order."""
    union = " UNION ALL BY NAME ".join(f"SELECT * FROM latest_{t}" for t in CHECK_TABLES)
    return [*(latest(t) for t in TABLES), f"CREATE OR REPLACE VIEW {ALL_CHECKS} AS {union}"]
