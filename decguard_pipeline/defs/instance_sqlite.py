"""What a run costs on a local SQLite instance, cut at the root.

Dagster's SQLite storages build a new SQLAlchemy engine and open a new connection for every
event they write, commit it with ``synchronous=FULL`` and close it. In WAL mode (every Dagster
SQLite database is created in it) the close of the last connection to a database checkpoints
the WAL into the database file and deletes it; a new engine also compiles every statement
again (the compiled cache is the engine's) and initialises its dialect. Each of a run's ~80
events paid all of that: about two thirds of a run's time on the bundled examples, and most
of the rest of Dagster's own share (docs/performance.md).

``tune`` changes how the process that executes runs (``evaluate`` and its workers) connects
to the instance's run, event-log and schedule databases, never what is stored:

* one engine per database for the life of the instance, with a pool of open connections:
  statements are compiled once, no close is the last one, and the WAL is checkpointed by
  SQLite's automatic checkpoint (every ~1000 pages) instead of after every event; an idle
  pooled connection holds no read transaction, so it never holds a checkpoint back;
* ``synchronous=NORMAL`` on those connections (WAL databases only): a commit no longer waits
  for an fsync of the WAL. In WAL mode the database stays consistent through a crash of the
  process (kill -9 loses nothing committed); only an OS crash or power loss may roll back the
  last commits, never corrupt the file.
* the answers to two kinds of repeated questions are remembered: the schema (a table or
  column present stays present) and the latest materialisation of one asset partition,
  which each check result looks up (until this process stores a new one of that asset).

Other processes on the same instance (the UI, the daemon, another ``evaluate``) keep Dagster's
own connections and are unaffected; WAL lets them read and write meanwhile. PostgreSQL
instances, and SQLite storages of other classes, are left alone. Tested against the pinned
Dagster (pyproject.toml): the methods replaced are the storages' connection factories."""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import sqlalchemy as sa
import yaml

from decguard_pipeline.defs import instance_config

# storage class -> (its connection factory's name, sqlite3.connect arguments Dagster uses)
BUSY_TIMEOUT_S = 30  # dagster._core.storage.sqlite.SQLITE_BUSY_TIMEOUT_SECONDS
FACTORIES = {
    "ConsolidatedSqliteEventLogStorage": ("_connect", {"timeout": BUSY_TIMEOUT_S}),
    "SqliteRunStorage": ("connect", {}),
    "SqliteScheduleStorage": ("connect", {}),
}


def _on_connect(connection: Any, _record: Any) -> None:
    """``synchronous=NORMAL`` for a database in WAL mode (in a rollback-journal database
    NORMAL would risk corruption on power loss, so it keeps SQLite's FULL)."""
    if not isinstance(connection, sqlite3.Connection):
        return
    mode = connection.execute("PRAGMA journal_mode").fetchone()
    if mode is not None and str(mode[0]).lower() == "wal":
        connection.execute("PRAGMA synchronous=NORMAL")


def _engine(conn_string: str, connect_args: dict[str, Any]) -> sa.Engine:
    engine = sa.create_engine(
        conn_string,
        poolclass=sa.pool.QueuePool,
        connect_args={**connect_args, "check_same_thread": False},
    )
    sa.event.listen(engine, "connect", _on_connect)
    return engine


def _transaction(engine: sa.Engine) -> Any:
    """A connection factory like Dagster's: a connection in a transaction, committed on exit."""

    @contextlib.contextmanager
    def connect() -> Iterator[sa.Connection]:
        with engine.connect() as connection, connection.begin():
            yield connection

    return connect


class Tuned:
    """The storages ``tune`` changed; ``close`` gives them back their own factories and
    closes the pooled connections (the last close checkpoints the WAL)."""

    def __init__(self) -> None:
        self.changed: list[tuple[Any, list[str], sa.Engine]] = []

    def close(self) -> None:
        for storage, names, engine in self.changed:
            for name in names:
                storage.__dict__.pop(name, None)
            engine.dispose()
        self.changed = []


def _tune_storage(storage: Any, tuned: Tuned) -> None:
    factory = FACTORIES.get(type(storage).__name__)
    conn_string = getattr(storage, "_conn_string", None)
    if factory is None or not isinstance(conn_string, str):
        return
    if not type(storage).__module__.startswith("dagster._core.storage."):
        return
    name, connect_args = factory
    engine = _engine(conn_string, connect_args)
    names = [name]
    setattr(storage, name, _transaction(engine))
    if name == "_connect":  # the event log also builds an engine for every has_table

        def has_table(table_name: str) -> bool:
            with engine.connect() as connection:
                return bool(engine.dialect.has_table(connection, table_name))

        storage.has_table = has_table
        names.append("has_table")
    names += _remember_schema(storage)
    if name == "_connect":
        names += _remember_latest_materialization(storage)
    tuned.changed.append((storage, names, engine))


