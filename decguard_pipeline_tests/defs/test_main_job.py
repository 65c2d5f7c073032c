"""``decguard-pipeline evaluate`` under failure (issue 10 items 2, 3, 4, 11, 12): the summary
reads the rows of its own runs only, a broken run is an error (exit 2) and a failing gate a
verdict, a bad contract does not stop the others, the instance config monitors runs, and a
killed or parallel ``evaluate`` leaves nothing that breaks the next one.

The crash and concurrency tests run ``evaluate`` as real processes on a temporary instance
and warehouse, with a four-case contract (``tiny``) and two production days."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from decguard_pipeline_tests.support.evaluate_places import (
    DAYS,
    LABELS,
    MOCK,
    SERVED,
    VIEWS,
    Place,
    finish,
    http,
    summary_line,
    unfinished,
    write_contract,
)


def test_no_contracts_is_a_clear_error_with_exit_2(tmp_path, monkeypatch, ours):
    place = Place(tmp_path).use(monkeypatch)
    place.contracts.mkdir()
    ran = ours("evaluate", "--contracts", place.contracts)
    assert ran.exit_code == 2
    assert ran.stderr.startswith(f"error: no contracts found in {place.contracts}")


# -- item 11: one bad contract -----------------------------------------------------------------


def test_a_bad_contract_is_reported_and_the_others_still_run(tmp_path, monkeypatch, ours):
    place = Place(tmp_path).use(monkeypatch)
    write_contract(place.contracts / "tiny", MOCK)
    bad = write_contract(place.contracts / "bad", MOCK)
    (bad.parent / "cases.jsonl").unlink()  # loads, but cannot be evaluated
    ran = ours("evaluate", "--contracts", f"{bad.parent}{os.pathsep}{place.contracts / 'tiny'}")
    assert ran.exit_code == 2
    assert "BROKEN   bad: " in ran.stdout and "cases.jsonl: cannot read dataset" in ran.stdout
    assert "error: bad: " in ran.stderr
    row = summary_line(ran.stdout, "default@tiny-v1").split()
    assert row[:5] == ["PASS", "tiny", "default@tiny-v1", "0.750", "0.110"]


# -- item 2: a run whose backend failed on every case ------------------------------------------


def test_backend_failing_every_case_is_an_error_not_the_previous_numbers(
    tmp_path, monkeypatch, ours, ref, loopback
):
    place = Place(tmp_path).use(monkeypatch)
    folder = place.contracts / "tiny"
    contract = write_contract(folder, MOCK, ids=lambda i: f"c{i}-status=500")
    first = ours("evaluate", "--fail-on-gate")
    assert first.exit_code == 0, first.stderr
    assert summary_line(first.stdout, "default@tiny-v1").split()[3:5] == ["0.750", "0.110"]

    # the same target (backend default, model tiny-v1) now behind a server answering HTTP 500
    # to every golden case (the canary, case id "canary", is answered)
    server = loopback(SERVED, labels=LABELS)
    write_contract(folder, http(server.url), ids=lambda i: f"c{i}-status=500")
    second = ours("evaluate", "--fail-on-gate")
    assert second.exit_code == 2
    line = summary_line(second.stdout, "default@tiny-v1")
    assert "ERROR" in line and "0.750" not in line and "0.110" not in second.stdout
    # the same message as `test` (ours and DecGuard's) gives for that backend
    for cli in (ours, ref):
        tested = cli("test", contract)
        assert tested.exit_code == 2
        message = tested.stderr.strip().removeprefix("error: ")
        assert message.startswith("backend 'default' failed on every case; first error: ")
        assert f"error: tiny/default@tiny-v1: case_results: {message}" in second.stderr
    assert line.startswith("ERROR") and f"  case_results: {message}" in line


def test_summary_reads_only_the_rows_of_its_own_runs(tmp_path, monkeypatch):
    """A newer run of the same target and days (another process, the sensor) writes other
    numbers and verdicts: this evaluation's summary is unaffected."""
    from decguard_pipeline.definitions import build_definitions
    from decguard_pipeline.defs.main_job import evaluate_all
    from decguard_pipeline.steps.contracts import discover_contracts
    from decguard_pipeline.steps.summary import summarise, summarise_production

    place = Place(tmp_path, days=True).use(monkeypatch)
    write_contract(place.contracts / "tiny", MOCK)
    entries = discover_contracts()
    defs = build_definitions(entries, warehouse_root=str(place.wh.root))
    with dg.DagsterInstance.ephemeral() as instance:
        result = evaluate_all(defs, entries, instance, place.wh)
    rows, days = summarise(place.wh, result), summarise_production(place.wh, result)
    assert [(r["accuracy"], r["verdict"]) for r in rows] == [(0.75, "pass")]
    assert [(d["day"], d["status"]) for d in days] == [(DAYS[0], "pass"), (DAYS[1], "fail")]

    later = {"run_id": "someone-else"}
    (outcome,) = result.outcomes
    for table in ("metrics", "gate_results", "diffs", "regression_checks", "verdicts"):
        own = place.wh.read_run(table, "tiny", outcome.target, outcome.run_id).to_pylist()
        other = [_newer(r, later, metric_value=0.125, status="fail") for r in own]
        place.wh.write(table, other, contract="tiny", target=outcome.target,
                       run_id="someone-else", recorded_at=other[0]["recorded_at"])  # fmt: skip
    for day in result.production:
        own = place.wh.read_run("production_runs", "tiny", day.target, day.run_id).to_pylist()
        other = [_newer(r, later, status="fail") for r in own]
        place.wh.write("production_runs", other, contract="tiny", target=day.target,
                       run_id="someone-else", recorded_at=other[0]["recorded_at"])  # fmt: skip
    assert place.wh.read_latest("metrics", "tiny", outcome.target)["run_id"][0].as_py() == (
        "someone-else"
    )
    assert summarise(place.wh, result) == rows
    assert summarise_production(place.wh, result) == days


