"""Table schemas of the warehouse, one module per feature (documented column by column in
docs/warehouse.md): every table by name, the schema version and the contract-level tables."""

from __future__ import annotations

import pyarrow as pa

from decguard_pipeline.warehouse.schema import (
    cache,
    calibration,
    calibrator,
    diff,
    golden,
    guard,
    production,
    properties,
    verdict,
)

SCHEMA_VERSION = 1

TABLES: dict[str, pa.Schema] = {
    **golden.TABLES,
    **calibration.TABLES,
    **calibrator.TABLES,
    **properties.TABLES,
    **diff.TABLES,
    **guard.TABLES,
    **production.TABLES,
    **cache.TABLES,
    **verdict.TABLES,
}


def sql_type(kind: pa.DataType) -> str:
    """The DuckDB type of a column of arrow type ``kind`` (the tables' DDL)."""
    if pa.types.is_list(kind):
        return f"{sql_type(kind.value_type)}[]"
    if pa.types.is_struct(kind):
        fields = ", ".join(f'"{f.name}" {sql_type(f.type)}' for f in kind)
        return f"STRUCT({fields})"
    if pa.types.is_map(kind):
        return f"MAP({sql_type(kind.key_type)}, {sql_type(kind.item_type)})"
    if pa.types.is_timestamp(kind):
        return "TIMESTAMPTZ" if kind.tz else "TIMESTAMP"
    simple = {
        pa.string(): "VARCHAR",
        pa.float64(): "DOUBLE",
        pa.int64(): "BIGINT",
        pa.int32(): "INTEGER",
        pa.bool_(): "BOOLEAN",
        pa.binary(): "BLOB",
    }
    if kind in simple:
        return simple[kind]
    if pa.types.is_fixed_size_binary(kind):
        return "BLOB"
    raise TypeError(f"no DuckDB type for {kind}")


# Contract-level tables use the target ``_``. ``latest_<table>`` views keep, per contract and
# target, the rows of the newest write (``recorded_at``); of the EVALUATION tables, the newest
# write of a run that reached its verdict (warehouse/completion.py).
CONTRACT_LEVEL = ("contracts", "datasets", "cases")
NO_TARGET = "_"

# A target's evaluation ends by writing its ``verdicts`` row: the run counts as evaluated from
# then on, never before (a run killed or broken midway left only part of its rows).
VERDICTS = "verdicts"
# What a target's evaluation writes before its verdict. Not: the contract-level tables, the
# registrations (``targets``, written by the sensor and ``evaluate`` before any run), the
# production check's tables (partitioned by day, no verdict), the response cache (a store of
# answers, not a record of runs) and the verdicts themselves.
EVALUATION = frozenset(
    {**golden.TABLES, **calibration.TABLES, **properties.TABLES, **diff.TABLES, **guard.TABLES}
) - {*CONTRACT_LEVEL, "targets"}
