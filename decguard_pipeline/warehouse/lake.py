"""The warehouse is a DuckLake: a catalog database (a SQLite file beside the data on one
machine, PostgreSQL for a team) holding every table's snapshots, plus Parquet data files in
``<root>/data/`` (a folder, or ``s3://bucket/prefix/data/``). This module says where the
catalog is, and gives this process one DuckDB attached to it (``Lake``).

Transactions, snapshots, time travel, data inlining and compaction are DuckLake's: a commit
writes its data files first and then, in one transaction of the catalog database, the
snapshot that makes them visible, so a reader sees a whole commit or none and a writer killed
at any point leaves no visible row (only unreferenced files, which ``warehouse compact``
deletes). Several processes on one machine share a SQLite catalog (in WAL mode, so readers
never wait for a writer); SQLite admits one writer at a time and DuckLake does not wait for
it, so commits to a SQLite catalog take turns on a ``flock`` of ``<catalog>.lock`` (held for
the commit only, released by the kernel if its holder dies). Several machines share a
PostgreSQL catalog, where DuckLake retries a commit that met another one.

Moving inlined rows into files (``ducklake_flush_inlined_data``) deletes them from the catalog
at its commit, so a reader whose snapshot predates that commit but whose scan comes after it
misses them (duckdb/ducklake#1413, unfixed in the extension built for DuckDB 1.5.5). On a
SQLite catalog readers therefore hold a shared ``flock`` of ``<catalog>.read`` while they
read (``reading``) and the flush takes it exclusively (``flush_turn``), passing through
``<catalog>.gate`` first so a steady stream of readers cannot keep it out.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from decguard_pipeline.warehouse import extensions, views
from decguard_pipeline.warehouse.locations import Location, ObjectPath, StorageError
from decguard_pipeline.warehouse.schema import SCHEMA_VERSION, TABLES, sql_type

if TYPE_CHECKING:
    import duckdb

CATALOG_ENV = "DECGUARD_CATALOG"
SQLITE_CATALOG = "catalog.sqlite"
DATA = "data"
SCHEMA_ATTEMPTS = 5  # tries to make the schema beside other machines making it
ALIAS = "lake"  # the name the catalog is attached as (the documented one-liner uses it too)
# Writes of up to this many rows go into the catalog database instead of a Parquet file of
# their own (DuckLake's data inlining); `warehouse compact` moves them into files. An
# evaluation's runs, metrics, gates and verdict rows are tens of rows: without it each would be
# a small file per evaluation and table. Its 1,000 case results go to a file: inlining them
# costs more than writing the file (1.7 s against 0.4 s per evaluation, bench/warehouse_format.py).
INLINE_ROWS = 100
# The pipeline's statements are small (a run's rows, the catalog's look-ups), and DuckDB's
# threads cost them more than they give: each scan of a SQLite catalog table is split over
# them, a connection each. One thread halves a commit of ten small tables (250 -> 125 ms)
# and a read of the newest write (60 -> 35 ms); bulk work asks for every core (``bulk``).
SMALL_THREADS = 1


@dataclass(frozen=True)
class CatalogPlace:
    """Where a warehouse's catalog is: a SQLite file, or a PostgreSQL database named by a
    ``postgresql://user@host:port/db`` URL without a password (libpq takes it from
    ``PGPASSWORD`` or ``~/.pgpass``: the URL is written into run configuration)."""

    kind: str  # "sqlite" or "postgres"
    where: str  # the SQLite file's absolute path, or the URL

    @property
    def uri(self) -> str:
        return f"ducklake:{self.kind}:{self.where}"

    @property
    def lock_file(self) -> Path | None:
        """The file whose ``flock`` commits take turns on (a SQLite catalog only)."""
        return Path(f"{self.where}.lock") if self.kind == "sqlite" else None

    @property
    def read_files(self) -> tuple[Path, Path] | None:
        """The gate and the read lock between readers and the flush (a SQLite catalog only)."""
        if self.kind != "sqlite":
            return None
        return Path(f"{self.where}.gate"), Path(f"{self.where}.read")

    def __str__(self) -> str:
        return self.where


def catalog_place(root: Location, given: str | None = None) -> CatalogPlace:
    """The catalog of the warehouse at ``root``: ``given``, else ``$DECGUARD_CATALOG``, else
    ``<root>/catalog.sqlite`` (a folder only: an object store holds no database file)."""
    text = given or os.environ.get(CATALOG_ENV) or ""
    if text.startswith(("postgresql://", "postgres://")):
        parts = urlsplit(text)
        if parts.password:
            raise StorageError(
                f"catalog {parts.scheme}://{parts.username or ''}@{parts.hostname or ''}/...: "
                "no password in the URL (it is written into run configuration); set "
                "PGPASSWORD or use ~/.pgpass"
            )
        return CatalogPlace("postgres", text)
    if text:
        return CatalogPlace("sqlite", str(Path(text.removeprefix("sqlite:")).resolve()))
    if isinstance(root, ObjectPath):
        raise StorageError(
            f"warehouse {root}: a warehouse on object storage needs its catalog in "
            f"PostgreSQL: set {CATALOG_ENV}=postgresql://user@host:5432/database"
        )
    return CatalogPlace("sqlite", str(root / SQLITE_CATALOG))


def data_path(root: Location) -> str:
    return f"{str(root).rstrip('/')}/{DATA}/"


def _text(value: str) -> str:
    """``value`` inside a SQL string literal."""
    return value.replace("'", "''")


def schema_stamp() -> str:
    """What the catalog's tables and views must have been made for: the schema version,
    every table's columns and every view's SQL. Kept as the views' comment."""
    parts = [str(SCHEMA_VERSION)]
    parts += [f"{t}: {[(f.name, sql_type(f.type)) for f in s]}" for t, s in TABLES.items()]
    parts += views.statements()
    return f"decguard {hashlib.sha256(chr(10).join(parts).encode()).hexdigest()[:16]}"


