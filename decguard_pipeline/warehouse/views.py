"""The views kept in the warehouse's catalog beside its tables: per table ``latest_<table>``
(per contract and target, the rows of the newest write; of a table a target's evaluation
writes, the newest write of a run that reached its verdict: warehouse/completion.py) and
``latest_all_checks``. They are DuckLake views, so any DuckDB that attaches the catalog has
them, and they name their tables unqualified: they work whatever name the catalog is attached
as.

A write is one ``(run_id, recorded_at)`` of a table's contract and target (every row a step
writes carries the step's run id and one timestamp). The newest is the greatest
``recorded_at``, then ``run_id``: the maximum per contract and target, a grouped aggregate
joined back (no sort by time). Not a window function: DuckDB 1.5.5's parallel window over a
filtered, small input fails now and then with an internal error that invalidates the
database (duckdb/duckdb#25713), and a reader's own ``WHERE`` on a view is such a filter."""

from __future__ import annotations

from decguard_pipeline.warehouse.completion import completed_condition, gated
from decguard_pipeline.warehouse.schema import TABLES

ALL_CHECKS = "latest_all_checks"
# every gate of every feature in one place: golden gates plus each feature's ``<feature>_checks``
# table (same columns as gate_results)
CHECK_TABLES = ("gate_results", *(t for t in TABLES if t.endswith("_checks")))


def newest(source: str, completed: bool) -> str:
    """SQL true for the rows of ``_t`` (a row of ``source``) in the newest write of their
    contract and target; with ``completed``, the newest among the writes of runs that
    reached their verdict (the caller keeps ``_t`` to those too)."""
    among = f" AND {completed_condition('_n')}" if completed else ""
    return (
        "{'at': _t.recorded_at, 'run': _t.run_id} = (SELECT max({'at': _n.recorded_at, "
        f"'run': _n.run_id}}) FROM {source} AS _n WHERE _n.contract = _t.contract "
        f"AND _n.target = _t.target{among})"
    )


def latest(table: str) -> str:
    """``latest_<table>``: the newest write per contract and target; of a table a target's
    evaluation writes, among the writes of runs that reached their verdict
    (warehouse/completion.py)."""
    shown = newest(f'"{table}"', gated(table))
    where = f"{completed_condition('_t')} AND {shown}" if gated(table) else shown
    return (
        f'CREATE OR REPLACE VIEW "latest_{table}" AS SELECT _t.* FROM "{table}" AS _t WHERE {where}'
    )


def names() -> list[str]:
    return [*(f"latest_{t}" for t in TABLES), ALL_CHECKS]


def statements() -> list[str]:
    """Every view's ``CREATE OR REPLACE`` statement, in ``names()`` order."""
    union = " UNION ALL BY NAME ".join(f"SELECT * FROM latest_{t}" for t in CHECK_TABLES)
    return [*(latest(t) for t in TABLES), f"CREATE OR REPLACE VIEW {ALL_CHECKS} AS {union}"]
