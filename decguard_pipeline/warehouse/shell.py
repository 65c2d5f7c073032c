"""A plain DuckDB session on the warehouse: the statements that attach it, and the extensions
it needs installed where DuckDB looks for them (``warehouse attach``)."""

from __future__ import annotations

from decguard_pipeline.warehouse import extensions
from decguard_pipeline.warehouse.lake import ALIAS, data_path
from decguard_pipeline.warehouse.store import Warehouse


def needed(warehouse: Warehouse) -> list[str]:
    catalog = "sqlite_scanner" if warehouse.place.kind == "sqlite" else "postgres_scanner"
    names = ["ducklake", catalog]
    return [*names, "httpfs"] if warehouse.remote else names


def attach_sql(warehouse: Warehouse) -> str:
    """``ATTACH`` (read-only) and ``USE``: every table and ``latest_*`` view by name. On
    object storage DuckDB's S3 settings come first (the credentials are DuckDB's own:
    ``CREATE SECRET (TYPE s3, PROVIDER credential_chain)`` with its aws extension, or
    KEY_ID/SECRET/ENDPOINT)."""
    text = str(warehouse.place.uri).replace("'", "''")
    options = ["READ_ONLY"]
    if warehouse.place.kind == "sqlite":
        options.append(f"DATA_PATH '{data_path(warehouse.root)}', OVERRIDE_DATA_PATH true")
    return f"ATTACH '{text}' AS {ALIAS} ({', '.join(options)}); USE {ALIAS};"


def install_extensions(warehouse: Warehouse) -> list[str]:
    """``INSTALL`` each extension the warehouse needs from its wheel's file into DuckDB's
    extension folder; returns their names."""
    import duckdb

    con = duckdb.connect()
    try:
        for name in needed(warehouse):
            path = str(extensions.extension_file(name)).replace("'", "''")
            con.execute(f"FORCE INSTALL '{path}'")
    finally:
        con.close()
    return needed(warehouse)