def _newer(row: dict[str, Any], changes: dict[str, Any], **values: Any) -> dict[str, Any]:
    row = {**row, **changes, "recorded_at": row["recorded_at"] + timedelta(hours=1)}
    if "value" in row and row.get("metric") == "accuracy":
        row["value"] = values["metric_value"]
    if "status" in row:
        row["status"] = values["status"]
    if "accuracy" in row:  # the verdicts row's headline number
        row["accuracy"] = values.get("metric_value")
    return row


# -- item 4: the instance config ---------------------------------------------------------------


def test_generated_instance_monitors_runs_and_ours_is_upgraded(tmp_path, monkeypatch):
    from decguard_pipeline.defs.instance import HEADER, ensure_dagster_home

    home = tmp_path / "home"
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    ensure_dagster_home()
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert instance.run_monitoring_enabled
        assert instance.run_monitoring_max_resume_run_attempts == 0  # no resume: default launcher
        assert instance.get_settings("python_logs") == {"python_log_level": "INFO"}  # quiet

    # a file generated by an earlier version (our header, no monitoring) is upgraded in place
    config = home / "dagster.yaml"
    old = f"{HEADER}\ntelemetry:\n  enabled: false\nrun_queue:\n  max_concurrent_runs: 2\n"
    config.write_text(old)
    ensure_dagster_home()
    assert config.read_text().startswith(HEADER)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert instance.run_monitoring_enabled
        assert instance.get_concurrency_config().run_queue_config.max_concurrent_runs == 2
        assert instance.get_settings("python_logs") == {"python_log_level": "INFO"}
    # a user's own file is never touched
    mine = "# my instance\ntelemetry:\n  enabled: false\n"
    config.write_text(mine)
    ensure_dagster_home()
    assert config.read_text() == mine


