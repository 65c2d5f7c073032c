"""The warehouse's DuckDB catalog: every table's view, its ``latest_*`` view and
``latest_all_checks`` (warehouse/views.py), the zero-row seed files that let the views bind
before the first evaluation, and the catalog file (or, on an object store, only its stamp).

``Catalog`` is the half of :class:`~decguard_pipeline.warehouse.store.Warehouse` that reads:
it relies on the files half for ``root``, ``storage``, ``remote``, ``partition_dir``,
``_publish``, ``sweep`` and ``_published_paths``."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from decguard_pipeline.warehouse import views
from decguard_pipeline.warehouse.completion import gated, verdict_keys, write_key
from decguard_pipeline.warehouse.locations import Location
from decguard_pipeline.warehouse.manifest import (
    COMPACTED_SEED,
    MANIFEST_SEED,
    MANIFESTS,
    SEED,
    counted_table_files,
    manifest_table,
)
from decguard_pipeline.warehouse.schema import SCHEMA_VERSION, TABLES

if TYPE_CHECKING:
    import duckdb

CATALOG = "decguard.duckdb"
STAMP = "catalog.json"

# Object-storage warehouses whose seed files and catalog this process has checked (each check
# costs requests; what it checks never goes back once true).
_SEEDED: set[str] = set()
# Warehouses whose catalog this process found or made for this version (a local one is made
# again when its file is gone).
_CATALOGUED: set[str] = set()
_STAMPS: dict[str, dict[str, Any]] = {}


class Catalog:
    # -- queries -------------------------------------------------------------------------

    def connect(self, sql: str | None = None) -> duckdb.DuckDBPyConnection:
        """An in-memory DuckDB connection with every table and ``latest_*`` view defined
        (with ``sql``: those it names, warehouse/views.py), over the files a reader counts
        when it opens: each table's manifest is chosen, then its folders listed, and the
        views read exactly those files. Nothing else is opened, not even a file a manifest
        hides, so a compaction deleting replaced files after its grace period never breaks a
        query of this connection started within that period (a glob lists, then opens,
        every file it matches, counted or not). Writes published later are not seen: open
        another connection for them."""
        if self.remote:
            self.ensure_catalog()  # one GET of its stamp once it is made
        import duckdb

        self._seed_empty_tables()
        only = views.needed(sql)
        tables = [t for t in TABLES if only is None or t in only]
        con = duckdb.connect()
        self.storage.register(con)
        done = verdict_keys(self.root) if any(map(gated, tables)) else set()
        for table in tables:
            writes, compacted = counted_table_files(self.root / table)
            seeds = self.partition_dir(table, "_")
            lists = [
                ("writes", [seeds / SEED, *writes]),
                ("compacted", [seeds / COMPACTED_SEED, *compacted]),
            ]
            if gated(table):  # latest_<table> ranks the writes of runs that wrote a verdict
                completed = [w for w in writes if write_key(w) in done]
                lists.append(("completed", [seeds / SEED, *completed]))
            for kind, files in lists:
                name = views.files_variable(table, kind)
                con.execute(f"SET VARIABLE {name} = ?", [[str(f) for f in files]])
        loose = self.loose_tables()
        for statement in views.pinned_statements(tables, self._hive_partitioning(), loose):
            con.execute(statement)
        return con

    def query(self, sql: str, params: list[Any] | None = None) -> pa.Table:
        with self.connect(sql) as con:
            return con.sql(sql, params=params or None).to_arrow_table()

    # -- the catalog file ----------------------------------------------------------------

    @property
    def catalog_path(self) -> Location:
        return self.root / CATALOG

    def _hive_partitioning(self) -> bool:
        """Folder names give ``contract`` and ``target`` (and let a filter on them skip other
        folders) unless the root path itself holds a ``key=value`` folder, which DuckDB
        would read as one more partition column."""
        return not any("=" in part for part in self.root.parts)

    def view_statements(
        self, loose: frozenset[str] | None = None, only: frozenset[str] | None = None
    ) -> list[str]:
        """The views of every table (or of the tables in ``only``), its ``latest_*`` view and
        ``latest_all_checks`` (warehouse/views.py).

        ``loose`` names the tables that still hold files written before a column was added
        (read with ``union_by_name``, which opens every file's footer before the query
        starts); every other table binds on its seed file's schema and opens only the files
        a query reads. Default: as recorded when the catalog was made."""
        loose = self.loose_tables() if loose is None else loose
        base_of = {
            table: (_sql_path(self.root / table), _sql_path(self.partition_dir(table, "_")))
            for table in TABLES
        }
        return views.statements(base_of, self._hive_partitioning(), loose, only)

    def _seed_files(self) -> list[tuple[Location, Callable[[], bytes]]]:
        """Every seed file: per table a zero-row file for each glob its views read and a first
        manifest, with what it holds."""
        out: list[tuple[Location, Callable[[], bytes]]] = []
        for table in TABLES:
            folder = self.partition_dir(table, "_")
            empty = functools.partial(_empty_file, table)
            out += [(folder / SEED, empty), (folder / COMPACTED_SEED, empty)]
            out.append((self.root / table / MANIFESTS / MANIFEST_SEED, _first_manifest))
        return out

    def _seed_empty_tables(self) -> None:
        """The seed files, so that views bind before the first evaluation and the first
        compaction: those missing, or torn, are (re)written in one pass.

        A seed is published like any file (written in the staging folder, then renamed: never
        seen half-written) but not fsynced: its bytes are reproducible, so one torn by a power
        cut (renamed before its bytes reached the disk) is found here, by its Parquet framing,
        and written again. On a local folder this check runs on every ``connect`` and on
        ``ensure_catalog``'s first call per process (0.1-1 ms); an object store has no torn
        objects (a PUT is whole or absent), so it only looks for missing ones, once."""
        root = str(self.root)
        if root in _SEEDED:
            return
        if self.remote and root in _CATALOGUED:
            _SEEDED.add(root)  # its stamp is written once the seeds are there
            return
        whole = self.storage.whole_parquet
        missing = {path: data() for path, data in self._seed_files() if not whole(path)}
        if missing:
            self.sweep()
            self.storage.put_reproducible(missing, staging=self.staging_dir)
        if self.remote:
            _SEEDED.add(root)

    def _stamp(self) -> dict[str, Any]:
        """What the catalog must have been made for: schema version, location, the view
        definitions and every table's columns (a new column re-checks the files). It
        depends on the root and the code only, so it is computed once per root."""
        root = str(self.root)
        if root not in _STAMPS:
            _STAMPS[root] = self._make_stamp()
        return dict(_STAMPS[root])

    def _make_stamp(self) -> dict[str, Any]:
        views = hashlib.sha256("\n".join(self.view_statements(frozenset())).encode()).hexdigest()
        columns = "\n".join(f"{t}: {s.names}" for t, s in TABLES.items())
        return {
            "schema_version": SCHEMA_VERSION,
            "root": str(self.root),
            "tables": list(TABLES),
            "views_sha256": views,
            "columns_sha256": hashlib.sha256(columns.encode()).hexdigest(),
        }

    def _read_stamp(self) -> dict[str, Any] | None:
        try:
            stamp = json.loads(self.storage.read_bytes(self.root / STAMP))
        except (OSError, ValueError):
            return None
        return stamp if isinstance(stamp, dict) else None

    def loose_tables(self) -> frozenset[str]:
        """Tables with a file lacking one of the table's columns now (written by an older
        version): as recorded with the catalog, else found by reading every file's schema."""
        stamp = self._read_stamp()
        code = self._stamp()
        if stamp is not None and all(stamp.get(k) == v for k, v in code.items()):
            return frozenset(stamp.get("loose", []))
        return self.find_loose_tables()

    def find_loose_tables(self) -> frozenset[str]:
        """Reads the schema of every published file (on a new version, or after compaction
        rewrote the old files): tables whose files do not all carry every current column."""
        loose = set()
        for table, schema in TABLES.items():
            for path in self._published_paths(table):
                try:
                    names = set(self.storage.read_schema(path).names)
                except FileNotFoundError:  # deleted by a compaction meanwhile
                    continue
                if not set(schema.names) <= names:
                    loose.add(table)
                    break
        return frozenset(loose)

    def ensure_catalog(self, *, refresh: bool = False) -> Location:
        """(Re)write the catalog when missing, or made for another schema, location or view
        definition (or, with ``refresh``, always: compaction after migrating old files).

        Built in the staging folder and renamed into place: a reader holding the old catalog
        open keeps reading it, and concurrent writers never share a DuckDB file. An object
        store gets only the stamp (``catalog.json``, which records the loose tables): its
        readers build the views in memory (``open_catalog``), so a DuckDB file there would
        cost every view's binding requests for nothing."""
        root = str(self.root)
        made = self.remote or self.storage.exists(self.catalog_path)
        if not refresh and made and root in _CATALOGUED:
            return self.catalog_path  # every write of a run asks: one stat, no stamp read
        code = self._stamp()
        stamp = self._read_stamp()
        if (
            not refresh
            and made
            and stamp is not None
            and all(stamp.get(k) == v for k, v in code.items())
        ):
            if not self.remote:  # once per process: a seed torn by a power cut
                self._seed_empty_tables()
            _CATALOGUED.add(root)
            return self.catalog_path
        self.storage.make_folder(self.root)
        self.sweep(full=True)  # rare (a new warehouse or version): also clear old leftovers
        self._seed_empty_tables()
        loose = self.find_loose_tables()
        if not self.remote:
            self._publish(self.catalog_path, lambda tmp: self._write_catalog(tmp, loose))
        record = json.dumps({**code, "loose": sorted(loose)})
        self._publish(self.root / STAMP, lambda tmp: Path(tmp).write_text(record))
        _CATALOGUED.add(root)
        return self.catalog_path

    def _write_catalog(self, path: str, loose: frozenset[str]) -> None:
        import duckdb

        con = duckdb.connect(path)
        try:
            for statement in self.view_statements(loose):
                con.execute(statement)
            con.execute(
                "CREATE OR REPLACE TABLE catalog_info AS SELECT ? AS schema_version, ? AS root",
                [SCHEMA_VERSION, str(self.root)],
            )
            con.execute("CHECKPOINT")
        finally:
            con.close()

    def open_catalog(self, sql: str | None = None) -> duckdb.DuckDBPyConnection:
        """The catalog file, read-only (what an analyst opens with DuckDB; its views list and
        read the files at each query). On an object store, which holds no catalog file:
        ``connect``."""
        self._catalog_for_reading()
        if self.remote:
            return self.connect(sql)
        import duckdb

        return duckdb.connect(str(self.catalog_path), read_only=True)

    def read_only(self, sql: str | None = None) -> duckdb.DuckDBPyConnection:
        """``connect`` for a reader that may not write the warehouse (``decguard-pipeline
        sql``): an account that may read the warehouse but not write it reads it as it is."""
        self._catalog_for_reading()
        return self.connect(sql)

    def _catalog_for_reading(self) -> None:
        try:
            self.ensure_catalog()
        except PermissionError:
            if not self.storage.exists(self.root / STAMP if self.remote else self.catalog_path):
                raise


@functools.cache
def _empty_file(table: str) -> bytes:
    """A zero-row Parquet file of ``table``'s schema (built without rows, so no pandas)."""
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_batches([], schema=TABLES[table]), sink)
    return bytes(sink.getvalue())


@functools.cache
def _first_manifest() -> bytes:
    """The manifest in effect before any compaction (activation 0, nothing compacted)."""
    sink = pa.BufferOutputStream()
    pq.write_table(manifest_table(0, {}, []), sink)
    return bytes(sink.getvalue())


def _sql_path(path: Location) -> str:
    """A path inside a SQL string literal (``s3://…`` for an object)."""
    return str(path).replace("'", "''")
