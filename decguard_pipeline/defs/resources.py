"""Resources: where the warehouse is (``$DECGUARD_WAREHOUSE`` or data/warehouse)."""

from __future__ import annotations

import dagster as dg

from decguard_pipeline.warehouse import Warehouse


class WarehouseResource(dg.ConfigurableResource):  # type: ignore[misc]
    """The Parquet + DuckDB warehouse; ``root`` empty means the default location."""

    root: str = ""

    def get(self) -> Warehouse:
        return Warehouse(self.root or None)
