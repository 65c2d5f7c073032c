"""The SQLite instance tuned for the runs of this process: one pooled engine per database,
WAL commits without an fsync each and no checkpoint after every event
(defs/instance_sqlite.py)."""

from pathlib import Path

import pytest
import sqlalchemy as sa

from decguard_pipeline.defs.instance import open_instance


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _synchronous(connect) -> int:
    with connect() as connection:
        return connection.execute(sa.text("PRAGMA synchronous")).scalar_one()


def test_the_wal_outlives_each_write_while_the_instance_is_open(home: Path):
    wal = home / "history" / "event_log.db-wal"
    with open_instance() as instance:
        instance.add_dynamic_partitions("p", ["a"])
        # the connection of that write went back to the pool: no close checkpointed and
        # deleted the WAL, the write is in it
        assert wal.exists() and wal.stat().st_size > 0
        assert instance.get_dynamic_partitions("p") == ["a"]
    # the pooled connections are closed with the instance: the last close checkpoints
    assert not wal.exists()
    with open_instance() as instance:
        assert instance.get_dynamic_partitions("p") == ["a"]


def test_the_storages_commit_with_synchronous_normal_then_get_their_own_back(home: Path):
    with open_instance() as instance:
        storages = instance.event_log_storage, instance.run_storage, instance.schedule_storage
        assert _synchronous(instance.event_log_storage.index_connection) == 1  # NORMAL
        assert _synchronous(instance.run_storage.connect) == 1
        assert _synchronous(instance.schedule_storage.connect) == 1
    for storage in storages:  # Dagster's own factories again: SQLite's default FULL
        connect = getattr(storage, "index_connection", None) or storage.connect
        assert _synchronous(connect) == 2


def test_a_rollback_journal_database_keeps_full(tmp_path: Path):
    from decguard_pipeline.defs.instance_sqlite import _engine

    engine = _engine(f"sqlite:///{tmp_path / 'rollback.db'}", {})
    with engine.begin() as connection:
        connection.execute(sa.text("CREATE TABLE t (x)"))
    with engine.connect() as connection:
        connection.invalidate()  # the next connection is a new one, through the hook
    with engine.connect() as connection:
        assert connection.execute(sa.text("PRAGMA synchronous")).scalar_one() == 2
    engine.dispose()


def test_the_creation_hook_is_gone_once_the_instance_is_open(home: Path):
    from alembic.script import ScriptDirectory

    from decguard_pipeline.defs.instance_sqlite import _on_connect

    own = ScriptDirectory.__dict__["from_config"]
    with open_instance() as instance:
        assert instance.get_runs(limit=1) == []
        assert not sa.event.contains(sa.Engine, "connect", _on_connect)
        assert ScriptDirectory.__dict__["from_config"] is own  # alembic's own again
        # a new database this process creates now keeps SQLite's rollback journal
        other = sa.create_engine(f"sqlite:///{home / 'other.db'}")
        with other.connect() as connection:
            assert connection.execute(sa.text("PRAGMA journal_mode")).scalar_one() == "delete"
        other.dispose()
    # a WAL database opened by anyone else in this process keeps SQLite's FULL
    engine = sa.create_engine(f"sqlite:///{home / 'history' / 'runs.db'}")
    with engine.connect() as connection:
        assert connection.execute(sa.text("PRAGMA journal_mode")).scalar_one() == "wal"
        assert connection.execute(sa.text("PRAGMA synchronous")).scalar_one() == 2
    engine.dispose()


RANDOM = {"run_storage_id"}  # a new uuid per instance


def _stored(home: Path) -> dict[str, tuple]:
    """What a new instance's databases hold: journal mode, schema, and every row without
    its times (a migration's completion time differs from one creation to the next) and
    the instance's random id."""
    import sqlite3

    out = {}
    for name in ("history/runs.db", "history/event_log.db", "schedules/schedules.db"):
        connection = sqlite3.connect(home / name)
        try:
            schema = sorted(connection.execute("SELECT type, name, sql FROM sqlite_master"))
            rows = {}
            for (table,) in connection.execute("SELECT name FROM sqlite_master WHERE type='table'"):
                columns = connection.execute(f"PRAGMA table_info('{table}')").fetchall()
                kept = ", ".join(
                    f'"{name}"'
                    for _, name, kind, *_ in columns
                    if kind.upper() not in ("TIMESTAMP", "DATETIME") and name not in RANDOM
                )
                rows[table] = sorted(
                    map(repr, connection.execute(f'SELECT {kept or 1} FROM "{table}"'))
                )
            mode = connection.execute("PRAGMA journal_mode").fetchone()[0]
        finally:
            connection.close()
        out[name] = (mode, schema, rows)
    return out


def test_a_new_instance_stores_what_dagster_alone_stores(tmp_path: Path, monkeypatch):
    """``instance_sqlite.creating`` (WAL before the schema, one kept connection per database)
    changes what creating a new instance costs, not what it stores."""
    import dagster as dg

    from decguard_pipeline.defs.instance import ensure_dagster_home

    ours, plain = tmp_path / "ours", tmp_path / "plain"
    monkeypatch.setenv("DAGSTER_HOME", str(ours))
    with open_instance() as instance:
        assert instance.get_runs(limit=1) == []
    monkeypatch.setenv("DAGSTER_HOME", str(plain))
    ensure_dagster_home()  # the same dagster.yaml, opened by Dagster without our hooks
    with dg.DagsterInstance.get() as instance:
        instance.get_runs(limit=1)
        instance.get_dynamic_partitions("_")
        instance.all_instigator_state()
    mine, theirs = _stored(ours), _stored(plain)
    assert mine == theirs
    assert {mode for mode, _, _ in mine.values()} == {"wal"}
    assert all(schema for _, schema, _ in mine.values())
    # every connection closed: each WAL was checkpointed into its database and deleted
    assert not list(ours.rglob("*.db-wal"))


