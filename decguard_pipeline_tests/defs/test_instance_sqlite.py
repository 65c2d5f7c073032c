"""The SQLite instance tuned for the runs of this process: WAL commits without an fsync each,
and no checkpoint after every event (defs/instance_sqlite.py)."""

from pathlib import Path

import pytest
import sqlalchemy as sa

from decguard_pipeline.defs.instance import open_instance


def _synchronous(path: Path) -> int:
    engine = sa.create_engine(f"sqlite:///{path}", poolclass=sa.pool.NullPool)
    with engine.connect() as connection:
        return connection.execute(sa.text("PRAGMA synchronous")).scalar_one()


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_the_wal_outlives_each_write_while_the_instance_is_open(home: Path):
    wal = home / "history" / "event_log.db-wal"
    with open_instance() as instance:
        instance.add_dynamic_partitions("p", ["a"])
        # Dagster's connection for that write is closed, and was not the last one: no
        # checkpoint deleted the WAL, the write is in it
        assert wal.exists() and wal.stat().st_size > 0
        assert instance.get_dynamic_partitions("p") == ["a"]
    # the held connections are gone with the instance: the last close checkpoints
    assert not wal.exists()
    with open_instance() as instance:
        assert instance.get_dynamic_partitions("p") == ["a"]


def test_wal_databases_commit_with_synchronous_normal(home: Path, tmp_path: Path):
    with open_instance():
        for name in ("runs.db", "event_log.db"):
            assert _synchronous(home / "history" / name) == 1  # NORMAL
    rollback = tmp_path / "rollback.db"  # a rollback-journal database keeps the default FULL
    engine = sa.create_engine(f"sqlite:///{rollback}", poolclass=sa.pool.NullPool)
    with engine.begin() as connection:
        connection.execute(sa.text("CREATE TABLE t (x)"))
    assert _synchronous(rollback) == 2
