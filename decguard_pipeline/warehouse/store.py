"""The warehouse: tables in a DuckLake (warehouse/lake.py), written a transaction at a time.

What a step writes across tables commits together: a ``transaction()`` block collects every
``write`` made in it (by any ``Warehouse`` of the same location, in the same thread) and
commits them as one DuckLake snapshot when the block ends, or nothing when it raises or the
process dies (warehouse/transaction.py). A ``write`` outside a block is a transaction of its
own. Readers (the pipeline's ``read_latest``/``read_run`` and every query) see whole commits
only; inside a block they see the block's own writes too.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import shutil
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import pyarrow as pa

from decguard_pipeline.warehouse import committed_runs, objects
from decguard_pipeline.warehouse.completion import completed_condition, gated
from decguard_pipeline.warehouse.lake import ALIAS, Lake, catalog_place, lake_of
from decguard_pipeline.warehouse.locations import Location, ObjectPath, StorageError, location
from decguard_pipeline.warehouse.schema import NO_TARGET, TABLES, VERDICTS
from decguard_pipeline.warehouse.transaction import ORDER, Transaction

if TYPE_CHECKING:
    import duckdb

__all__ = ["FILES", "Transaction", "Warehouse", "default_root", "now"]
FILES = "report_files"  # the folder of the files written beside the tables (reports, pictures)
JOURNALS = "journals"  # local journals of writers between commits (the response cache's)


def default_root() -> Location:
    """``$DECGUARD_WAREHOUSE`` (a folder or ``s3://bucket/prefix``), else ``data/warehouse``
    under the current directory."""
    return location(os.environ.get("DECGUARD_WAREHOUSE") or Path.cwd() / "data" / "warehouse")


def folder_value(value: str) -> str:
    """A contract or target as the value of its ``key=value`` folder under ``report_files``:
    percent-encoded outside ``[A-Za-z0-9._~@-]`` (every key the pipeline makes is left as it
    is)."""
    if not value:
        raise ValueError("a warehouse contract or target must not be empty")
    return quote(value, safe="@")


def now() -> datetime:
    return datetime.now(UTC)


_ACTIVE = threading.local()


def _active() -> dict[str, Transaction]:
    if not hasattr(_ACTIVE, "by_place"):
        _ACTIVE.by_place = {}
    return _ACTIVE.by_place  # type: ignore[no-any-return]


def _sessions() -> dict[str, duckdb.DuckDBPyConnection]:
    """This thread's ``snapshot()`` connections, by warehouse."""
    if not hasattr(_ACTIVE, "sessions"):
        _ACTIVE.sessions = {}
    return _ACTIVE.sessions  # type: ignore[no-any-return]


class Warehouse:
    def __init__(
        self,
        root: str | os.PathLike[str] | Location | None = None,
        catalog: str | None = None,
    ) -> None:
        if isinstance(root, ObjectPath):
            self.root: Location = root
        else:
            self.root = location(root) if root else default_root()
        self.place = catalog_place(self.root, catalog)

    @property
    def remote(self) -> bool:
        """Whether the warehouse's files are on an object store."""
        return isinstance(self.root, ObjectPath)

    @property
    def lake(self) -> Lake:
        return lake_of(self.root, self.place)

    def exists(self) -> bool:
        """Whether a warehouse is there (its catalog file; a PostgreSQL catalog with tables)."""
        if self.place.kind == "sqlite":
            return Path(self.place.where).is_file()
        try:
            lake = lake_of(self.root, self.place, read_only=True)
        except Exception:
            return False
        con = lake.cursor()
        try:
            found = con.execute("SELECT count(*) FROM duckdb_tables() WHERE database_name = 'lake'")
            return bool(found.fetchone()[0])  # type: ignore[index]
        finally:
            con.close()

    # -- writing -------------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Transaction]:
        """Every write in the block (in this thread, to this warehouse) commits together
        when it ends, none when it raises. A block inside another joins it."""
        active = _active()
        if self._key in active:
            yield active[self._key]
            return
        tx = Transaction(self.lake, self.root)
        active[self._key] = tx
        try:
            yield tx
            tx.commit()
            committed_runs.remember(self._key, tx.staged)
        finally:
            del active[self._key]
            tx.close()

    @property
    def _key(self) -> str:
        return f"{self.root}\0{self.place}"

    @contextlib.contextmanager
    def direct(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A DuckLake transaction of its own for maintenance (retention, migration, pruning):
        statements run at once; committed when the block ends, rolled back when it raises.
        It holds the commit turn throughout (a SQLite catalog's writers wait)."""
        committed_runs.forget(self._key)  # what it deletes may be a run kept in memory
        try:
            with self.lake.committed() as con:
                yield con
        finally:
            committed_runs.forget(self._key)

    def write(
        self,
        table: str,
        data: pa.Table | list[dict[str, Any]],
        *,
        contract: str,
        target: str = NO_TARGET,
        run_id: str,
        recorded_at: datetime | None = None,
    ) -> None:
        """Append rows of ``table`` (in the transaction of the block around, else in one of
        their own). Empty key cells (``contract``, ``target``, ``run_id``,
        ``recorded_at``) get the write's values; a row of another contract or target is
        refused."""
        data = _conformed(table, data)
        at = recorded_at or now()
        data = _in_partition(data, table, contract=contract, target=target, run_id=run_id, at=at)
        with self.transaction() as tx:
            tx.insert(table, data)

    def write_built(
        self,
        table: str,
        data: pa.Table,
        *,
        contract: str,
        target: str,
        run_id: str,
        recorded_at: datetime,
    ) -> None:
        """``write`` for rows built column by column with exactly the table's schema and every
        key cell already the write's (the caller's promise: nothing is cast, filled or
        checked, so no Arrow compute function runs, and pandas is not imported)."""
        if data.schema != TABLES[table]:
            raise ValueError(f"{table}: rows built with another schema")
        with self.transaction() as tx:
            tx.insert(table, data)

    def journal_dir(self, table: str, contract: str, target: str) -> Path | None:
        """A local folder for the journals of ``table``'s writers of one contract and target
        (warehouse/responses.py); None on object storage, which has no local folder."""
        if isinstance(self.root, ObjectPath):
            return None
        return self.root / JOURNALS / table / _files_part(contract, target)

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
        records): the block gets a function appending batches (from any thread), committed
        when the block ends without error (with the transaction around, if any)."""
        at = recorded_at or now()
        keys = {"contract": contract, "target": target, "run_id": run_id, "at": at}
        with self.transaction() as tx, tx.spilling(table, TABLES[table]) as spill:

            def append(data: pa.Table) -> None:
                spill(_in_partition(_conformed(table, data), table, **keys))

            yield append

    def files_dir(self, contract: str, target: str = NO_TARGET, folder: str = FILES) -> Path:
        """Where a step writes its files beside the tables (reports, sidecars, pictures):
        ``<root>/<folder>/contract=…/target=…/``. On object storage, a local folder of
        the step's transaction, uploaded there before its rows commit; rows naming a file
        in it name its ``s3://`` location."""
        part = f"{folder}/{_files_part(contract, target)}"
        if not isinstance(self.root, ObjectPath):
            local = self.root / part
            local.mkdir(parents=True, exist_ok=True)
            return local
        tx = _active().get(self._key)
        if tx is None:
            raise RuntimeError("files beside the tables of an object store need a transaction")
        return tx.files_dir(part)

    def location(self, path: str | os.PathLike[str] | Location) -> str:
        """Where a file written into a ``files_dir`` folder is published: its path on a local
        warehouse, its ``s3://`` location for a folder of an object store's transaction."""
        if isinstance(self.root, ObjectPath) and not isinstance(path, ObjectPath):
            tx = _active().get(self._key)
            if tx is not None:
                return tx.location(os.fspath(path))
        return str(path)

    def read_bytes(self, where: str | os.PathLike[str] | Location) -> bytes:
        """The bytes of a file written beside the tables, by the location a row names."""
        target = where if isinstance(where, ObjectPath | Path) else location(where)
        if isinstance(target, ObjectPath):
            tx = _active().get(self._key)
            staged = tx.staged_file(str(target)) if tx is not None else None
            return staged.read_bytes() if staged else objects.read_bytes(target)
        return target.read_bytes()

    # -- reading -------------------------------------------------------------------------

    @contextlib.contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection to the warehouse (its tables and views by name); inside a
        ``transaction()`` block, the block's own; inside a ``snapshot()`` block, its."""
        tx = _active().get(self._key)
        if tx is not None:
            with tx.reader() as con:
                yield con
            return
        with self._committed_reader() as con:
            yield con

    def bulk(self) -> contextlib.AbstractContextManager[None]:
        """Every core for the block's statements (reading or writing a day's records)."""
        return self.lake.bulk()

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """The reads of the block (in this thread) see one snapshot of the warehouse, read in
        one DuckLake transaction: a consistent view, and cheaper than a transaction per read,
        which loads the catalog's metadata again each time (10-30 ms on a SQLite catalog).
        For a few reads together. Inside a ``transaction()`` block its staged writes are seen;
        outside one, a write in the block commits after the block's snapshot, and only
        ``read_run`` of its run sees it (from memory)."""
        sessions = _sessions()
        if self._key in sessions:
            yield
            return
        tx = _active().get(self._key)
        with tx.pinned() if tx is not None else self._pinned_reader() as con:
            sessions[self._key] = con
            try:
                yield
            finally:
                del sessions[self._key]

    @contextlib.contextmanager
    def _pinned_reader(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self.lake.reader() as con:
            con.execute("BEGIN")
            yield con  # when the block raises, the reader closes the connection
            con.execute("COMMIT")  # it only read

    def _committed_reader(self) -> contextlib.AbstractContextManager[duckdb.DuckDBPyConnection]:
        """A connection reading committed rows: the ``snapshot()`` block's, else one of
        its own."""
        con = _sessions().get(self._key)
        return contextlib.nullcontext(con) if con is not None else self.lake.reader()

    @contextlib.contextmanager
    def read_only(self, sql: str | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection that can only read (the catalog attached ``READ_ONLY``) on a DuckDB
        of its own, closed after the block: what ``decguard-pipeline sql`` runs a user's query
        on, locking its settings down (warehouse/read_only.py) without touching this
        process's other connections. ``sql`` is the query it is for (unused: every view is
        in the catalog)."""
        if not self.exists():
            raise StorageError(f"no warehouse at {self.root}")
        lake = Lake(self.root, self.place, read_only=True)
        try:
            with lake.reader() as con:
                yield con
        finally:
            lake.db.close()

    def query(self, sql: str, params: list[Any] | dict[str, Any] | None = None) -> pa.Table:
        with self.connect() as con:
            return con.execute(sql, params or None).to_arrow_table()

    def read_latest(self, table: str, contract: str, target: str = NO_TARGET) -> pa.Table | None:
        """The rows of the newest write of ``table`` for one contract and target (in the
        order written); of a table a target's evaluation writes, the newest write of a run
        that reached its verdict (warehouse/completion.py): the rows ``latest_<table>``
        shows. None when there is none."""
        where, params = "contract = $c AND target = $t", {"c": contract, "t": target}
        rows = self._newest_writes(table, where, params)
        return rows if rows.num_rows else None

    def completed_runs(self, contract: str, target: str) -> set[str]:
        """The runs that wrote a verdict of one contract and target."""
        found = self.query(
            f"SELECT DISTINCT run_id FROM {self._source(VERDICTS)} "
            "WHERE contract = $c AND target = $t",
            {"c": contract, "t": target},
        )
        return {str(r) for r in found.column("run_id").to_pylist()}

    def read_run(self, table: str, contract: str, target: str, run_id: str) -> pa.Table | None:
        """The rows run ``run_id`` wrote (its newest write when it wrote several); None when
        it wrote none. Rows staged in the transaction around or committed by this process
        come from memory (warehouse/committed_runs.py), anything else from DuckLake."""
        tx = _active().get(self._key)
        through_tx = tx is not None and table in tx.staged
        if through_tx:
            staged = tx.staged_run(table, contract, target, run_id)  # type: ignore[union-attr]
            if staged is not None and staged.num_rows:
                return staged
            through_tx = staged is None  # else: none of the run's rows is staged
        if not through_tx:
            kept = committed_runs.recall(self._key, table, contract, target, run_id)
            if kept is not None:
                return kept
        source = self._source(table) if through_tx else _committed(table)
        with self.connect() if through_tx else self._committed_reader() as con:
            # the run's rows scanned once (materialised), its newest write picked from them:
            # a second scan of the table costs DuckLake 20-35 ms more per read
            found = con.execute(
                f"WITH w AS MATERIALIZED (SELECT * FROM {source} AS _t "
                "WHERE contract = $c AND target = $t AND run_id = $r) "
                f"SELECT * EXCLUDE ({ORDER}) FROM w "
                f"WHERE recorded_at = (SELECT max(recorded_at) FROM w) ORDER BY {ORDER}",
                {"c": contract, "t": target, "r": run_id},
            ).to_arrow_table()
        rows = _as_schema(found, TABLES[table])
        return rows if rows.num_rows else None

    def rows(
        self, table: str, where: str = "", params: dict[str, Any] | None = None, order: str = ""
    ) -> pa.Table:
        """Rows of ``table`` (as ``_t``) matching ``where`` (SQL, ``$name`` parameters), in
        ``order`` (default: the order written), with the table's schema."""
        with self.connect() as con:
            sql = f"SELECT * FROM {self._source(table)} AS _t" + (
                f" WHERE {where}" if where else ""
            )
            found = con.execute(
                f"SELECT * EXCLUDE ({ORDER}) FROM ({sql}) ORDER BY {order or ORDER}",
                params or None,
            ).to_arrow_table()
        return _as_schema(found, TABLES[table])

    def _source(self, table: str) -> str:
        """``table`` with the order its rows were written in as ``_order`` (inside a
        transaction, with the rows it staged after the committed ones)."""
        tx = _active().get(self._key)
        staged = None if tx is None else tx.ordered(table)
        return staged or _committed(table)

    def newest_writes(self, table: str, contract: str) -> pa.Table:
        """The rows of each target's newest write of ``table`` for a contract (what
        ``latest_<table>`` shows of it), in the order written."""
        return self._newest_writes(table, "contract = $c", {"c": contract})

    def _newest_writes(self, table: str, where: str, params: dict[str, Any]) -> pa.Table:
        """The rows of ``table`` (as ``_t``) matching ``where`` in their contract and target's
        newest write among them (views.newest: of a gated table, among the runs that reached
        their verdict), in the order written. The table is scanned once (materialised) and
        the newest writes picked from that: as a correlated subquery DuckLake scans it again,
        30-80 ms more per read."""
        newest = "{'at': recorded_at, 'run': run_id}"
        with self.connect() as con:
            found = con.execute(
                f"WITH w AS MATERIALIZED (SELECT * FROM {self._source(table)} AS _t "
                f"WHERE {where}{_completed(table)}), "
                f"n AS (SELECT contract, target, max({newest}) AS k FROM w GROUP BY ALL) "
                f"SELECT w.* EXCLUDE ({ORDER}) FROM w JOIN n ON w.contract = n.contract "
                f"AND w.target = n.target AND {{'at': w.recorded_at, 'run': w.run_id}} = n.k "
                f"ORDER BY w.{ORDER}",
                params,
            ).to_arrow_table()
        return _as_schema(found, TABLES[table])

    def stamp(self) -> int:
        """The warehouse's current snapshot: it changes with every commit, so a reader can
        tell it has nothing new to read."""
        with self.connect() as con:
            found = con.execute(f"SELECT id FROM {ALIAS}.current_snapshot()").fetchone()
        return int(found[0]) if found else 0

    def targets(self, table: str, contract: str) -> list[str]:
        """The targets with rows of ``table`` for a contract, in name order."""
        found = self.query(
            f"SELECT DISTINCT target FROM {self._source(table)} WHERE contract = $c "
            "ORDER BY target",
            {"c": contract},
        )
        return [str(t) for t in found.column("target").to_pylist()]

    def newest_run(self, table: str, contract: str, target: str = NO_TARGET) -> str | None:
        """The run of the newest write of ``table`` for a contract and target."""
        found = self.query(
            f"SELECT max({{'at': recorded_at, 'run': run_id}}).run AS run "
            f"FROM {self._source(table)} WHERE contract = $c AND target = $t",
            {"c": contract, "t": target},
        )
        run = found.column("run")[0].as_py()
        return None if run is None else str(run)

    def local_copy(self, table: str, contract: str, target: str, run_id: str) -> Path | None:
        """The rows run ``run_id`` wrote of ``table`` for a contract and target (its newest
        write), in the order written, as a local Parquet file for readers that stream one
        block by block; None when there are none. Made once per process (a run's write
        never changes) in a folder deleted when the process exits."""
        tx = _active().get(self._key)
        spilled = None if tx is None else tx.spilled_run(table)
        if spilled is not None and self._only_run(spilled, contract, target, run_id):
            return spilled  # what this transaction is about to commit
        key = (str(self.root), str(self.place), table, contract, target, run_id)
        path = _COPIES.get(key)
        if path is not None and path.is_file():
            return path
        path = _copies_folder() / f"{uuid.uuid4().hex}-{table}.parquet"
        where = "contract = $c AND target = $t AND run_id = $r"
        params = {"c": contract, "t": target, "r": run_id}
        with self.bulk(), self.connect() as con:  # a day's records: every core
            source = self._source(table)
            found = con.execute(
                f"SELECT count(*), max(recorded_at) FROM {source} WHERE {where}", params
            ).fetchone()
            if found is None or not found[0]:
                return None
            literal = str(path).replace("'", "''")
            con.execute(
                f"COPY (SELECT * EXCLUDE ({ORDER}) FROM {source} WHERE {where} "
                f"AND recorded_at = $at ORDER BY {ORDER}) TO '{literal}' "
                "(FORMAT parquet, COMPRESSION zstd)",
                {**params, "at": found[1]},
            )
        if tx is None:  # a committed run's rows never change
            _COPIES[key] = path
        return path

    @staticmethod
    def _only_run(path: Path, contract: str, target: str, run_id: str) -> bool:
        import pyarrow.parquet as pq

        first = pq.ParquetFile(path).read_row_group(0, columns=["contract", "target", "run_id"])
        return first.num_rows > 0 and first.slice(0, 1).to_pylist()[0] == {
            "contract": contract, "target": target, "run_id": run_id,
        }  # fmt: skip


_COPIES: dict[tuple[str, ...], Path] = {}


@functools.cache
def _copies_folder() -> Path:
    folder = Path(tempfile.mkdtemp(prefix=f"decguard-copies-{os.getpid()}-"))
    atexit.register(shutil.rmtree, folder, True)
    return folder


def _committed(table: str) -> str:
    """``table``'s committed rows with the order they were written in as ``_order``."""
    return f'(SELECT *, rowid AS {ORDER} FROM {ALIAS}.main."{table}")'


def _completed(table: str) -> str:
    """The ``AND`` of a ``rows`` filter keeping a gated table's completed runs."""
    return f" AND {completed_condition('_t')}" if gated(table) else ""


def _files_part(contract: str, target: str) -> str:
    return f"contract={folder_value(contract)}/target={folder_value(target)}"


def _conformed(table: str, data: pa.Table | list[dict[str, Any]]) -> pa.Table:
    schema = TABLES[table]
    if isinstance(data, list):
        return pa.Table.from_pylist(data, schema=schema)
    return data.select(schema.names).cast(schema)


def _as_schema(data: pa.Table, schema: pa.Schema) -> pa.Table:
    """A query's rows with exactly ``schema`` (DuckDB names list items ``l``, gives BLOB as
    variable-size binary)."""
    return pa.Table.from_arrays([data.column(f.name).cast(f.type) for f in schema], schema=schema)


def _in_partition(
    data: pa.Table, table: str, *, contract: str, target: str, run_id: str, at: datetime
) -> pa.Table:
    """``data`` with empty key cells set to the write's values; refuses rows of another
    contract or target."""
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
