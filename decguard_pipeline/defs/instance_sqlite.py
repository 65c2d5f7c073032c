"""What a run costs on a local SQLite instance, cut at the root.

Dagster's SQLite storages open a new connection (through a new engine) for every event they
write, commit it with ``synchronous=FULL`` and close it. In WAL mode (every Dagster SQLite
database is created in it) the close of the last connection to a database checkpoints the
WAL into the database file and deletes it, so each of a run's ~80 events paid an fsync of the
WAL, a checkpoint with an fsync of the database file and the WAL's re-creation: about two
thirds of a run's time on the bundled examples (docs/performance.md).

``tune`` changes two things for the process that executes runs (``evaluate`` and its
workers), never what is stored:

* it keeps one idle connection open to each of the instance's databases for as long as the
  instance is used, so no close by Dagster is the last one and the WAL is checkpointed by
  SQLite's automatic checkpoint (every ~1000 pages) instead of after every event; an idle
  connection holds no read transaction, so it never holds a checkpoint back;
* it sets ``synchronous=NORMAL`` on every SQLite connection of a WAL database that this
  process opens: a commit no longer waits for an fsync of the WAL. In WAL mode this keeps
  the database consistent through a crash of the process (kill -9 loses nothing committed);
  only an OS crash or power loss may roll back the last commits, never corrupt the file.

PostgreSQL instances are left alone."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import dagster as dg

# The databases of a SQLite instance (dagster 1.13's layout: runs, consolidated event log
# and schedules; the per-run event logs of the unconsolidated storage live one level deeper).
DATABASES = ("history/*.db", "schedules/*.db")

_lock = threading.Lock()
_listening = False


def _on_connect(connection: Any, _record: Any) -> None:
    """SQLAlchemy's connect hook: ``synchronous=NORMAL`` for a SQLite database in WAL mode
    (in a rollback-journal database NORMAL would risk corruption on power loss)."""
    if not isinstance(connection, sqlite3.Connection):
        return
    mode = connection.execute("PRAGMA journal_mode").fetchone()
    if mode is not None and str(mode[0]).lower() == "wal":
        connection.execute("PRAGMA synchronous=NORMAL")


def _listen() -> None:
    global _listening
    with _lock:
        if _listening:
            return
        from sqlalchemy import event
        from sqlalchemy.engine import Engine

        event.listen(Engine, "connect", _on_connect)
        _listening = True


def is_sqlite(instance: dg.DagsterInstance) -> bool:
    return type(instance.event_log_storage).__module__.startswith(
        "dagster._core.storage.event_log.sqlite"
    )


class Tuned:
    """The idle connections ``tune`` holds; ``close`` lets them go."""

    def __init__(self, connections: list[sqlite3.Connection]) -> None:
        self.connections = connections

    def close(self) -> None:
        for connection in self.connections:
            connection.close()
        self.connections = []


def tune(instance: dg.DagsterInstance) -> Tuned:
    """Cheaper commits for the runs this process executes on ``instance`` (see the module
    docstring); a no-op on anything but a local SQLite instance. Call after the instance's
    storages exist (``open_instance`` creates them)."""
    if not is_sqlite(instance):
        return Tuned([])
    _listen()
    root = Path(instance.root_directory)
    held = []
    for pattern in DATABASES:
        for path in sorted(root.glob(pattern)):
            connection = sqlite3.connect(path, check_same_thread=False)
            # a first read maps the WAL index: from now on this connection counts as open
            connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
            held.append(connection)
    return Tuned(held)
