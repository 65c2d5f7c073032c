"""A ``dagster.yaml`` (the user's own, not one decguard-pipeline generated) naming variables
that are not set: every command that opens the instance says which, in a message naming the
file, exit 2. Before, Dagster's DagsterInvalidConfigError ended it as an internal error."""

from __future__ import annotations

from pathlib import Path

import pytest

from decguard_pipeline_tests.conftest import EXAMPLES

POSTGRES_BY_FIELDS = """\
storage:
  postgres:
    postgres_db:
      username: {env: DAGSTER_PG_USERNAME}
      password: {env: DAGSTER_PG_PASSWORD}
      hostname: {env: DAGSTER_PG_HOST}
      db_name: {env: DAGSTER_PG_DB}
      port: 5432
"""
PG_VARS = ("DAGSTER_PG_USERNAME", "DAGSTER_PG_PASSWORD", "DAGSTER_PG_HOST", "DAGSTER_PG_DB")


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "dagster home"
    folder.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(folder))
    monkeypatch.setenv("DECGUARD_CONTRACTS", str(EXAMPLES / "refund"))
    monkeypatch.setenv("DECGUARD_WAREHOUSE", str(tmp_path / "wh"))
    for name in (*PG_VARS, "DAGSTER_PG_URL"):
        monkeypatch.delenv(name, raising=False)
    return folder


@pytest.mark.parametrize("command", [["evaluate"], ["ui", "--port", "0"]])
def test_unset_variables_of_the_users_dagster_yaml_are_named(home, ours, command):
    (home / "dagster.yaml").write_text(POSTGRES_BY_FIELDS)
    ran = ours(*command)
    assert (ran.exit_code, ran.stderr) == (
        2,
        f"error: dagster.yaml in {home} names DAGSTER_PG_USERNAME, DAGSTER_PG_PASSWORD, "
        "DAGSTER_PG_HOST, DAGSTER_PG_DB, which are not set: set them, or point DAGSTER_HOME "
        "at another folder (docs/deploy.md)\n",
    )
    assert (home / "dagster.yaml").read_text() == POSTGRES_BY_FIELDS  # the user's: untouched


def test_only_the_unset_ones_are_named_and_no_value_is_shown(home, ours, monkeypatch):
    (home / "dagster.yaml").write_text(POSTGRES_BY_FIELDS)
    for name in PG_VARS[1:]:
        monkeypatch.setenv(name, f"value-of-{name}")
    ran = ours("evaluate")
    assert (ran.exit_code, ran.stderr) == (
        2,
        f"error: dagster.yaml in {home} names DAGSTER_PG_USERNAME, which is not set: set it, "
        "or point DAGSTER_HOME at another folder (docs/deploy.md)\n",
    )
    assert "value-of-" not in ran.stdout + ran.stderr


def test_a_dagster_yaml_that_is_not_yaml(home, ours):
    (home / "dagster.yaml").write_text("storage: [unclosed\n")
    ran = ours("evaluate")
    assert ran.exit_code == 2
    assert ran.stderr.startswith(f"error: dagster.yaml in {home} is not valid YAML:\n  ")
    assert "Traceback" not in ran.stderr and "internal error" not in ran.stderr
