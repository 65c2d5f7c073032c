"""The warehouse: immutable Parquet files written atomically, and a DuckDB catalog of views.

The root is a local folder or an object-store prefix (``s3://bucket/prefix``); every file
operation goes through warehouse/storage.py, so both are laid out and read alike."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote, unquote

import pyarrow as pa
import pyarrow.parquet as pq

from decguard_pipeline.warehouse import views
from decguard_pipeline.warehouse.manifest import (
    COMPACTED_SEED,
    MANIFEST_SEED,
    MANIFESTS,
    SEED,
    counted_files,
    is_compacted,
    manifest_table,
)
from decguard_pipeline.warehouse.schema import NO_TARGET, SCHEMA_VERSION, TABLES
from decguard_pipeline.warehouse.spool import spool_for
from decguard_pipeline.warehouse.storage import (
    STALE_AFTER_S,
    Location,
    ObjectPath,
    location,
    staging_root,
    storage_of,
    sweep_stale,
)

if TYPE_CHECKING:
    import duckdb

# duckdb and pyarrow.compute are imported where they are used: importing Arrow's compute
# module imports pandas (a third of a second), which a command-line run that only writes
# the response cache (``write_built``) does not need.

CATALOG = "decguard.duckdb"
STAMP = "catalog.json"
# Files are written here and renamed into their table folder once complete: the folder is
# outside every table's glob, so no reader ever sees a half-written file, and on the same
# filesystem as the tables, so the rename is atomic. (An object-storage warehouse assembles
# files on the local disk instead, storage.staging_root(), and uploads each in one PUT.)
STAGING = ".staging"
__all__ = ["STALE_AFTER_S", "Warehouse", "default_root", "published_files", "read_file"]
# Published files, and only they, are named ``<UTC timestamp>_<run id>.parquet`` (the empty
# seed of a table ``00000000_schema.parquet``), or ``<UTC timestamp>_~<id>.parquet`` once
# compacted: every reader lists files with this pattern, so a stray or half-written file left
# by anything else is never read (which of them count is the compaction manifest's to say).
PUBLISHED = "[0-9]*.parquet"
_T = TypeVar("_T")
_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._@=-]")


def default_root() -> Location:
    """``$DECGUARD_WAREHOUSE`` (a folder, ``s3://bucket/prefix`` or ``gs://bucket/prefix``),
    else ``data/warehouse`` under the current directory."""
    return location(os.environ.get("DECGUARD_WAREHOUSE") or Path.cwd() / "data" / "warehouse")


def folder_value(value: str) -> str:
    """A contract or target as the value of its ``key=value`` folder: percent-encoded outside
    ``[A-Za-z0-9._~@-]``. DuckDB's hive partitioning decodes it back to exactly ``value``,
    which is what lets the views read ``contract``/``target`` from folder names and skip
    whole folders (every key the pipeline makes is left as it is)."""
    if not value:
        raise ValueError("a warehouse contract or target must not be empty")
    return quote(value, safe="@")


def _name_part(value: str) -> str:
    """A run id as part of a file name."""
    return _UNSAFE_NAME.sub("_", value) or "_"


def published_files(directory: Location) -> list[Location]:
    """The files of a partition folder a reader counts, oldest first (name order is time
    order): every write that no compaction replaced, and the compacted files that did."""
    return counted_files(directory)


def now() -> datetime:
    return datetime.now(UTC)


@functools.lru_cache(maxsize=64)
def read_file(path: Location) -> pa.Table:
    """A warehouse file; cached, since files are never modified (a new write is a new file)."""
    if isinstance(path, ObjectPath):
        return storage_of(path).read_table(path)
    return pq.ParquetFile(path).read()


# Object-storage warehouses whose seed files and catalog this process has checked (each check
# costs requests; what it checks never goes back once true).
_SEEDED: set[str] = set()
_CATALOGUED: set[str] = set()


class Warehouse:
    def __init__(self, root: str | os.PathLike[str] | Location | None = None) -> None:
        if isinstance(root, ObjectPath):
            self.root: Location = root
        else:
            self.root = location(root) if root else default_root()
        self.storage = storage_of(self.root)

    @property
    def remote(self) -> bool:
        """Whether the warehouse is on an object store."""
        return self.storage.remote

    def exists(self) -> bool:
        """Whether a warehouse is at the root (a folder; on an object store, its catalog)."""
        if self.remote:
            return self.storage.exists(self.root / STAMP)
        return self.storage.is_folder(self.root)

    def location(self, path: str | os.PathLike[str] | Location) -> str:
        """Where a file written into a ``partition_dir`` folder is published (its path on a
        local warehouse; ``s3://…`` for a spool path of an object-storage warehouse)."""
        if isinstance(self.root, ObjectPath) and not isinstance(path, ObjectPath):
            return spool_for(self.root).location(os.fspath(path))
        return str(path)

    def read_bytes(self, where: str | os.PathLike[str] | Location) -> bytes:
        """The bytes of a file the warehouse published, by the location a row names."""
        target = where if isinstance(where, ObjectPath | Path) else location(where)
        return storage_of(target).read_bytes(target)

    # -- writing -------------------------------------------------------------------------

    def partition_dir(self, table: str, contract: str, target: str = NO_TARGET) -> Location:
        """A partition folder. For a folder of files beside the tables (``report_files``),
        an object-storage warehouse gives a local folder instead: files written there are
        published with the next ``write`` (warehouse/spool.py)."""
        folder = (
            self.root
            / table
            / f"contract={folder_value(contract)}"
            / f"target={folder_value(target)}"
        )
        if isinstance(folder, ObjectPath) and table not in TABLES:
            return spool_for(self.root).path(folder)
        return folder

    @property
    def staging_dir(self) -> Path:
        if isinstance(self.root, ObjectPath):
            return staging_root()
        return self.root / STAGING

    def write(
        self,
        table: str,
        data: pa.Table | list[dict[str, Any]],
        *,
        contract: str,
        target: str = NO_TARGET,
        run_id: str,
        recorded_at: datetime | None = None,
        catalog: bool = True,
        compression: str = "zstd",
    ) -> Location:
        """Write one immutable file of ``table`` rows; returns its path.

        Files are named ``<UTC timestamp>_<run id>.parquet`` so that name order is time order.
        The rows' ``contract`` and ``target`` must be the partition's (the views read both
        from the folder names); empty key cells are filled with the write's values.
        ``catalog=False`` leaves the DuckDB catalog to the next write or query that needs it
        (a cache directory written every few seconds by a command-line run); ``compression``
        trades file size for time (``lz4`` writes a table of random digests five times faster
        than ``zstd``). On an object store, the files written beside the tables are
        published first, and the rows name them by their warehouse location
        (warehouse/spool.py)."""
        schema = TABLES[table]
        if isinstance(data, list):
            data = pa.Table.from_pylist(data, schema=schema)
        else:
            data = data.select(schema.names).cast(schema)
        at = recorded_at or now()
        data = _in_partition(data, table, contract=contract, target=target, run_id=run_id, at=at)
        if isinstance(self.root, ObjectPath):
            spool = spool_for(self.root)
            spool.publish()
            data = spool.translate(data)
        final = self._file_for(table, contract, target, run_id, at)
        self._publish(final, lambda tmp: pq.write_table(data, tmp, compression=compression))
        if catalog:
            self.ensure_catalog()
        return final

    def _file_for(
        self, table: str, contract: str, target: str, run_id: str, at: datetime
    ) -> Location:
        stamp = at.strftime("%Y%m%dT%H%M%S%fZ")
        directory = self.partition_dir(table, contract, target)
        return directory / f"{stamp}_{_name_part(run_id)}.parquet"

    def write_built(
        self,
        table: str,
        data: pa.Table,
        *,
        contract: str,
        target: str,
        run_id: str,
        recorded_at: datetime,
        compression: str = "zstd",
        **parquet: Any,
    ) -> Location:
        """``write`` for rows built column by column with exactly the table's schema and every
        key cell already the write's (the caller's promise: nothing is cast, filled or
        checked, so no Arrow compute function runs). Published the same way; the catalog is
        left to the next ``write`` or query. ``parquet``: more ``ParquetWriter`` options."""
        if data.schema != TABLES[table]:
            raise ValueError(f"{table}: rows built with another schema")
        final = self._file_for(table, contract, target, run_id, recorded_at)

        def write(tmp: str) -> None:
            with pq.ParquetWriter(tmp, data.schema, compression=compression, **parquet) as writer:
                writer.write_table(data)

        self._publish(final, write)
        return final

    @contextlib.contextmanager
    def writing(
        self,
        table: str,
        *,
        contract: str,
        target: str = NO_TARGET,
        run_id: str,
        recorded_at: datetime | None = None,
    ) -> Iterator[Callable[[pa.Table], None]]:
        """:meth:`write` for rows that come a batch at a time (a day of ten million
        records): the block gets a function appending batches to one file, published when
        the block ends without error and never otherwise."""
        schema = TABLES[table]
        at = recorded_at or now()
        final = self._file_for(table, contract, target, run_id, at)
        with self._staged(final) as tmp, pq.ParquetWriter(tmp, schema, compression="zstd") as out:

            def append(data: pa.Table) -> None:
                data = data.select(schema.names).cast(schema)
                keys = {"contract": contract, "target": target, "run_id": run_id, "at": at}
                out.write_table(_in_partition(data, table, **keys))

            yield append
        self.ensure_catalog()

    def _publish(
        self,
        final: Location,
        write: Callable[[str], None],
        *,
        before_rename: Callable[[], None] | None = None,
    ) -> None:
        """Run ``write`` on a new file in the staging folder and publish it as ``final``
        (local: flushed, then renamed; object store: uploaded whole): readers see the whole
        file or none, a killed writer leaves only a staging file (swept later). A local file
        gets the permissions of the process umask. ``before_rename`` runs last before the
        publication (and may refuse it by raising)."""
        with self._staged(final, before_rename) as tmp:
            write(tmp)

    @contextlib.contextmanager
    def _staged(
        self, final: Location, before_rename: Callable[[], None] | None = None
    ) -> Iterator[str]:
        """A new file in the staging folder, published as ``final`` when the block ends
        without error (``before_rename`` first), deleted otherwise (warehouse/storage.py)."""
        self.sweep()
        with self.storage.staged(final, staging=self.staging_dir, before=before_rename) as tmp:
            yield tmp

    def sweep(self, *, full: bool = False) -> None:
        """Delete temporary files left by writers that died: every staging file untouched for
        ``STALE_AFTER_S``; with ``full``, also the ``.tmp-*`` files older versions wrote
        inside table folders and the warehouse root (walks every table folder)."""
        candidates: list[Path] = []
        if self.staging_dir.is_dir():
            candidates += self.staging_dir.iterdir()
        if full and isinstance(self.root, Path) and self.root.is_dir():
            candidates += self.root.glob(".tmp-*")
            for table in TABLES:
                candidates += (self.root / table).glob("*/*/.tmp-*")
        sweep_stale(candidates)

    # -- reading inside the pipeline (no DuckDB file, so nothing to lock) ----------------

    def latest_file(self, table: str, contract: str, target: str = NO_TARGET) -> Location | None:
        files = published_files(self.partition_dir(table, contract, target))
        return files[-1] if files else None

    def read_latest(self, table: str, contract: str, target: str = NO_TARGET) -> pa.Table | None:
        """The rows of the newest write of ``table`` for one contract and target."""
        path = self.latest_file(table, contract, target)
        if path is None:
            return None
        if not is_compacted(path.name):
            return read_file(path)
        return _newest_write(read_file(path))  # compaction keeps the newest write apart

    def read_run(self, table: str, contract: str, target: str, run_id: str) -> pa.Table | None:
        """The rows run ``run_id`` wrote (its newest file when it wrote several), also once
        compaction has merged its file into a larger one."""
        files = published_files(self.partition_dir(table, contract, target))
        write = _run_write(files, run_id)
        if write is not None:
            return read_file(write)
        for path in reversed([p for p in files if is_compacted(p.name)]):
            rows = self.storage.read_table(
                path, filters=[("run_id", "=", run_id)], schema=TABLES[table]
            )
            if len(rows):
                return _newest_write(rows)
        return None

    def run_file(self, table: str, contract: str, target: str, run_id: str) -> Location | None:
        """The newest file run ``run_id`` wrote of ``table`` for one contract and target
        (None once compaction has merged it into a larger file)."""
        return _run_write(published_files(self.partition_dir(table, contract, target)), run_id)

    def partitions(self, table: str, contract: str) -> dict[str, list[Location]]:
        """A contract's published files of ``table`` by target, oldest first."""
        root = self.partition_dir(table, contract).parent
        out = {}
        for directory in self.storage.folders(root, "target=*"):
            files = published_files(directory)
            if files:
                out[unquote(directory.name.removeprefix("target="))] = files
        return out

    def connect(self, sql: str | None = None) -> duckdb.DuckDBPyConnection:
        """An in-memory DuckDB connection with every table and ``latest_*`` view defined
        (with ``sql``: those it names, warehouse/views.py)."""
        if self.remote:
            self.ensure_catalog()  # one GET of its stamp once it is made
        import duckdb

        self._seed_empty_tables()
        con = duckdb.connect()
        self.storage.register(con)
        for statement in self.view_statements(only=views.needed(sql)):
            con.execute(statement)
        return con

    def query(self, sql: str, params: list[Any] | None = None) -> pa.Table:
        return retrying(lambda: self._query(sql, params))

    def _query(self, sql: str, params: list[Any] | None) -> pa.Table:
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

    def _seed_empty_tables(self) -> None:
        """Per table, a zero-row file for each glob its views read and a first manifest, so
        that views bind before the first evaluation and the first compaction."""
        if str(self.root) in _SEEDED:
            return
        if self.remote and str(self.root) in _CATALOGUED:
            _SEEDED.add(str(self.root))  # its stamp is written once the seeds are there
            return
        exists = self.storage.exists
        for table, schema in TABLES.items():
            folder = self.partition_dir(table, "_")
            for name in (SEED, COMPACTED_SEED):
                seed = folder / name
                if not exists(seed):
                    self._publish(seed, lambda tmp, s=schema: pq.write_table(s.empty_table(), tmp))
            first = self.root / table / MANIFESTS / MANIFEST_SEED
            if not exists(first):
                empty = manifest_table(0, {}, [])
                self._publish(first, lambda tmp, t=empty: pq.write_table(t, tmp))
        if self.remote:
            _SEEDED.add(str(self.root))

    def _stamp(self) -> dict[str, Any]:
        """What the catalog must have been made for: schema version, location, the view
        definitions and every table's columns (a new column re-checks the files)."""
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
        if not refresh and str(self.root) in _CATALOGUED:
            return self.catalog_path
        code = self._stamp()
        stamp = self._read_stamp()
        if (
            not refresh
            and (self.remote or self.storage.exists(self.catalog_path))
            and stamp is not None
            and all(stamp.get(k) == v for k, v in code.items())
        ):
            if self.remote:
                _CATALOGUED.add(str(self.root))
            return self.catalog_path
        self.storage.make_folder(self.root)
        self.sweep(full=True)  # rare (a new warehouse or version): also clear old leftovers
        self._seed_empty_tables()
        loose = self.find_loose_tables()
        if not self.remote:
            self._publish(self.catalog_path, lambda tmp: self._write_catalog(tmp, loose))
        record = json.dumps({**code, "loose": sorted(loose)})
        self._publish(self.root / STAMP, lambda tmp: Path(tmp).write_text(record))
        if self.remote:
            _CATALOGUED.add(str(self.root))
        return self.catalog_path

    def _published_paths(self, table: str) -> list[Location]:
        """Every published file of a table (its seed files included), counted or not."""
        return [
            path
            for contract in self.storage.folders(self.root / table, "contract=*")
            for target in self.storage.folders(contract, "target=*")
            for path in self.storage.files(target, PUBLISHED)
        ]

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
        """The catalog, read-only (what an analyst or ``decguard-pipeline sql`` opens). An
        account that may read the warehouse but not write it opens the catalog as it is.
        On an object store: an in-memory connection with the catalog's views (those ``sql``
        names), reading the files through the store's client (DuckDB opens no database file
        there)."""
        try:
            self.ensure_catalog()
        except PermissionError:
            if not self.storage.exists(self.root / STAMP if self.remote else self.catalog_path):
                raise
        if self.remote:
            return self.connect(sql)
        import duckdb

        return duckdb.connect(str(self.catalog_path), read_only=True)


def _in_partition(
    data: pa.Table, table: str, *, contract: str, target: str, run_id: str, at: datetime
) -> pa.Table:
    """``data`` with empty key cells set to the write's values; refuses rows of another
    contract or target (the views read those two from the folder names)."""
    import pyarrow.compute as pc

    keys = {"contract": contract, "target": target, "run_id": run_id, "recorded_at": at}
    for name, value in keys.items():
        index = data.schema.get_field_index(name)
        column = data.column(index)
        if column.null_count:
            filler = pa.scalar(value, type=column.type)
            data = data.set_column(index, name, pc.fill_null(column, filler))
            column = data.column(index)
        if name in ("contract", "target"):
            other = pc.filter(column, pc.not_equal(column, value))
            if len(other):
                raise ValueError(
                    f"{table}: a row of {name} {other[0].as_py()!r} written to the "
                    f"{name} {value!r} partition"
                )
    return data


def retrying(query: Callable[[], _T], attempts: int = 3) -> _T:
    """Run ``query``, again when it listed a file that compaction deleted before the query
    opened it (a replaced file, no longer counted by the manifest in effect: the next
    attempt does not list it). Any other error, or a third miss, is raised."""
    import duckdb

    for attempt in range(attempts):
        try:
            return query()
        except duckdb.IOException as exc:
            if "No such file" not in str(exc) or attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def _run_write(files: list[Location], run_id: str) -> Location | None:
    """The newest of ``files`` that run ``run_id`` wrote on its own (not a compacted file)."""
    name = f"{_name_part(run_id)}.parquet"
    writes = [p for p in files if p.name.split("_", 1)[-1] == name]
    return writes[-1] if writes else None


def _newest_write(rows: pa.Table) -> pa.Table:
    """The rows of the newest write (by ``recorded_at``, then ``run_id``) among ``rows``."""
    import pyarrow.compute as pc

    at = rows.column("recorded_at")
    rows = rows.filter(pc.equal(at, pc.max(at)))
    run = rows.column("run_id")
    return rows.filter(pc.equal(run, pc.max(run)))


def _sql_path(path: Location) -> str:
    """A path inside a SQL string literal (``s3://…`` for an object)."""
    return str(path).replace("'", "''")
