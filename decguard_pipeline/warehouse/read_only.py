"""``decguard-pipeline sql`` reads the warehouse and nothing else.

DuckDB can read and write any file the process can (``read_text('/etc/shadow')``,
``COPY … TO '/any/path'``, ``ATTACH``, ``INSTALL``). Two locks, both needed:

* only queries run: each statement must be a ``SELECT`` (``SHOW``, ``DESCRIBE``,
  ``SUMMARIZE``, ``VALUES``, ``FROM …`` are ones) or an ``EXPLAIN`` of one. ``COPY``,
  ``EXPORT``, ``ATTACH``, ``SET``, ``CREATE``, ``INSTALL``/``LOAD``, ``EXPLAIN ANALYZE COPY``
  (which runs the copy) are refused before anything runs: the folders DuckDB may read are
  folders it may write too, the warehouse among them;
* the connection reaches only the warehouse: ``enable_external_access`` off, with the
  warehouse root (a folder, or ``s3://…`` read by DuckDB's httpfs) as
  the one ``allowed_directories`` entry besides a private spill folder; DuckDB resolves
  symbolic links before it checks a path; then ``lock_configuration``, so no statement can
  lift these settings (a ``SET`` would be refused anyway).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from decguard_pipeline.core.errors import DecGuardError
from decguard_pipeline.warehouse.locations import Location

if TYPE_CHECKING:
    import duckdb

_EXPLAIN = re.compile(r"\s*EXPLAIN\s+(?:\([^)]*\)\s*)?(?:ANALY[SZ]E\s+)?", re.IGNORECASE)


def check_query(sql: str) -> None:
    """DecGuardError unless every statement of ``sql`` only reads (see the module)."""
    import duckdb

    for statement in duckdb.extract_statements(sql):
        kind = statement.type
        if kind == duckdb.StatementType.EXPLAIN:
            explained = _EXPLAIN.match(statement.query)
            rest = statement.query[explained.end() :] if explained else ""
            inner = duckdb.extract_statements(rest) if rest.strip() else []
            if len(inner) == 1 and inner[0].type == duckdb.StatementType.SELECT:
                continue
        elif kind == duckdb.StatementType.SELECT:
            continue
        raise DecGuardError(
            f"sql runs read-only queries (SELECT, SHOW, DESCRIBE, EXPLAIN): {kind.name} is not one"
        )


def confine(con: duckdb.DuckDBPyConnection, root: Location, spill: Path) -> None:
    """Let ``con`` reach only the files under ``root`` (and spill into ``spill``, a folder
    of its own), for good."""
    con.execute("SET temp_directory = ?", [str(spill)])
    con.execute("SET allowed_directories = ?", [[str(root).rstrip("/") + "/"]])
    con.execute("SET enable_external_access = false")
    con.execute("SET lock_configuration = true")
