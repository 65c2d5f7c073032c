"""Dagster on an S3 warehouse (issue 16 items 2 and 4): the sensor and the main job reading
and writing it, and many writers, one truth: two "machines" (two working folders, two
DAGSTER_HOMEs) share one PostgreSQL instance and one S3 warehouse, and evaluate different
contracts at the same moment. Afterwards either home lists both evaluations' runs, and ``sql``
on the warehouse sees every row exactly once.

PostgreSQL is Debian's server started by the ``postgres_server`` fixture, S3 is moto's standalone
server on loopback (support/object_store.py); both are reached only through the standard
variables (DAGSTER_PG_URL, AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ...)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline_tests.conftest import EXAMPLES
from decguard_pipeline_tests.support.evaluate_places import (
    LABELS,
    MOCK,
    SERVED,
    Place,
    finish,
    http,
    summary_line,
    write_contract,
)
from decguard_pipeline_tests.support.object_store import S3Server

pytestmark = [pytest.mark.slow, pytest.mark.s3]


@pytest.mark.postgres
def test_the_sensor_reads_an_s3_warehouse(s3_server, s3_bucket, pg_catalog, tmp_path, monkeypatch):
    from decguard_pipeline.definitions import build_definitions
    from decguard_pipeline.defs.instance import ensure_dagster_home
    from decguard_pipeline.defs.main_job import evaluate_all
    from decguard_pipeline.defs.resources import WarehouseResource
    from decguard_pipeline.steps.contracts import discover_contracts

    contracts = tmp_path / "contracts"
    shutil.copytree(EXAMPLES / "spam", contracts / "spam")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    ensure_dagster_home()
    wh = Warehouse(f"s3://{s3_bucket}/wh")
    entries = discover_contracts(str(contracts))
    defs = build_definitions(entries, warehouse_root=str(wh.root))
    instance = dg.DagsterInstance.get()  # not entered: see test_deploy_postgres
    try:

        def tick() -> dg.SensorResult:
            with dg.build_sensor_context(
                instance=instance, definitions=defs,
                resources={"warehouse": WarehouseResource(root=str(wh.root))},
            ) as context:  # fmt: skip
                return defs.resolve_sensor_def("model_versions")(context)

        first = tick()
        assert sorted(r.partition_key for r in first.run_requests) == [
            "candidate@spam-mock-v2", "default@spam-mock-v1"
        ]  # fmt: skip
        added = first.dynamic_partitions_requests[0]
        instance.add_dynamic_partitions(added.partitions_def_name, list(added.partition_keys))
        result = evaluate_all(defs, entries, instance, wh, backends=["default"])
        assert [o.success for o in result.outcomes] == [True], result.outcomes
        # the sensor found the evaluated target's registration in the bucket
        assert [r.partition_key for r in tick().run_requests] == ["candidate@spam-mock-v2"]
        evaluated = wh.query("SELECT DISTINCT target FROM runs WHERE contract = 'spam'")
        assert evaluated.to_pylist() == [{"target": "default@spam-mock-v1"}]
    finally:
        instance.dispose()


@pytest.mark.postgres
def test_the_response_cache_on_an_s3_warehouse(
    s3_server, s3_bucket, pg_catalog, tmp_path, loopback
):
    """A model server behind an http backend: the first evaluation asks it every case and
    keeps the answers in the bucket's ``responses`` table; the second asks it nothing."""
    place = Place(tmp_path)
    server = loopback(SERVED, labels=LABELS)
    write_contract(place.contracts / "tiny", http(server.url))
    root = f"s3://{s3_bucket}/wh"
    env = {**os.environ, **s3_server.env(), **place.env(), "DECGUARD_WAREHOUSE": root}
    asked = []
    for _ in range(2):
        before = len([r for r in server.behaviour.requests if r.get("case_id") != "canary"])
        done = subprocess.run(
            [sys.executable, "-m", "decguard_pipeline", "evaluate"],
            env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert summary_line(done.stdout, "default@tiny-v1").split()[3:5] == ["0.750", "0.110"]
        now = len([r for r in server.behaviour.requests if r.get("case_id") != "canary"])
        asked.append(now - before)
    assert asked == [4, 0]
    assert not any(".journal" in k for k in s3_server.keys(s3_bucket, "wh/"))
    stored = Warehouse(root).query("SELECT count(DISTINCT key) AS n FROM responses")
    assert stored.to_pylist() == [{"n": 4}]


@pytest.mark.postgres
def test_two_machines_one_postgres_instance_one_s3_warehouse(
    s3_server: S3Server, s3_bucket: str, pg_url: str, pg_catalog, tmp_path: Path, monkeypatch
):
    root = f"s3://{s3_bucket}/team/wh"
    a, b = Place(tmp_path / "a"), Place(tmp_path / "b")
    write_contract(a.contracts / "tiny", MOCK)
    shutil.copytree(EXAMPLES / "spam", b.contracts / "spam")

    def spawn(place: Place) -> subprocess.Popen[str]:
        env = {**os.environ, **s3_server.env(), **place.env()}
        env.update(DAGSTER_PG_URL=pg_url, DECGUARD_WAREHOUSE=root)
        return subprocess.Popen(
            [sys.executable, "-m", "decguard_pipeline", "evaluate"],
            cwd=place.home.parent,  # each machine's own working folder
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

    processes = [spawn(a), spawn(b)]  # at the same time
    results = [finish(p, timeout=600) for p in processes]
    for code, out, err in results:
        assert code == 0, out + err
        assert f"warehouse {root}" in out and "(postgres)" in out
    assert "default@tiny-v1" in results[0][1] and "default@spam-mock-v1" in results[1][1]

    # either home lists both machines' runs, all successful
    seen = []
    for place in (a, b):
        monkeypatch.setenv("DAGSTER_PG_URL", pg_url)
        with dg.DagsterInstance.from_config(str(place.home)) as instance:
            runs = instance.get_runs()
            seen.append({(r.job_name, r.tags["dagster/partition"], r.run_id) for r in runs})
            assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
    assert seen[0] == seen[1]
    assert {(job, target) for job, target, _ in seen[0]} == {
        ("evaluate_tiny", "default@tiny-v1"),
        ("evaluate_spam", "default@spam-mock-v1"),
        ("evaluate_spam", "candidate@spam-mock-v2"),
    }
    run_ids = {run_id for _, _, run_id in seen[0]}

    # the warehouse: every row once, each written by one of those runs
    wh = Warehouse(root)
    rows = wh.query(
        "SELECT contract, target, count(*) AS n, count(DISTINCT case_id) AS cases, "
        "list(DISTINCT run_id) AS runs FROM case_results GROUP BY ALL ORDER BY ALL"
    ).to_pylist()
    assert [(r["contract"], r["target"]) for r in rows] == [
        ("spam", "candidate@spam-mock-v2"), ("spam", "default@spam-mock-v1"),
        ("tiny", "default@tiny-v1"),
    ]  # fmt: skip
    assert all(r["n"] == r["cases"] for r in rows)  # every case once
    assert {run for r in rows for run in r["runs"]} == run_ids
    latest = wh.query(
        "SELECT DISTINCT contract, target, run_id FROM latest_metrics WHERE contract <> '_'"
    ).to_pylist()
    assert {(r["contract"], r["target"], r["run_id"]) for r in latest} == {
        (job.removeprefix("evaluate_"), target, run) for job, target, run in seen[0]
    }
    # and through the command an analyst runs, from a third place
    sql = subprocess.run(
        [sys.executable, "-m", "decguard_pipeline", "sql", "-f", "csv",
         "SELECT count(DISTINCT run_id) AS n FROM runs WHERE contract <> '_'"],
        env={**os.environ, **s3_server.env(), **pg_catalog, "DECGUARD_WAREHOUSE": root},
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert sql.returncode == 0, sql.stderr
    assert sql.stdout.split() == ["n", str(len(run_ids))]