def test_schema_answers_are_dagsters_and_only_a_yes_is_remembered(home: Path):
    import sqlite3

    with open_instance() as instance:
        storage, runs = instance.event_log_storage, instance.run_storage
        assert storage.has_table("dynamic_partitions") and storage.has_table("asset_keys")
        assert storage.has_asset_key_col("last_materialization_timestamp")
        assert not storage.has_asset_key_col("no_such_column")
        assert runs.has_run_stats_index_cols() and runs.has_backfill_id_column()
        assert not storage.has_table("added_later")
        # another process migrates the schema: the no is asked again, the new table is seen
        with sqlite3.connect(home / "history" / "event_log.db") as other:
            other.execute("CREATE TABLE added_later (x)")
        assert storage.has_table("added_later")
        with sqlite3.connect(home / "history" / "event_log.db") as other:
            other.execute("DROP TABLE added_later")  # (never done by Dagster)
        assert storage.has_table("added_later")  # the yes was remembered
    # Dagster's own answers, on its own connections
    assert not storage.has_table("added_later") and storage.has_table("asset_keys")
    assert storage.has_asset_key_col("last_materialization_timestamp")


# A partitioned asset with three checks: each check result looks up the materialisation it
# checked. With the tuned storage that look-up is made once per materialisation.


def _checked_asset():
    import dagster as dg

    parts = dg.StaticPartitionsDefinition(["a", "b"])
    specs = [dg.AssetCheckSpec(f"c{i}", asset="thing", partitions_def=parts) for i in range(3)]

    @dg.asset(partitions_def=parts, check_specs=specs)
    def thing(context: dg.AssetExecutionContext):
        yield dg.MaterializeResult(metadata={"partition": context.partition_key})
        for spec in specs:
            yield dg.AssetCheckResult(check_name=spec.name, passed=True)

    return thing


def _targets(instance, run_id: str) -> list[tuple[str, int]]:
    """(run id, storage id) of the materialisation each check of the run says it checked."""
    import dagster as dg

    out = []
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION):
        target = entry.dagster_event.event_specific_data.target_materialization_data
        out.append((target.run_id, target.storage_id))
    return out


def _storage_class():
    from dagster._core.storage.event_log.sql_event_log import SqlEventLogStorage

    return SqlEventLogStorage


def _latest(instance, partition: str) -> tuple[str, int]:
    """Dagster's own answer (the storage class's method, not the memo)."""
    import dagster as dg
    from dagster._core.event_api import AssetRecordsFilter

    record = _OWN_FETCH(
        instance.event_log_storage,
        AssetRecordsFilter(dg.AssetKey("thing"), [partition]),
        limit=1,
    ).records[0]
    return record.run_id, record.storage_id


_OWN_FETCH = _storage_class().fetch_materializations


def test_a_check_looks_up_the_materialisation_it_checked_once(home: Path, monkeypatch):
    import dagster as dg

    thing = _checked_asset()
    asked = []

    def counted(self, *args, **kwargs):
        asked.append(args[0])
        return _OWN_FETCH(self, *args, **kwargs)

    # before the instance opens: the memo of the tuned storage asks through this
    monkeypatch.setattr(_storage_class(), "fetch_materializations", counted)
    with open_instance() as instance:
        runs = []
        for partition in ("a", "b", "a"):  # "a" again: a new materialisation to point at
            asked.clear()
            result = dg.materialize([thing], instance=instance, partition_key=partition)
            assert result.success
            runs.append(result.run_id)
            expected = _latest(instance, partition)
            assert expected[0] == result.run_id
            assert _targets(instance, result.run_id) == [expected] * 3
            assert len(asked) == 1  # three checks, one look-up
        # a materialisation stored by another instance (another process) is not seen by
        # the memo until this process stores one of that asset: its own next run does
        with dg.DagsterInstance.from_config(str(home)) as other:
            other_run = dg.materialize([thing], instance=other, partition_key="b").run_id
        result = dg.materialize([thing], instance=instance, partition_key="b")
        assert _targets(instance, result.run_id) == [_latest(instance, "b")] * 3
        assert _latest(instance, "b")[0] == result.run_id != other_run


def test_other_questions_about_materialisations_are_dagsters(home: Path):
    import dagster as dg
    from dagster._core.event_api import AssetRecordsFilter

    thing = _checked_asset()
    with open_instance() as instance:
        for partition in ("a", "a", "b"):
            dg.materialize([thing], instance=instance, partition_key=partition)
        key = dg.AssetKey("thing")
        storage = instance.event_log_storage
        for question in (
            (AssetRecordsFilter(key, ["a"]), 2),
            (AssetRecordsFilter(key, ["a", "b"]), 1),
            (AssetRecordsFilter(key), 1),
            (key, 1),
        ):
            ours = storage.fetch_materializations(*question).records
            theirs = _OWN_FETCH(storage, *question).records
            assert [r.storage_id for r in ours] == [r.storage_id for r in theirs]
        assert len(storage.fetch_materializations(AssetRecordsFilter(key, ["a"]), 2).records) == 2
        instance.wipe_assets([key])
        assert storage.fetch_materializations(AssetRecordsFilter(key, ["b"]), 1).records == []