def test_process_liveness_of_a_run(tmp_path):
    from decguard_pipeline.defs.instance import PROCESS_TAG, owner_tags, process_gone

    mine = owner_tags()
    assert list(mine) == [PROCESS_TAG]  # one tag: the run's verdict tag stays in sight
    assert not process_gone(mine)
    pid, _, rest = mine[PROCESS_TAG].partition("@")
    assert pid == str(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert process_gone({PROCESS_TAG: f"{child.pid}@{rest}"})
    if " started " in rest:  # same pid, other start time: the pid was reused
        host, started = rest.split(" started ")
        assert process_gone({PROCESS_TAG: f"{pid}@{host} started {int(started) + 1}"})
    # a process of another host cannot be judged from here
    assert not process_gone({PROCESS_TAG: f"{child.pid}@elsewhere"})
    assert not process_gone({})  # a run not started by `evaluate`
    assert not process_gone({PROCESS_TAG: "not a process"})
    # the three tags of older versions are still read
    host = rest.split(" started ")[0]
    assert process_gone({"decguard/pid": str(child.pid), "decguard/host": host})
    assert not process_gone({"decguard/pid": str(os.getpid()), "decguard/host": host})


# -- crashes -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_kill_mid_request_then_query_and_evaluate_succeed(tmp_path, loopback):
    place = Place(tmp_path)
    server = loopback(SERVED, labels=LABELS, delay_ms=1500)
    write_contract(place.contracts / "tiny", http(server.url))
    process = place.spawn()
    deadline = time.monotonic() + 60
    while not any(r.get("case_id") != "canary" for r in list(server.behaviour.requests)):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.02)
    time.sleep(random.uniform(0, 1.0))  # at a random point of the golden cases' requests
    assert process.poll() is None
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert unfinished(place.runs())  # the run the process was executing stays STARTED

    server.behaviour.delay_s = 0
    place.query_every_view()
    code, out, err = finish(place.spawn())
    assert code == 0, err
    assert "marked 1 run(s) of a killed evaluation as failed" in err
    assert summary_line(out, "default@tiny-v1").split()[3:5] == ["0.750", "0.110"]
    assert unfinished(place.runs()) == []
    place.query_every_view()


@pytest.mark.slow
def test_kill_mid_write_then_the_daemon_and_evaluate_recover(tmp_path):
    place = Place(tmp_path, days=True)
    write_contract(place.contracts / "tiny", MOCK)
    place.wh.query("SELECT 1")  # the catalog exists
    first = commits(place.wh.root)
    stop_after = random.randint(1, 4)  # a clean run of tiny commits more than that
    process = place.spawn()
    deadline = time.monotonic() + 120
    while commits(place.wh.root) - first < stop_after:
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.001)
    process.send_signal(signal.SIGKILL)
    process.wait()

    # the daemon's dead_runs sensor fails the killed run, as a new `evaluate` would
    from decguard_pipeline.defs.instance import dead_runs_sensor

    with dg.DagsterInstance.from_config(str(place.home)) as instance:
        dead_runs_sensor()(dg.build_sensor_context(instance=instance))
        assert unfinished(list(instance.get_runs())) == []
    code, out, err = finish(place.spawn())
    assert code == 0, err
    assert "marked" not in err  # nothing left to recover after the sensor
    assert summary_line(out, "default@tiny-v1").split()[3:5] == ["0.750", "0.110"]
    assert unfinished(place.runs()) == []
    place.query_every_view()


