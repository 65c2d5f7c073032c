"""Warehouse tables of the diff feature (documented in docs/warehouse.md)."""

import pyarrow as pa

TABLES: dict[str, pa.Schema] = {}
