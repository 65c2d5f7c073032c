"""Warehouse tables of the guard feature (documented in docs/warehouse.md)."""

import pyarrow as pa

TABLES: dict[str, pa.Schema] = {}
