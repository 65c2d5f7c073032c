"""The Dagster instance on a real PostgreSQL server (issue 16 items 1 and 4): ``evaluate``,
the sensor, the schedule and dead-run recovery on it, and two instance folders ("two
machines") sharing it while they evaluate different contracts at the same time.

The server is Debian's PostgreSQL started by the ``postgres_server`` fixture (a temporary data
directory, a free loopback port, run as ``nobody`` when the tests run as root); every test
gets its own database. The warehouse is the local one for now (object storage comes later)."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest

from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline_tests.conftest import EXAMPLES, ROOT
from decguard_pipeline_tests.support.evaluate_places import (
    LABELS,
    MOCK,
    SERVED,
    Place,
    finish,
    http,
    summary_line,
    unfinished,
    write_contract,
)
from decguard_pipeline_tests.support.postgres import Server

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


def on_postgres(place: Place, url: str) -> dict[str, str]:
    return {**place.env(), "DAGSTER_PG_URL": url}


def spawn(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "decguard_pipeline", "evaluate", *args],
        env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def database(url: str) -> str:
    return url.rsplit("/", 1)[1]


def open_home(
    home: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str]
) -> dg.DagsterInstance:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return dg.DagsterInstance.from_config(str(home))


def test_evaluate_on_postgres_records_runs_events_and_checks(
    postgres_server: Server, pg_url: str, tmp_path: Path, monkeypatch
):
    place = Place(tmp_path)
    write_contract(place.contracts / "tiny", MOCK)
    code, out, err = finish(spawn(on_postgres(place, pg_url)), timeout=240)
    assert code == 0, out + err
    assert summary_line(out, "default@tiny-v1").split()[3:5] == ["0.750", "0.110"]
    assert f"dagster home {place.home} (postgres)" in out

    # the instance config names the variable; neither the URL nor the password is written
    config = (place.home / "dagster.yaml").read_text()
    assert "env: DAGSTER_PG_URL" in config
    assert postgres_server.password not in config and "postgresql://" not in config
    # nothing went to SQLite: no event log, no run database under the home
    assert not list(place.home.rglob("*.db")) and not (place.home / "history").exists()

    # what PostgreSQL holds, read with plain SQL
    db = database(pg_url)
    runs = postgres_server.query(db, "SELECT run_id, pipeline_name, status FROM runs")
    assert [(name, status) for _, name, status in runs] == [("evaluate_tiny", "SUCCESS")]
    run_id = runs[0][0]
    (events,) = postgres_server.query(
        db, f"SELECT count(*) FROM event_logs WHERE run_id = '{run_id}'"
    )[0]
    assert events > 20
    materialized = postgres_server.query(
        db, "SELECT DISTINCT asset_key FROM event_logs WHERE dagster_event_type = "
        f"'ASSET_MATERIALIZATION' AND run_id = '{run_id}'"
    )  # fmt: skip
    assert '["tiny", "case_results"]' in {key for (key,) in materialized}
    checks = postgres_server.query(
        db, f"SELECT check_name, execution_status FROM asset_check_executions "
        f"WHERE run_id = '{run_id}'"
    )  # fmt: skip
    assert checks and {status for _, status in checks} <= {"SUCCEEDED", "FAILED"}

    # and through Dagster's API from the same home
    with open_home(place.home, monkeypatch, {"DAGSTER_PG_URL": pg_url}) as instance:
        assert [r.run_id for r in instance.get_runs()] == [run_id]
        key = dg.AssetKey(["tiny", "case_results"])
        assert instance.get_latest_materialization_event(key).run_id == run_id
        assert instance.get_dynamic_partitions("tiny_targets") == ["default@tiny-v1"]


def test_the_dagster_pg_variables_and_a_missing_one(
    postgres_server: Server, tmp_path: Path, monkeypatch, ours
):
    db = f"v_{os.getpid()}_{random.randrange(10**6)}"
    postgres_server.create_database(db)
    place = Place(tmp_path).use(monkeypatch)
    write_contract(place.contracts / "tiny", MOCK)
    for name, value in postgres_server.env(db).items():
        monkeypatch.setenv(name, value)
    ran = ours("evaluate")
    assert ran.exit_code == 0, ran.stdout + ran.stderr
    config = (place.home / "dagster.yaml").read_text()
    assert "env: DAGSTER_PG_PASSWORD" in config and postgres_server.password not in config
    assert [s for (s,) in postgres_server.query(db, "SELECT status FROM runs")] == ["SUCCESS"]

    # the home is a PostgreSQL one now: without its variables it is an error, not SQLite
    monkeypatch.delenv("DAGSTER_PG_PASSWORD")
    monkeypatch.delenv("DAGSTER_PG_HOST")
    ran = ours("evaluate")
    assert ran.exit_code == 2
    assert "DAGSTER_PG_USERNAME" in ran.stderr and "DAGSTER_PG_HOST" in ran.stderr
    for name in postgres_server.env(db):
        monkeypatch.delenv(name, raising=False)
    ran = ours("evaluate")
    assert ran.exit_code == 2 and "keeps runs in PostgreSQL" in ran.stderr, ran.stderr
    assert "Traceback" not in ran.stderr


def test_sensor_and_schedule_against_the_postgres_instance(
    pg_url: str, tmp_path: Path, monkeypatch
):
    from decguard_pipeline.definitions import build_definitions
    from decguard_pipeline.defs.instance import ensure_dagster_home, storage_kind
    from decguard_pipeline.defs.limits import BACKEND_TAG
    from decguard_pipeline.defs.main_job import evaluate_all
    from decguard_pipeline.defs.resources import WarehouseResource
    from decguard_pipeline.steps.contracts import discover_contracts

    contracts = tmp_path / "contracts"
    shutil.copytree(EXAMPLES / "spam", contracts / "spam")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DAGSTER_PG_URL", pg_url)
    ensure_dagster_home()
    wh = Warehouse(tmp_path / "wh")
    entries = discover_contracts(str(contracts))
    defs = build_definitions(entries, warehouse_root=str(wh.root))
    # not entered (`with instance`): an entered instance becomes the process's current
    # definitions-state storage, which a later test's definitions would then read
    instance = dg.DagsterInstance.get()
    try:
        assert storage_kind(instance) == "postgres"

        def tick() -> dg.SensorResult:  # contexts closed in order: they hold instance state
            with dg.build_sensor_context(
                instance=instance, definitions=defs,
                resources={"warehouse": WarehouseResource(root=str(wh.root))},
            ) as context:  # fmt: skip
                return defs.resolve_sensor_def("model_versions")(context)

        first = tick()
        requested = {r.partition_key: r.tags for r in first.run_requests}
        assert sorted(requested) == ["candidate@spam-mock-v2", "default@spam-mock-v1"]
        assert BACKEND_TAG not in requested["default@spam-mock-v1"]  # a mock calls no server
        added = first.dynamic_partitions_requests[0]
        instance.add_dynamic_partitions(added.partitions_def_name, list(added.partition_keys))

        result = evaluate_all(defs, entries, instance, wh, backends=["default"])
        assert [o.success for o in result.outcomes] == [True]
        assert [r.partition_key for r in tick().run_requests] == ["candidate@spam-mock-v2"]

        schedule = defs.resolve_schedule_def("nightly_spam")
        at = datetime(2026, 12, 1, 2, tzinfo=UTC)
        with dg.build_schedule_context(
            instance=instance, scheduled_execution_time=at, repository_def=defs.get_repository_def()
        ) as context:
            nightly = schedule.evaluate_tick(context).run_requests
        assert sorted(r.partition_key for r in nightly) == [
            "candidate@spam-mock-v2", "default@spam-mock-v1"
        ]  # fmt: skip
        assert all(BACKEND_TAG not in r.tags for r in nightly)
        assert [r.status for r in instance.get_runs()] == [dg.DagsterRunStatus.SUCCESS]
    finally:
        instance.dispose()


def test_dead_run_recovery_on_postgres(pg_url: str, tmp_path: Path, loopback, monkeypatch):
    from decguard_pipeline.defs.instance import dead_runs_sensor

    place = Place(tmp_path)
    server = loopback(SERVED, labels=LABELS, delay_ms=1500)
    write_contract(place.contracts / "tiny", http(server.url))
    env = on_postgres(place, pg_url)
    process = spawn(env)
    deadline = time.monotonic() + 120
    while not any(r.get("case_id") != "canary" for r in list(server.behaviour.requests)):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    with open_home(place.home, monkeypatch, {"DAGSTER_PG_URL": pg_url}) as instance:
        assert unfinished(list(instance.get_runs()))  # left STARTED in PostgreSQL
        with dg.build_sensor_context(instance=instance) as context:
            dead_runs_sensor()(context)
        assert unfinished(list(instance.get_runs())) == []
        (failed,) = instance.get_runs()
        assert failed.status == dg.DagsterRunStatus.FAILURE

    server.behaviour.delay_s = 0
    code, out, err = finish(spawn(env), timeout=240)
    assert code == 0, out + err
    assert "marked" not in err  # the sensor already recovered it
    assert summary_line(out, "default@tiny-v1").split()[3:5] == ["0.750", "0.110"]


def test_two_homes_share_one_postgres_instance(
    postgres_server: Server, pg_url: str, tmp_path: Path, monkeypatch
):
    """Two "machines" (working folders, DAGSTER_HOMEs) evaluate different contracts at the same
    moment on a fresh database: both create its tables, both succeed, and either home sees
    both evaluations; the shared warehouse holds each row once."""
    wh = tmp_path / "wh"
    a, b = Place(tmp_path / "a"), Place(tmp_path / "b")
    write_contract(a.contracts / "tiny", MOCK)
    shutil.copytree(EXAMPLES / "spam", b.contracts / "spam")
    envs = [{**on_postgres(p, pg_url), "DECGUARD_WAREHOUSE": str(wh)} for p in (a, b)]
    processes = [spawn(env) for env in envs]
    results = [finish(p, timeout=300) for p in processes]
    for code, out, err in results:
        assert code == 0, out + err
    assert "default@tiny-v1" in results[0][1] and "default@spam-mock-v1" in results[1][1]

    seen = []
    for place in (a, b):
        with open_home(place.home, monkeypatch, {"DAGSTER_PG_URL": pg_url}) as instance:
            runs = instance.get_runs()
            seen.append({(r.job_name, r.tags["dagster/partition"], r.run_id) for r in runs})
            assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
    assert seen[0] == seen[1]
    assert {(job, target) for job, target, _ in seen[0]} == {
        ("evaluate_tiny", "default@tiny-v1"),
        ("evaluate_spam", "default@spam-mock-v1"),
        ("evaluate_spam", "candidate@spam-mock-v2"),
    }
    rows = (
        Warehouse(wh)
        .query(
            "SELECT contract, target, count(*) AS n, count(DISTINCT case_id) AS cases "
            "FROM case_results GROUP BY ALL ORDER BY ALL"
        )
        .to_pylist()
    )
    assert [(r["contract"], r["target"]) for r in rows] == [
        ("spam", "candidate@spam-mock-v2"), ("spam", "default@spam-mock-v1"),
        ("tiny", "default@tiny-v1"),
    ]  # fmt: skip
    assert all(r["n"] == r["cases"] for r in rows)  # every case once


def test_the_deploy_template_opens_on_postgres(postgres_server: Server, tmp_path, monkeypatch):
    from decguard_pipeline.defs.instance import ensure_dagster_home, storage_kind
    from decguard_pipeline.defs.limits import BACKEND_LIMIT

    url = postgres_server.create_database()
    home = tmp_path / "home"
    home.mkdir()
    template = ROOT / "deploy" / "dagster.yaml"
    shutil.copy(template, home / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    ensure_dagster_home()  # a file without our header is the user's: left as it is
    assert (home / "dagster.yaml").read_text() == template.read_text()
    with open_home(home, monkeypatch, postgres_server.env(database(url))) as instance:
        assert storage_kind(instance) == "postgres"
        instance.add_dynamic_partitions("probe", ["a"])
        queue = instance.get_concurrency_config().run_queue_config
        assert BACKEND_LIMIT in queue.tag_concurrency_limits
    assert postgres_server.query(database(url), "SELECT count(*) FROM dynamic_partitions") == [(1,)]


_OPEN = (
    "from decguard_pipeline.defs.instance import open_for_runs\n"
    "instance, undo = open_for_runs()\n"
    "assert instance.get_runs(limit=1) == []\n"
    "undo()\n"
    "instance.dispose()\n"
    "print('opened')\n"
)


def _opening(place: Place, url: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _OPEN], env={**os.environ, **on_postgres(place, url)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_a_fresh_database_is_opened_under_its_advisory_lock(pg_url: str, tmp_path: Path):
    """Opening waits while another machine holds the database's creation lock, then
    creates the tables; held by nobody, the lock is free again."""
    import psycopg2

    from decguard_pipeline.defs.instance_postgres import LOCK_KEY

    holder = psycopg2.connect(pg_url)
    holder.autocommit = True
    with holder.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s)", (LOCK_KEY,))
    opening = _opening(Place(tmp_path / "a"), pg_url)
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            opening.wait(timeout=4)  # a whole opening takes well under a second here
        holder.close()  # the other machine is done
        out, err = opening.communicate(timeout=120)
        assert opening.returncode == 0 and "opened" in out, err
    finally:
        opening.kill()
        holder.close()
    check = psycopg2.connect(pg_url)
    try:
        with check.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s)", (LOCK_KEY,))
            assert cursor.fetchone() == (True,)
            cursor.execute("SELECT count(*) FROM runs")
            assert cursor.fetchone() == (0,)
    finally:
        check.close()


def test_a_holder_that_hangs_delays_an_opening_only_so_long(pg_url: str, monkeypatch):
    import psycopg2

    from decguard_pipeline.defs import instance_postgres

    holder = psycopg2.connect(pg_url)
    holder.autocommit = True
    try:
        with holder.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)", (instance_postgres.LOCK_KEY,))
        monkeypatch.setattr(instance_postgres, "WAIT_S", 0.5)
        start = time.monotonic()
        with instance_postgres.creation_lock(pg_url):
            waited = time.monotonic() - start
        assert 0.5 <= waited < 10
    finally:
        holder.close()
