"""Resources: where the warehouse is (``$DECGUARD_WAREHOUSE`` or data/warehouse) and its
catalog (``$DECGUARD_CATALOG``, else the SQLite file in the warehouse folder)."""

from __future__ import annotations

import dagster as dg

from decguard_pipeline.warehouse import Warehouse


class WarehouseResource(dg.ConfigurableResource):  # type: ignore[misc]
    """The DuckLake warehouse; ``root`` empty means the default location, ``catalog`` empty
    the default catalog (a PostgreSQL URL names no password)."""

    root: str = ""
    catalog: str = ""

    def get(self) -> Warehouse:
        return Warehouse(self.root or None, self.catalog or None)
