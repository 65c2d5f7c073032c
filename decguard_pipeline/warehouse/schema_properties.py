"""Warehouse tables of the properties feature (documented in docs/warehouse.md)."""

import pyarrow as pa

TABLES: dict[str, pa.Schema] = {}
