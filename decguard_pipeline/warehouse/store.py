"""The warehouse: immutable Parquet files written atomically, and a DuckDB catalog of views.

The root is a local folder or an object-store prefix (``s3://bucket/prefix``); every file
operation goes through warehouse/storage.py, so both are laid out and read alike."""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote, unquote

import pyarrow as pa
import pyarrow.parquet as pq

from decguard_pipeline.warehouse.catalog import STAMP, Catalog
from decguard_pipeline.warehouse.completion import Completed, gated
from decguard_pipeline.warehouse.locations import Location, ObjectPath, location
from decguard_pipeline.warehouse.manifest import (
    counted_files,
    is_compacted,
    run_part,
    writer_of,
)
from decguard_pipeline.warehouse.schema import NO_TARGET, TABLES, VERDICTS
from decguard_pipeline.warehouse.spool import spool_for
from decguard_pipeline.warehouse.storage import STALE_AFTER_S, staging_root, storage_of, sweep_stale

if TYPE_CHECKING:
    pass

# duckdb and pyarrow.compute are imported where they are used: importing Arrow's compute
# module imports pandas (a third of a second), which a command-line run that only writes
# the response cache (``write_built``) does not need.

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


class Warehouse(Catalog):
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
        return directory / f"{stamp}_{run_part(run_id)}.parquet"

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
        **parquet: Any,
    ) -> Iterator[Callable[[pa.Table], None]]:
        """:meth:`write` for rows that come a batch at a time (a day of ten million
        records): the block gets a function appending batches to one file, published when
        the block ends without error and never otherwise. ``parquet``: more
        ``ParquetWriter`` options."""
        schema = TABLES[table]
        at = recorded_at or now()
        final = self._file_for(table, contract, target, run_id, at)
        with (
            self._staged(final) as tmp,
            pq.ParquetWriter(tmp, schema, compression="zstd", **parquet) as out,
        ):

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
        """The rows of the newest write of ``table`` for one contract and target; of a table
        a target's evaluation writes, the newest write of a run that reached its verdict
        (warehouse/completion.py): the rows ``latest_<table>`` shows."""
        if gated(table):
            return self._read_latest_completed(table, contract, target)
        path = self.latest_file(table, contract, target)
        if path is None:
            return None
        if not is_compacted(path.name):
            return read_file(path)
        return _newest_write(read_file(path))  # compaction keeps the newest write apart

    def completed(self, contract: str, target: str) -> Completed:
        """The runs that wrote a verdict of one contract and target, as of now."""
        return Completed(self.partition_dir(VERDICTS, contract, target))

    def _read_latest_completed(self, table: str, contract: str, target: str) -> pa.Table | None:
        done = self.completed(contract, target)
        for path in reversed(published_files(self.partition_dir(table, contract, target))):
            if not is_compacted(path.name):
                if done.write_done(path):
                    return read_file(path)
                continue
            # compaction keeps a partition's newest completed write apart; a file compacted
            # before it did may still hold it
            rows = read_file(path)
            runs = rows.column("run_id").to_pylist()
            rows = rows.filter(pa.array([r is not None and done.has(r) for r in runs]))
            if rows.num_rows:
                return _newest_write(rows)
        return None

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

    def stamp(self, tables: tuple[str, ...]) -> tuple[str, ...]:
        """The names of every published file of ``tables``: it changes whenever one of them
        gets a write (or a compaction), so a reader can tell it has nothing new to read."""
        return tuple(sorted(str(p) for table in tables for p in self._published_paths(table)))

    def _published_paths(self, table: str) -> list[Location]:
        """Every published file of a table (its seed files included), counted or not."""
        return [
            path
            for contract in self.storage.folders(self.root / table, "contract=*")
            for target in self.storage.folders(contract, "target=*")
            for path in self.storage.files(target, PUBLISHED)
        ]


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


def _run_write(files: list[Location], run_id: str) -> Location | None:
    """The newest of ``files`` that run ``run_id`` wrote on its own (not a compacted file)."""
    part = run_part(run_id)
    writes = [p for p in files if not is_compacted(p.name) and writer_of(p.name) == part]
    return writes[-1] if writes else None


def _newest_write(rows: pa.Table) -> pa.Table:
    """The rows of the newest write (by ``recorded_at``, then ``run_id``) among ``rows``."""
    import pyarrow.compute as pc

    at = rows.column("recorded_at")
    rows = rows.filter(pc.equal(at, pc.max(at)))
    run = rows.column("run_id")
    return rows.filter(pc.equal(run, pc.max(run)))