# Questions about the schema Dagster asks again and again (before every asset event it
# reflects the asset_keys table's columns; before every partition query it looks for the
# dynamic partitions table): ~3% of a run's time. A table or column present stays present
# (migrations only add them), so a yes is remembered for the life of the tuned storage; a no
# is asked again.
SCHEMA_QUESTIONS = (
    "has_table",
    "_has_asset_key_col_on_connection",
    "has_run_stats_index_cols",
    "has_backfill_id_column",
    "has_bulk_actions_selector_cols",
    "has_bulk_action_job_name_column",
)


def _remember_schema(storage: Any) -> list[str]:
    names = []
    for name in SCHEMA_QUESTIONS:
        ask = getattr(storage, name, None)
        if ask is None:
            continue
        known: set[tuple[Any, ...]] = set()

        def remembered(*args: Any, _ask: Any = ask, _known: Any = known) -> bool:
            key = tuple(a for a in args if isinstance(a, str))  # not the connection
            if key in _known:
                return True
            answer = bool(_ask(*args))
            if answer:
                _known.add(key)
            return answer

        setattr(storage, name, remembered)
        names.append(name)
    return names


# Every check result of a partitioned asset looks up the latest materialisation of its
# asset's partition, the one it checked (``AssetCheckResult._get_target_materialization_data``:
# a query and the event's deserialisation, 10-30 ms with our assets' metadata): twice per
# check, 46 times in a refund target's run, for the same few materialisations. The answer to
# exactly that question (one asset, one partition, the latest, no cursor) is remembered until
# this process stores a materialisation of that asset; a wipe forgets everything. Another
# process's materialisation of the same partition during one of our steps is the only answer
# that can differ, a race Dagster's own look-up has as well.
FORGET_ALL = ("delete_events", "wipe", "wipe_asset", "wipe_asset_partitions")


def _remember_latest_materialization(storage: Any) -> list[str]:
    from dagster._core.event_api import AssetRecordsFilter

    fetch, store = storage.fetch_materializations, storage.store_event
    latest: dict[tuple[Any, str], Any] = {}

    def fetch_materializations(
        records_filter: Any, limit: int, cursor: str | None = None, ascending: bool = False
    ) -> Any:
        key = None
        if isinstance(records_filter, AssetRecordsFilter) and limit == 1 and cursor is None:
            partitions = records_filter.asset_partitions
            only = AssetRecordsFilter(records_filter.asset_key, partitions)
            if not ascending and partitions is not None and len(partitions) == 1:
                key = (records_filter.asset_key, partitions[0]) if records_filter == only else None
        if key is None:
            return fetch(records_filter, limit, cursor, ascending)
        if key not in latest:
            latest[key] = fetch(records_filter, limit, cursor, ascending)
        return latest[key]

    def store_event(event: Any) -> None:
        try:
            store(event)
        finally:  # only a materialisation changes the answer (not a check's own event)
            if event.is_dagster_event and event.dagster_event.is_step_materialization:
                asset = event.dagster_event.asset_key
                for key in [k for k in latest if k[0] == asset]:
                    del latest[key]

    names = ["fetch_materializations", "store_event"]
    storage.fetch_materializations = fetch_materializations
    storage.store_event = store_event
    for name in FORGET_ALL:
        forget = getattr(storage, name, None)
        if forget is None:
            continue

        def forgetting(*args: Any, _forget: Any = forget, **kwargs: Any) -> Any:
            latest.clear()
            return _forget(*args, **kwargs)

        setattr(storage, name, forgetting)
        names.append(name)
    return names


def _creating_hook(keepers: dict[str, sqlite3.Connection]) -> Any:
    """``_on_connect`` for the databases Dagster creates or opens while the instance opens: a
    new (empty) database is put in WAL mode before its schema is created, and one connection
    of ours is kept open on each WAL database until the opening ends."""

    def on_connect(connection: Any, record: Any) -> None:
        if not isinstance(connection, sqlite3.Connection):
            return
        files = connection.execute("PRAGMA database_list").fetchall()
        path = next((file for _, name, file in files if name == "main"), "")
        if path and connection.execute("PRAGMA page_count").fetchone()[0] == 0:
            connection.execute("PRAGMA journal_mode=WAL")
        _on_connect(connection, record)
        mode = connection.execute("PRAGMA journal_mode").fetchone()
        if path and path not in keepers and str(mode[0]).lower() == "wal":
            keeper = sqlite3.connect(path, check_same_thread=False)
            keeper.execute("SELECT count(*) FROM sqlite_master").fetchone()  # holds the WAL open
            keepers[path] = keeper

    return on_connect


