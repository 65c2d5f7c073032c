"""Cheaper commits for a process that executes runs on a local SQLite instance.

Dagster's SQLite storages open a new connection for every event they write and close it after
the commit. Each connection commits with SQLite's default ``synchronous=FULL`` (an fsync of
the WAL per commit), and in WAL mode (every Dagster SQLite database is created in it) the
close of the last connection to a database checkpoints the WAL into the database file: a
target run's ~100 events paid both, 20-40 ms each on this project's 2-core machines.

``cheaper_commits`` changes, for this process only and through SQLite's and SQLAlchemy's
public interfaces (a ``connect`` event listener on every engine; nothing of Dagster is
replaced or patched):

* a new, empty database is put in WAL mode before its schema is created (Dagster puts it in
  WAL mode right after creating it), and every connection to a WAL database commits with
  ``synchronous=NORMAL``: no fsync per commit. In WAL mode the database stays consistent
  through a crash of the process (kill -9 loses nothing committed); an OS crash or power loss
  may roll back the last commits, never corrupt the file;
* one idle connection of this process stays open on each WAL database it touched, so that
  no close of Dagster's is the last one: the WAL is checkpointed by SQLite's automatic
  checkpoint (every ~1000 pages), not after every event. It holds no read transaction, so it
  never holds a checkpoint back.

Together they bring an event from 20-40 ms to 3-5 ms (bench/pipeline.py). Other processes on
the same instance (the UI, the daemon) keep SQLite's defaults; WAL lets them read and write
meanwhile. A rollback-journal database and PostgreSQL are left alone."""

from __future__ import annotations

import sqlite3
from typing import Any

import sqlalchemy as sa

_open: dict[str, sqlite3.Connection] = {}  # database file -> the idle connection kept open
_listening = False


def _database_file(connection: sqlite3.Connection) -> str:
    files = connection.execute("PRAGMA database_list").fetchall()
    return next((file for _, name, file in files if name == "main"), "")


def _on_connect(connection: Any, _record: Any) -> None:
    if not isinstance(connection, sqlite3.Connection):
        return
    path = _database_file(connection)
    if path and connection.execute("PRAGMA page_count").fetchone()[0] == 0:
        # a new, empty database: WAL mode before its schema is created (Dagster sets it right
        # after; before, each statement of the schema fsynced the file, its journal and the
        # folder: ~290 fsyncs for a new instance)
        connection.execute("PRAGMA journal_mode=WAL")
    mode = connection.execute("PRAGMA journal_mode").fetchone()
    if mode is None or str(mode[0]).lower() != "wal":
        return  # NORMAL would risk corruption on power loss outside WAL mode
    connection.execute("PRAGMA synchronous=NORMAL")
    if path and path not in _open:
        idle = sqlite3.connect(path, check_same_thread=False)
        idle.execute("SELECT count(*) FROM sqlite_master").fetchone()  # opens the WAL
        _open[path] = idle


def cheaper_commits() -> None:
    """From now on, for this process (see the module); calling it again changes nothing."""
    global _listening
    if not _listening:
        sa.event.listen(sa.Engine, "connect", _on_connect)
        _listening = True


def release() -> None:
    """Stop, and close the kept connections (the last close checkpoints each WAL)."""
    global _listening
    if _listening:
        sa.event.remove(sa.Engine, "connect", _on_connect)
        _listening = False
    while _open:
        _open.popitem()[1].close()
