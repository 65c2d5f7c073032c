"""Where results live: tables in a DuckLake (DuckDB's lakehouse format), a catalog database
plus Parquet data files, written one transaction per step (docs/warehouse.md).

No Dagster here."""

from decguard_pipeline.warehouse.store import Warehouse, default_root

__all__ = ["Warehouse", "default_root"]
