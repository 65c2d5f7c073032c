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

# Contract-level tables use the target ``_``. ``latest_<table>`` views keep, per contract and
# target, the rows of the newest write (``recorded_at``).
CONTRACT_LEVEL = ("contracts", "datasets", "cases")
NO_TARGET = "_"
