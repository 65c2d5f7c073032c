"""Parallel runs within a per-server limit (issue 16 item 3).

``evaluate --workers 2`` runs targets in two worker processes, and the daemon launches the runs
its sensor requests; in both, the runs of one model server stay within the instance's
``run_queue.tag_concurrency_limits`` (one at a time by default). The model servers are real
loopback HTTP servers that count the requests in flight; every contract asks its backend one
case at a time, so two runs on one server at once show up as two requests in flight."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest
import yaml

from decguard_pipeline.defs.limits import BACKEND_TAG, server_of
from decguard_pipeline_tests.conftest import ROOT
from decguard_pipeline_tests.support.evaluate_places import (
    LABELS,
    SERVED,
    Place,
    finish,
    http,
    write_contract,
)

pytestmark = pytest.mark.slow

DELAY_MS = 500  # per request: a run of four cases keeps its server busy for two seconds


def one_at_a_time(folder: Path, url: str) -> None:
    """The four-case refund contract on ``url``, asking one case at a time."""
    path = write_contract(folder, http(url))
    one = "evaluation:\n  max_concurrency: 1\nrequirements:"
    path.write_text(path.read_text().replace("requirements:", one, 1))


def runs_by_contract(place: Place) -> dict[str, dg.RunRecord]:
    with dg.DagsterInstance.from_config(str(place.home)) as instance:
        records = instance.get_run_records()
    return {r.dagster_run.job_name.removeprefix("evaluate_"): r for r in records}


def overlap(a: dg.RunRecord, b: dg.RunRecord) -> bool:
    return a.start_time < b.end_time and b.start_time < a.end_time


def set_limit(home: Path, limit: int) -> None:
    config = home / "dagster.yaml"
    text = config.read_text()
    data = yaml.safe_load(text)
    (entry,) = data["run_queue"]["tag_concurrency_limits"]
    assert entry["key"] == BACKEND_TAG and entry["limit"] == 1  # what we generate
    entry["limit"] = limit
    config.write_text(text.split("\n", 1)[0] + "\n" + yaml.safe_dump(data))


def evaluate_three(tmp_path: Path, loopback, limit: int | None) -> tuple[Place, list, str]:
    """alpha and beta on one server, gamma on another; ``evaluate --workers 2``."""
    shared = loopback(SERVED, labels=LABELS, delay_ms=DELAY_MS)
    other = loopback(SERVED, labels=LABELS, delay_ms=DELAY_MS)
    place = Place(tmp_path)
    one_at_a_time(place.contracts / "alpha", shared.url)
    one_at_a_time(place.contracts / "beta", shared.url)
    one_at_a_time(place.contracts / "gamma", other.url)
    if limit is not None:  # the generated instance, its limit edited as a user would
        env = {**os.environ, **place.env()}
        subprocess.run([sys.executable, "-c", "from decguard_pipeline.defs.instance import "
                        "ensure_dagster_home as e; e()"], env=env, check=True)  # fmt: skip
        set_limit(place.home, limit)
    code, out, err = finish(place.spawn("--workers", "2"), timeout=300)
    assert code == 0, out + err
    return place, [shared, other], out


def test_evaluate_workers_keep_one_run_per_model_server(tmp_path, loopback):
    place, (shared, other), out = evaluate_three(tmp_path, loopback, None)
    for name in ("alpha", "beta", "gamma"):
        line = next(line for line in out.splitlines() if f" {name} " in line)
        assert line.split()[1:5] == [name, "default@tiny-v1", "0.750", "0.110"]
    runs = runs_by_contract(place)
    assert sorted(runs) == ["alpha", "beta", "gamma"]
    assert all(r.dagster_run.status == dg.DagsterRunStatus.SUCCESS for r in runs.values())
    port = shared.url.split(":")[2].split("/")[0]
    assert runs["alpha"].dagster_run.tags[BACKEND_TAG] == f"127.0.0.1:{port}"
    assert runs["beta"].dagster_run.tags[BACKEND_TAG] == f"127.0.0.1:{port}"
    assert shared.behaviour.max_in_flight == 1  # never two runs on the shared server
    assert not overlap(runs["alpha"], runs["beta"])
    # ... while the other server's run went on beside one of them: two workers at work
    assert overlap(runs["gamma"], runs["alpha"]) or overlap(runs["gamma"], runs["beta"])
    assert other.behaviour.max_in_flight == 1


def test_the_limit_is_what_keeps_them_apart(tmp_path, loopback):
    """The same evaluation with the instance's limit raised to two: both runs of the shared
    server start at once (so the test above would see it if the limit were not applied)."""
    place, (shared, _), _ = evaluate_three(tmp_path, loopback, limit=2)
    runs = runs_by_contract(place)
    assert overlap(runs["alpha"], runs["beta"])
    assert shared.behaviour.max_in_flight == 2


def test_server_of_a_backend():
    from decguard_pipeline.steps.contracts import discover_contracts

    entries = {e.key: e for e in discover_contracts(str(ROOT / "data" / "contracts"))}
    refund = entries["refund"]
    assert server_of(refund, "default") is None  # an in-process mock calls no server
    assert server_of(refund, "staging") == "localhost:8080"  # url: http://localhost:8080/decide
    assert server_of(refund, "gone") is None  # a target of a removed backend


@pytest.mark.postgres
def test_daemon_launched_runs_keep_one_run_per_model_server(
    pg_url: str, tmp_path: Path, loopback, monkeypatch
):
    """The real daemon on a PostgreSQL instance: its sensor requests both contracts' targets,
    the run queue launches them, one at a time on their shared server."""
    from decguard_pipeline.defs.instance import ensure_dagster_home

    shared = loopback(SERVED, labels=LABELS, delay_ms=DELAY_MS)
    place = Place(tmp_path)
    one_at_a_time(place.contracts / "alpha", shared.url)
    one_at_a_time(place.contracts / "beta", shared.url)
    # one sensor tick (the first, at once): a later tick's discovery would send its one-case
    # canary to the server while a run is in progress, which is not a second run
    env = {**place.env(), "DAGSTER_PG_URL": pg_url, "DECGUARD_SENSOR_INTERVAL_S": "3600"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    ensure_dagster_home()
    daemon = subprocess.Popen(
        [str(Path(sys.executable).with_name("dagster-daemon")), "run",
         "-w", str(ROOT / "workspace.yaml")],
        cwd=ROOT, env={**os.environ, **env}, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while True:
            with dg.DagsterInstance.from_config(str(place.home)) as instance:
                records = instance.get_run_records()
            done = [r for r in records if r.dagster_run.is_finished]
            if len(done) >= 2:
                break
            assert daemon.poll() is None, daemon.communicate()[0][-3000:]
            assert time.monotonic() < deadline, [r.dagster_run.status for r in records]
            time.sleep(1)
    finally:
        os.killpg(daemon.pid, signal.SIGTERM)  # the daemon and the code server it started
        try:
            log, _ = daemon.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(daemon.pid, signal.SIGKILL)
            log, _ = daemon.communicate()
    runs = {r.dagster_run.job_name.removeprefix("evaluate_"): r for r in records}
    assert sorted(runs) == ["alpha", "beta"], log[-3000:]
    for record in runs.values():
        assert record.dagster_run.status == dg.DagsterRunStatus.SUCCESS, log[-3000:]
        assert record.dagster_run.tags["decguard/trigger"] == "sensor"
    assert runs["alpha"].dagster_run.tags[BACKEND_TAG] == runs["beta"].dagster_run.tags[BACKEND_TAG]
    assert not overlap(runs["alpha"], runs["beta"])
    assert shared.behaviour.max_in_flight == 1


def children(pid: int) -> set[int]:
    """Every descendant of ``pid``: the workers are the fork server's children."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            text = (task / "children").read_text()
        except OSError:  # a thread that just ended
            continue
        for child in (int(p) for p in text.split()):
            found |= {child} | children(child)
    return found