@contextlib.contextmanager
def creating() -> Iterator[None]:
    """While the instance is opened (on a new folder: Dagster creates its schemas and runs its
    migrations through a dozen connections of its own, each statement of its schema
    committed on its own), every SQLite connection this process opens to a WAL database
    commits with ``synchronous=NORMAL`` too, and the hook is removed after. Two more things
    cut the fsyncs of a new instance from ~290 to a handful, without changing what is
    stored:

    * a new, empty database is put in WAL mode before its schema is created (Dagster puts
      it in WAL mode right after; in the rollback-journal mode before, every statement
      fsynced the database, its journal and the folder);
    * one connection of ours stays open on each WAL database meanwhile, so that none of
      Dagster's closes is the last one, which would checkpoint the WAL (fsyncs); ours is
      closed at the end and checkpoints once.

    In WAL mode a crash or power cut during the opening leaves each database as it was
    after one of its commits: what a kill -9 at that moment left before."""
    keepers: dict[str, sqlite3.Connection] = {}
    hook = _creating_hook(keepers)
    sa.event.listen(sa.Engine, "connect", hook)
    try:
        with _one_script_directory():
            yield
    finally:
        sa.event.remove(sa.Engine, "connect", hook)
        for keeper in keepers.values():
            keeper.close()


@contextlib.contextmanager
def _one_script_directory() -> Iterator[None]:
    """Alembic's migration scripts read once, not six times: each storage checks its
    revision (and, new, stamps it) through a new ``ScriptDirectory``, which loads every
    migration script of Dagster's one alembic folder again (a third of a new instance's
    opening, ~0.1 s of every opening). Shared while the instance opens between configs of
    the same folder and the same ini text (the three storages' are identical)."""
    from alembic.script import ScriptDirectory

    own = ScriptDirectory.__dict__["from_config"]
    made: dict[tuple[str | None, str], ScriptDirectory] = {}

    def from_config(config: Any) -> ScriptDirectory:
        name = config.config_file_name
        ini = Path(name).read_text() if name and Path(name).is_file() else ""
        key = (config.get_main_option("script_location"), ini)
        if key not in made:
            made[key] = own.__get__(None, ScriptDirectory)(config)
        return made[key]

    ScriptDirectory.from_config = from_config  # type: ignore[method-assign]
    try:
        yield
    finally:
        ScriptDirectory.from_config = own  # type: ignore[method-assign]


# A new local instance's databases are made in ``<home>/.creating-*`` and moved into place.
CREATING = ".creating-"
FOLDERS = ("history", "schedules")  # runs.db and event_log.db; schedules.db


def create_in_place(home: Path, config: dict[str, Any]) -> None:
    """The databases of a new local SQLite instance (``config``, the generated one), made
    whole before they appear: Dagster creates them in place, statement by statement, and a
    kill -9 in the middle left an instance whose next opening did not finish the job (e.g.
    no dynamic partitions table: every later run failed). They are made in a folder of
    their own inside ``home``, every connection closed (the WAL checkpointed into each
    database), then each folder is renamed into place if still missing. Run under the
    instance lock; a folder left by a killed creation is deleted first. A non-SQLite or
    hand-written config, or an instance whose folders exist, is left to Dagster."""
    for leftover in home.glob(f"{CREATING}*"):
        shutil.rmtree(leftover, ignore_errors=True)
    missing = [name for name in FOLDERS if not (home / name).exists()]
    if not missing or "storage" in config or "run_storage" in config:
        return
    if config.get("event_log_storage") != instance_config.sqlite_event_log(home):
        return
    staging = Path(tempfile.mkdtemp(prefix=CREATING, dir=home))
    try:
        (staging / "dagster.yaml").write_text(
            yaml.safe_dump(
                {
                    "event_log_storage": instance_config.sqlite_event_log(staging),
                    "telemetry": {"enabled": False},
                }
            )
        )
        with creating():
            instance = dg.DagsterInstance.from_config(str(staging))
            try:
                instance.get_runs(limit=1)  # run storage
                instance.get_dynamic_partitions("_")  # event log storage
                instance.all_instigator_state()  # schedule storage
            finally:
                instance.dispose()
        for name in missing:
            os.rename(staging / name, home / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def tune(instance: dg.DagsterInstance) -> Tuned:
    """Pooled, cheaper connections for the runs this process executes on ``instance`` (see
    the module docstring); nothing changes on a PostgreSQL instance."""
    tuned = Tuned()
    for storage in (instance.run_storage, instance.event_log_storage, instance.schedule_storage):
        _tune_storage(storage, tuned)
    return tuned