@pytest.mark.slow
def test_kill_before_the_evaluation_commits_then_the_sensor_asks_again(tmp_path):
    """kill -9 of `evaluate` with a target's whole evaluation staged (runs row, case rows,
    metrics and verdict: one transaction) but not committed: nothing of it is visible, the
    target is not evaluated on the current contract, so the sensor requests it again, and
    latest_* still shows the previous evaluation; the next one takes over. Killed right after
    that commit instead, the evaluation is complete, verdict included: nothing is asked
    again."""
    from decguard_pipeline.definitions import build_definitions
    from decguard_pipeline.defs.resources import WarehouseResource
    from decguard_pipeline.steps.contracts import discover_contracts
    from decguard_pipeline_tests.support.crash_points import (
        stopping_after,
        stopping_before,
        wait_stopped,
    )

    place = Place(tmp_path)
    contract = write_contract(place.contracts / "tiny", MOCK)
    target = "default@tiny-v1"
    code, _, err = finish(place.spawn())
    assert code == 0, err
    [before] = place.wh.read_latest("runs", "tiny", target).to_pylist()

    def sensor_requests() -> list[str]:
        entries = discover_contracts(str(place.contracts))
        defs = build_definitions(entries, warehouse_root=str(place.wh.root))
        with dg.DagsterInstance.from_config(str(place.home)) as instance:
            context = dg.build_sensor_context(
                instance=instance,
                definitions=defs,
                resources={"warehouse": WarehouseResource(root=str(place.wh.root))},
            )
            result = defs.resolve_sensor_def("model_versions")(context)
        return [r.partition_key for r in result.run_requests]

    def killed_at(env: dict[str, str], folder: Path) -> list[str]:
        process = place.spawn(env=env)
        staged = wait_stopped(process, folder)
        os.kill(process.pid, signal.SIGKILL)
        assert process.wait(timeout=30) == -signal.SIGKILL
        process.communicate()
        return staged

    def runs_and_verdicts() -> list[tuple[str, int]]:
        return [
            (r["run_id"], r["verdicts"])
            for r in place.wh.query(
                "SELECT run_id, (SELECT count(*) FROM verdicts v WHERE v.run_id = r.run_id) "
                "AS verdicts FROM runs r ORDER BY recorded_at"
            ).to_pylist()
        ]

    assert sensor_requests() == []  # evaluated on this contract
    # a stricter requirement: the same target must be evaluated again
    contract.write_text(contract.read_text().replace("min_accuracy: 0.5", "min_accuracy: 0.6"))
    staged = killed_at(stopping_before("runs", tmp_path / "crash"), tmp_path / "crash")
    assert {"runs", "case_results", "metrics", "verdicts"} <= set(staged)
    assert runs_and_verdicts() == [(before["run_id"], 1)]  # nothing of the killed one

    assert sensor_requests() == [target]
    for table in ("runs", "case_results", "metrics", "gate_results", "reports", "verdicts"):
        shown = place.wh.query(f"SELECT DISTINCT run_id FROM latest_{table}").to_pylist()
        assert shown == [{"run_id": before["run_id"]}], table
    with place.wh.read_only() as con:  # as an analyst opens it
        assert con.execute("SELECT DISTINCT run_id FROM latest_runs").fetchall() == [
            (before["run_id"],)
        ]

    code, _, err = finish(place.spawn())  # the next evaluation completes
    assert code == 0, err
    assert "marked 1 run(s) of a killed evaluation as failed" in err
    assert sensor_requests() == []
    [after] = place.wh.read_latest("runs", "tiny", target).to_pylist()
    assert after["run_id"] != before["run_id"]
    assert place.wh.query("SELECT DISTINCT run_id FROM latest_metrics").to_pylist() == [
        {"run_id": after["run_id"]}
    ]

    # killed right after the commit: the evaluation and its verdict are there together
    contract.write_text(contract.read_text().replace("min_accuracy: 0.6", "min_accuracy: 0.55"))
    committed = killed_at(stopping_after("runs", tmp_path / "crash2"), tmp_path / "crash2")
    assert "verdicts" in committed
    evaluations = runs_and_verdicts()
    assert [v for _, v in evaluations] == [1, 1, 1]
    last = evaluations[-1][0]
    assert sensor_requests() == []
    assert place.wh.query("SELECT DISTINCT run_id FROM latest_verdicts").to_pylist() == [
        {"run_id": last}
    ]