class Lake:
    """This process's DuckDB with the warehouse's catalog attached as ``lake``, its
    extensions loaded and the session in UTC. ``cursor()`` gives a connection of its own
    (its own transaction) to it; DuckDB connections are not shared between threads."""

    def __init__(self, root: Location, place: CatalogPlace, *, read_only: bool = False) -> None:
        import duckdb

        self.root, self.place, self.read_only = root, place, read_only
        self._turn = threading.RLock()
        self._depth, self._fd = 0, -1
        self._readers_lock = threading.Lock()
        self._readers, self._read_fd = 0, -1
        self._idle = threading.local()  # each thread's idle reading connections
        # a user's query (``sql``, on a read-only catalog) may be big: every core for it
        threads = {} if read_only else {"threads": str(SMALL_THREADS)}
        self.db = duckdb.connect(config={**extensions.CONFIG, **threads})
        self._bulk_lock = threading.Lock()
        self._bulk = 0  # blocks of bulk work under way (``bulk``)
        needed = ["ducklake", "sqlite_scanner" if place.kind == "sqlite" else "postgres_scanner"]
        if isinstance(root, ObjectPath):
            needed.append("httpfs")
        extensions.load(self.db, *needed)
        self.db.execute("SET TimeZone = 'UTC'")
        if isinstance(root, ObjectPath):
            object_store_secret(self.db, root)
        fresh = False
        if place.kind == "sqlite":
            fresh = not Path(place.where).exists()
            if fresh and read_only:
                raise StorageError(f"no warehouse at {root} (no catalog {place.where})")
            if fresh:
                Path(place.where).parent.mkdir(parents=True, exist_ok=True)
        with self.commit_lock() if fresh else contextlib.nullcontext():
            if fresh:
                _prepare_sqlite(Path(place.where))
            self._attach()
            if not read_only:
                self.ensure_schema()

    def _attach(self) -> None:
        options = [f"DATA_PATH '{_text(data_path(self.root))}'"]
        if self.place.kind == "sqlite":
            # the folder may have moved since the catalog was made: its data is beside it
            options.append("OVERRIDE_DATA_PATH true")
        if self.read_only:
            options.append("READ_ONLY")
        self.db.execute(f"ATTACH '{_text(self.place.uri)}' AS {ALIAS} ({', '.join(options)})")

    @contextlib.contextmanager
    def bulk(self) -> Iterator[None]:
        """Every core for the block's statements (a day's records, a big commit): the
        process's DuckDB otherwise runs on ``SMALL_THREADS`` (see there)."""
        with self._bulk_lock:
            self._bulk += 1
            if self._bulk == 1:
                self._set_threads(os.cpu_count() or 1)
        try:
            yield
        finally:
            with self._bulk_lock:
                self._bulk -= 1
                if self._bulk == 0:
                    self._set_threads(SMALL_THREADS)

    def _set_threads(self, n: int) -> None:
        con = self.db.cursor()  # a connection of its own: the setting is the database's
        try:
            con.execute(f"SET threads = {n}")
        finally:
            con.close()

    def cursor(self) -> duckdb.DuckDBPyConnection:
        con = self.db.cursor()
        con.execute(f"USE {ALIAS}")
        return con

    @contextlib.contextmanager
    def commit_lock(self) -> Iterator[None]:
        """Commits to a SQLite catalog take turns (see the module docstring): a ``flock``
        between processes, a lock between this process's threads (re-entrant: the flock is
        taken once). A PostgreSQL catalog needs nothing."""
        path = self.place.lock_file
        if path is None:
            yield
            return
        import fcntl

        with self._turn:
            self._depth += 1
            try:
                if self._depth == 1:
                    self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
                    fcntl.flock(self._fd, fcntl.LOCK_EX)
                yield
            finally:
                self._depth -= 1
                if self._depth == 0 and self._fd >= 0:
                    os.close(self._fd)  # releases the lock
                    self._fd = -1

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """Hold off a flush of inlined rows while the block reads (see the module
        docstring): the process's readers share one ``flock``, taken by the first of them
        and released by the last. Writers are not held off."""
        files = self.place.read_files
        if files is None:
            yield
            return
        import fcntl

        with self._readers_lock:
            if self._readers == 0:
                gate_path, read_path = files
                gate = _lock_file(gate_path)
                if gate >= 0:
                    try:
                        fcntl.flock(gate, fcntl.LOCK_SH)  # waits while a flush is waiting
                        self._read_fd = _lock_file(read_path)
                        if self._read_fd >= 0:
                            fcntl.flock(self._read_fd, fcntl.LOCK_SH)
                    finally:
                        os.close(gate)
            self._readers += 1
        try:
            yield
        finally:
            with self._readers_lock:
                self._readers -= 1
                if self._readers == 0 and self._read_fd >= 0:
                    os.close(self._read_fd)  # releases the lock
                    self._read_fd = -1

    @contextlib.contextmanager
    def reader(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection for reading during the block (``reading``), used by no one else
        meanwhile. Each thread keeps its idle ones for its next reads: making one costs a
        DuckLake snapshot (``USE``, ~8 ms against a SQLite catalog), and an idle connection
        holds no transaction, so each statement still sees the newest commit."""
        idle: list[duckdb.DuckDBPyConnection] = self._idle.__dict__.setdefault("cursors", [])
        with self.reading():
            con = idle.pop() if idle else self.cursor()
            try:
                yield con
            except BaseException:
                con.close()  # it may be left inside a statement or a transaction
                raise
            idle.append(con)

    @contextlib.contextmanager
    def flush_turn(self, wait_s: float, poll_s: float = 0.01) -> Iterator[bool]:
        """Until the block ends, no reader reads (True), once the readers reading have
        finished; False when they have not within ``wait_s`` seconds. Readers arriving
        meanwhile wait at the gate. Always True on a PostgreSQL catalog (no lock there)."""
        files = self.place.read_files
        if files is None:
            yield True
            return
        import fcntl

        gate_path, read_path = files
        gate = os.open(gate_path, os.O_RDWR | os.O_CREAT, 0o644)
        fd = os.open(read_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(gate, fcntl.LOCK_EX)
            deadline = time.monotonic() + wait_s
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    got = True
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        got = False
                        break
                    time.sleep(poll_s)
            yield got
        finally:
            os.close(fd)
            os.close(gate)

    @contextlib.contextmanager
    def committed(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection in a transaction of its own, holding the commit turn: committed when
        the block ends, rolled back when it raises."""
        con = self.cursor()
        try:
            with self.commit_lock():
                con.execute("BEGIN")
                try:
                    yield con
                    con.execute("COMMIT")
                except BaseException:
                    with contextlib.suppress(Exception):
                        con.execute("ROLLBACK")
                    raise
        finally:
            con.close()

    # -- the tables and views ------------------------------------------------------------

    def ensure_schema(self) -> None:
        """Create what the catalog lacks: a table, a column added by a newer version (NULL
        in older rows), the views (made again when their definitions changed), statistics
        of a table never written to. Done once per process; the check reads the catalog
        DuckDB loaded on attaching."""
        import duckdb

        stamp = schema_stamp()
        for attempt in range(SCHEMA_ATTEMPTS):
            con = self.cursor()
            try:
                if self._current(con, stamp):
                    return
            finally:
                con.close()
            try:
                with self.committed() as con:
                    if not self._current(con, stamp):
                        self._make_schema(con, stamp)
                return
            except duckdb.TransactionException:
                # a PostgreSQL catalog has no turn to take: another machine made the schema
                # first, so look again (its tables and views count)
                if attempt == SCHEMA_ATTEMPTS - 1:
                    raise
            time.sleep(0.05 * (attempt + 1))

    @staticmethod
    def _current(con: duckdb.DuckDBPyConnection, stamp: str) -> bool:
        found = con.execute(
            "SELECT count(*), count(*) FILTER (WHERE comment = ?) FROM duckdb_views() "
            "WHERE database_name = ?",
            [stamp, ALIAS],
        ).fetchone()
        assert found is not None
        current = found[0] > 0 and found[0] == found[1] == len(views.statements())
        return current and not _without_statistics(con)

    def _make_schema(self, con: duckdb.DuckDBPyConnection, stamp: str) -> None:
        columns: dict[str, set[str]] = {}
        for table, column in con.execute(
            "SELECT table_name, column_name FROM duckdb_columns() "
            "WHERE database_name = ? AND schema_name = 'main'",
            [ALIAS],
        ).fetchall():
            columns.setdefault(table, set()).add(column)
        tables = set(
            r[0]
            for r in con.execute(
                "SELECT table_name FROM duckdb_tables() WHERE database_name = ?", [ALIAS]
            ).fetchall()
        )
        if not tables:
            # DuckLake options are set before any view exists (setting one with views in
            # the catalog crashes DuckLake 1.5.5)
            con.execute(
                f"CALL ducklake_set_option('{ALIAS}', 'data_inlining_row_limit', {INLINE_ROWS})"
            )
        for table, schema in TABLES.items():
            if table not in tables:
                body = ", ".join(f'"{f.name}" {sql_type(f.type)}' for f in schema)
                con.execute(f'CREATE TABLE "{table}" ({body})')
                continue
            for field in schema:
                if field.name not in columns.get(table, set()):
                    con.execute(
                        f'ALTER TABLE "{table}" ADD COLUMN "{field.name}" {sql_type(field.type)}'
                    )
        # (tables made in this commit are not in the catalog yet)
        for table in sorted(set(_without_statistics(con)) | (set(TABLES) - tables)):
            # a row written and deleted in one commit leaves the table's statistics in the
            # catalog and no row: DuckLake plans a query of a table that has none ~25 times
            # slower (0.3 s for SELECT * of `diffs`, 12 ms with them)
            con.execute(f'INSERT INTO "{table}" ("{TABLES[table][0].name}") VALUES (NULL)')
            con.execute(f'DELETE FROM "{table}"')
        for statement in views.statements():
            con.execute(statement)
        for name in views.names():
            con.execute(f"COMMENT ON VIEW {name} IS '{stamp}'")


def _lock_file(path: Path) -> int:
    """A descriptor to ``flock`` ``path`` by, made if missing; -1 when this user can neither
    make nor open it (a warehouse only readable to them: their reads go unguarded)."""
    for flags in (os.O_RDWR | os.O_CREAT, os.O_RDONLY):
        try:
            return os.open(path, flags, 0o644)
        except OSError:
            continue
    return -1


def _without_statistics(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The warehouse's tables without statistics in the catalog (never written to)."""
    found = con.execute(
        f"SELECT t.table_name FROM __ducklake_metadata_{ALIAS}.ducklake_table t "
        f"LEFT JOIN __ducklake_metadata_{ALIAS}.ducklake_table_stats s USING (table_id) "
        "WHERE t.end_snapshot IS NULL AND s.table_id IS NULL"
    ).fetchall()
    return sorted(r[0] for r in found if r[0] in TABLES)


def _prepare_sqlite(path: Path) -> None:
    """A new catalog file in WAL mode (kept by the file): readers never wait for a writer."""
    import sqlite3

    connection = sqlite3.connect(path)
    try:
        connection.execute("PRAGMA journal_mode=WAL")
    finally:
        connection.close()


def object_store_secret(con: duckdb.DuckDBPyConnection, root: ObjectPath) -> None:
    """Let ``con`` read and write ``s3://`` with the standard AWS variables (an in-memory
    secret of this connection: never written anywhere)."""
    if root.scheme != "s3":
        raise StorageError(
            f"warehouse {root}: only s3:// object storage (any S3-compatible store, Google "
            "Cloud Storage through its S3 interoperability endpoint)"
        )
    env = os.environ
    options = {
        "KEY_ID": env.get("AWS_ACCESS_KEY_ID"),
        "SECRET": env.get("AWS_SECRET_ACCESS_KEY"),
        "SESSION_TOKEN": env.get("AWS_SESSION_TOKEN"),
        "REGION": env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION"),
    }
    endpoint = env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
    if endpoint:
        parts = urlsplit(endpoint)
        options["ENDPOINT"] = parts.netloc or parts.path
        options["USE_SSL"] = "true" if parts.scheme != "http" else "false"
        options["URL_STYLE"] = "path"
    given = {k: v for k, v in options.items() if v}
    body = ", ".join(
        f"{k} {v}" if k in ("USE_SSL",) else f"{k} '{_text(v)}'" for k, v in given.items()
    )
    con.execute(f"CREATE OR REPLACE SECRET decguard_s3 (TYPE s3{', ' + body if body else ''})")


_LAKES: dict[tuple[int, str, str, bool], Lake] = {}
_LOCK = threading.Lock()


def lake_of(root: Location, place: CatalogPlace, *, read_only: bool = False) -> Lake:
    """This process's ``Lake`` of a warehouse (a forked child makes its own)."""
    key = (os.getpid(), str(root), str(place), read_only)
    with _LOCK:
        if key not in _LAKES:
            _LAKES[key] = Lake(root, place, read_only=read_only)
        return _LAKES[key]
