"""defs/instance_postgres.py without a server: which database a generated instance config
names (its variables read from the environment), and no lock where there is none to take.
The lock itself is tested on a real server in test_deploy_postgres.py."""

from __future__ import annotations

import pytest

from decguard_pipeline.defs.instance_config import generated
from decguard_pipeline.defs.instance_postgres import creation_lock, database_url


def test_the_url_a_generated_config_names(tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_PG_URL", "postgresql+psycopg2://me:secret@db.example:6543/runs")
    config = generated(tmp_path, {"DAGSTER_PG_URL": "x"})
    assert database_url(config) == "postgresql://me:secret@db.example:6543/runs"


def test_the_url_of_a_config_by_fields(tmp_path, monkeypatch):
    env = {"DAGSTER_PG_USERNAME": "me", "DAGSTER_PG_HOST": "db.example", "DAGSTER_PG_DB": "runs"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert database_url(generated(tmp_path, env)) == "postgresql://me@db.example:5432/runs"


@pytest.mark.parametrize(
    "config",
    [None, {}, {"storage": {"sqlite": {"base_dir": "x"}}},
     {"storage": {"postgres": {"postgres_url": {"env": "DECGUARD_TEST_UNSET_URL"}}}}],
)  # fmt: skip
def test_no_url_where_there_is_no_database_to_lock(config, tmp_path):
    assert database_url(config) is None
    assert database_url(generated(tmp_path, {})) is None  # SQLite


def test_an_unreachable_database_is_left_to_dagster():
    with creation_lock("postgresql://nobody@127.0.0.1:1/none"):
        pass  # no lock taken, no error: Dagster reports the database when it opens it