def commits(root: Path) -> int:
    """The newest snapshot of the warehouse's catalog (read beside its writers: WAL mode)."""
    import sqlite3

    con = sqlite3.connect(f"file:{root / 'catalog.sqlite'}?mode=ro", uri=True)
    try:
        return con.execute("SELECT max(snapshot_id) FROM ducklake_snapshot").fetchone()[0]
    finally:
        con.close()


# -- item 3: parallel evaluations --------------------------------------------------------------

READER = textwrap.dedent(
    """
    import os, sys, time
    from decguard_pipeline.warehouse import Warehouse
    wh, stop = Warehouse(sys.argv[1]), sys.argv[2]
    reads = errors = 0
    while not os.path.exists(stop):
        try:
            with wh.read_only() as con:
                views = [r[0] for r in con.execute(sys.argv[3]).fetchall()]
                for view in views:
                    con.execute(f"SELECT count(*) FROM {view}").fetchone()
                    reads += 1
        except Exception as exc:
            errors += 1
            print(str(exc).splitlines()[0], file=sys.stderr, flush=True)
        time.sleep(0.1)
    print(reads, errors)
    """
)


@pytest.mark.slow
def test_four_parallel_evaluations_with_a_reader(tmp_path):
    place = Place(tmp_path, days=True)
    write_contract(place.contracts / "tiny", MOCK)
    place.wh.query("SELECT 1")  # the catalog exists
    stop = tmp_path / "stop"
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(place.wh.root), str(stop), VIEWS],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    # a fresh instance: four processes create its databases at the same moment
    processes = [place.spawn() for _ in range(4)]
    results = [finish(p, timeout=240) for p in processes]
    stop.touch()
    seen, complaints = reader.communicate(timeout=60)
    assert reader.returncode == 0, complaints
    reads, errors = (int(n) for n in seen.split())
    for code, out, err in results:
        assert code == 0, out + err
        assert "run failed" not in out + err
        assert summary_line(out, "default@tiny-v1").split()[3:6] == ["0.750", "0.110", "n/a"]
        assert summary_line(out, DAYS[0]).split()[2] == "PASS"
        assert summary_line(out, DAYS[1]).split()[2] == "FAIL"  # a verdict, not an error
    # no row lost: every process's rows are there
    counts = place.wh.query(
        "SELECT (SELECT count(*) FROM case_results WHERE contract = 'tiny'),"
        " (SELECT count(DISTINCT run_id) FROM metrics WHERE contract = 'tiny'),"
        " (SELECT count(*) FROM production_runs WHERE contract = 'tiny')"
    ).to_pylist()[0]
    assert list(counts.values()) == [4 * 4, 4, 4 * len(DAYS)]
    assert unfinished(place.runs()) == []
    assert len(place.runs()) == 4 * (1 + len(DAYS))
    assert reads > 0
    assert errors == 0, complaints


def test_runs_on_our_instance_print_no_debug_events(tmp_path, monkeypatch):
    """What `ui` prints of a run its daemon launched: INFO and above (a run worker is
    `dagster api execute_run`, whose console shows every DEBUG event by default)."""
    from decguard_pipeline.defs.instance import ensure_dagster_home

    home = tmp_path / "home"
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    ensure_dagster_home()
    job = tmp_path / "job.py"
    job.write_text(
        "import dagster as dg\n\n\n@dg.asset\ndef a(context):\n"
        "    context.log.debug('a debug line')\n    context.log.info('an info line')\n\n\n"
        "defs = dg.Definitions(assets=[a], jobs=[dg.define_asset_job('j')])\n"
    )
    dagster = Path(sys.executable).with_name("dagster")
    ran = subprocess.run(
        [str(dagster), "job", "execute", "-f", str(job), "-j", "j"],
        env={**os.environ, "DAGSTER_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stderr
    printed = ran.stdout + ran.stderr
    assert "an info line" in printed
    assert " - DEBUG - " not in printed and "a debug line" not in printed
