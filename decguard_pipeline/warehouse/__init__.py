"""Where results live: immutable Parquet files plus a DuckDB catalog of views over them.

No Dagster here. Every write is a new file (written in ``<root>/.staging``, then renamed) under
``<root>/<table>/contract=<name>/target=<key>/<run_id>.parquet``; nothing is overwritten, so
every evaluation ever made stays queryable and concurrent writers never contend. The
catalog ``<root>/decguard.duckdb`` holds only views and is rewritten only when the schema
version, the view definitions or the warehouse location change, so analysts can keep it open
read-only.
"""

from decguard_pipeline.warehouse.store import Warehouse, default_root

__all__ = ["Warehouse", "default_root"]
