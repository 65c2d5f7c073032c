"""The warehouse: immutable Parquet files written atomically, and a DuckDB catalog of views."""

from __future__ import annotations

import functools
import json
import os
import re
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from decguard_pipeline.warehouse.schema import NO_TARGET, SCHEMA_VERSION, TABLES

CATALOG = "decguard.duckdb"
STAMP = "catalog.json"
_UNSAFE = re.compile(r"[^A-Za-z0-9._@=-]")


def default_root() -> Path:
    """``$DECGUARD_WAREHOUSE``, else ``data/warehouse`` under the current directory."""
    return Path(os.environ.get("DECGUARD_WAREHOUSE") or Path.cwd() / "data" / "warehouse")


def _segment(value: str) -> str:
    return _UNSAFE.sub("_", value) or "_"


def now() -> datetime:
    return datetime.now(UTC)


@functools.lru_cache(maxsize=64)
def read_file(path: Path) -> pa.Table:
    """A warehouse file; cached, since files are never modified (a new write is a new file)."""
    return pq.ParquetFile(path).read()


class Warehouse:
    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root or default_root()).resolve()

    # -- writing -------------------------------------------------------------------------

    def partition_dir(self, table: str, contract: str, target: str = NO_TARGET) -> Path:
        return self.root / table / f"contract={_segment(contract)}" / f"target={_segment(target)}"

    def write(
        self,
        table: str,
        data: pa.Table | list[dict[str, Any]],
        *,
        contract: str,
        target: str = NO_TARGET,
        run_id: str,
        recorded_at: datetime | None = None,
    ) -> Path:
        """Write one immutable file of ``table`` rows; returns its path.

        Files are named ``<UTC timestamp>_<run id>.parquet`` so that name order is time order.
        """
        schema = TABLES[table]
        if isinstance(data, list):
            data = pa.Table.from_pylist(data, schema=schema)
        else:
            data = data.select(schema.names).cast(schema)
        stamp = (recorded_at or now()).strftime("%Y%m%dT%H%M%S%fZ")
        directory = self.partition_dir(table, contract, target)
        directory.mkdir(parents=True, exist_ok=True)
        final = directory / f"{stamp}_{_segment(run_id)}.parquet"
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".parquet")
        os.close(fd)
        try:
            pq.write_table(data, tmp, compression="zstd")
            os.replace(tmp, final)  # readers see the whole file or nothing
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self.ensure_catalog()
        return final

    # -- reading inside the pipeline (no DuckDB file, so nothing to lock) ----------------

    def latest_file(self, table: str, contract: str, target: str = NO_TARGET) -> Path | None:
        directory = self.partition_dir(table, contract, target)
        files = sorted(directory.glob("*.parquet")) if directory.is_dir() else []
        return files[-1] if files else None

    def read_latest(self, table: str, contract: str, target: str = NO_TARGET) -> pa.Table | None:
        """The rows of the newest write of ``table`` for one contract and target."""
        path = self.latest_file(table, contract, target)
        return None if path is None else read_file(path)

    def read_run(self, table: str, contract: str, target: str, run_id: str) -> pa.Table | None:
        directory = self.partition_dir(table, contract, target)
        files = sorted(directory.glob(f"*_{_segment(run_id)}.parquet"))
        return read_file(files[-1]) if files else None

    def connect(self) -> duckdb.DuckDBPyConnection:
        """An in-memory DuckDB connection with every table and ``latest_*`` view defined."""
        self._seed_empty_tables()
        con = duckdb.connect()
        for statement in self.view_statements():
            con.execute(statement)
        return con

    def query(self, sql: str, params: list[Any] | None = None) -> pa.Table:
        with self.connect() as con:
            return con.sql(sql, params=params or None).to_arrow_table()

    # -- the catalog file ----------------------------------------------------------------

    @property
    def catalog_path(self) -> Path:
        return self.root / CATALOG

    def view_statements(self) -> list[str]:
        statements = []
        for table in TABLES:
            pattern = str(self.root / table / "*" / "*" / "*.parquet").replace("'", "''")
            statements.append(
                f"CREATE OR REPLACE VIEW {table} AS SELECT * FROM read_parquet('{pattern}', "
                "union_by_name = true, hive_partitioning = false)"
            )
            statements.append(
                f"CREATE OR REPLACE VIEW latest_{table} AS SELECT * EXCLUDE (_rank) FROM ("
                f"SELECT *, dense_rank() OVER (PARTITION BY contract, target "
                f"ORDER BY recorded_at DESC, run_id DESC) AS _rank FROM {table}) WHERE _rank = 1"
            )
        # every gate of every feature in one place: golden gates plus each feature's
        # ``<feature>_checks`` table (same columns as gate_results)
        check_tables = ["gate_results", *(t for t in TABLES if t.endswith("_checks"))]
        union = " UNION ALL BY NAME ".join(f"SELECT * FROM latest_{t}" for t in check_tables)
        statements.append(f"CREATE OR REPLACE VIEW latest_all_checks AS {union}")
        return statements

    def _seed_empty_tables(self) -> None:
        """A zero-row file per table so that views bind before the first evaluation."""
        for table, schema in TABLES.items():
            seed = self.root / table / "contract=_" / "target=_" / "00000000_schema.parquet"
            if not seed.exists():
                seed.parent.mkdir(parents=True, exist_ok=True)
                tmp = seed.with_name(f".tmp-{os.getpid()}-{seed.name}")
                pq.write_table(schema.empty_table(), tmp)
                os.replace(tmp, seed)

    def ensure_catalog(self) -> Path:
        """(Re)write the catalog when missing, or made for another schema or location.

        Built in a temporary file and renamed into place: a reader holding the old catalog
        open keeps reading it, and concurrent writers never share a DuckDB file."""
        stamp = {"schema_version": SCHEMA_VERSION, "root": str(self.root), "tables": list(TABLES)}
        stamp_path = self.root / STAMP
        if self.catalog_path.exists() and stamp_path.exists():
            try:
                if json.loads(stamp_path.read_text()) == stamp:
                    return self.catalog_path
            except ValueError:
                pass
        self.root.mkdir(parents=True, exist_ok=True)
        self._seed_empty_tables()
        tmp = self.root / f".tmp-{os.getpid()}-{CATALOG}"
        tmp.unlink(missing_ok=True)
        con = duckdb.connect(str(tmp))
        try:
            for statement in self.view_statements():
                con.execute(statement)
            con.execute(
                "CREATE OR REPLACE TABLE catalog_info AS SELECT ? AS schema_version, ? AS root",
                [SCHEMA_VERSION, str(self.root)],
            )
            con.execute("CHECKPOINT")
        finally:
            con.close()
        os.replace(tmp, self.catalog_path)
        stamp_tmp = stamp_path.with_name(f".tmp-{os.getpid()}-{STAMP}")
        stamp_tmp.write_text(json.dumps(stamp))
        os.replace(stamp_tmp, stamp_path)
        return self.catalog_path

    def open_catalog(self) -> duckdb.DuckDBPyConnection:
        """The catalog, read-only (what an analyst or ``decguard-pipeline sql`` opens)."""
        self.ensure_catalog()
        return duckdb.connect(str(self.catalog_path), read_only=True)