def test_kill_evaluate_with_workers_then_the_next_one_recovers(tmp_path, loopback):
    """kill -9 of `evaluate --workers 2` while both workers are in a run: the workers end with
    it, their runs are marked failed by the next evaluation, which succeeds."""
    slow = loopback(SERVED, labels=LABELS, delay_ms=1500)
    other = loopback(SERVED, labels=LABELS, delay_ms=1500)
    place = Place(tmp_path)
    one_at_a_time(place.contracts / "alpha", slow.url)
    one_at_a_time(place.contracts / "gamma", other.url)
    process = place.spawn("--workers", "2")
    deadline = time.monotonic() + 120

    def deciding(server) -> bool:
        return any(r.get("case_id") != "canary" for r in list(server.behaviour.requests))

    while not (deciding(slow) and deciding(other)):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.02)
    workers = children(process.pid)
    assert len(workers) >= 2  # the two workers (and the fork server where they come from it)
    process.send_signal(signal.SIGKILL)
    process.wait()
    deadline = time.monotonic() + 30
    while any(Path(f"/proc/{pid}").exists() and _alive(pid) for pid in workers):
        assert time.monotonic() < deadline, "a worker outlived the killed evaluation"
        time.sleep(0.1)

    slow.behaviour.delay_s = other.behaviour.delay_s = 0
    code, out, err = finish(place.spawn("--workers", "2"), timeout=300)
    assert code == 0, out + err
    assert "marked 2 run(s) of a killed evaluation as failed" in err
    with dg.DagsterInstance.from_config(str(place.home)) as instance:
        statuses = sorted(r.status.value for r in instance.get_runs())
    assert statuses == ["FAILURE", "FAILURE", "SUCCESS", "SUCCESS"]


def _alive(pid: int) -> bool:
    """Not a zombie (a dead child not yet reaped still has a /proc entry)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")
