"""The ``model_versions`` sensor against a real warehouse: it records a target only when the
target changed, and never requests a target that a run (of ``evaluate`` or anything else)
already evaluated on the contract and dataset as they are now."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import dagster as dg
import pytest

from decguard_pipeline.definitions import build_definitions
from decguard_pipeline.defs.main_job import evaluate_all
from decguard_pipeline.defs.resources import WarehouseResource
from decguard_pipeline.steps.contracts import discover_contracts
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline_tests.conftest import EXAMPLES
from decguard_pipeline_tests.support.warehouse_rows import write_verdict

warnings.filterwarnings("ignore", category=dg.PreviewWarning)

SPAM_TARGETS = ["candidate@spam-mock-v2", "default@spam-mock-v1"]


@pytest.fixture
def spam(tmp_path: Path) -> Path:
    """A private copy of the spam example only (two mock targets, quick to evaluate)."""
    root = tmp_path / "contracts"
    shutil.copytree(EXAMPLES / "spam", root / "spam")
    return root


class Sensor:
    def __init__(self, contracts: Path, warehouse: Warehouse) -> None:
        self.entries = discover_contracts(str(contracts))
        self.warehouse = warehouse
        self.defs = build_definitions(self.entries, warehouse_root=str(warehouse.root))
        self.instance = dg.DagsterInstance.ephemeral()
        self.sensor = self.defs.resolve_sensor_def("model_versions")

    def tick(self) -> dg.SensorResult:
        context = dg.build_sensor_context(
            instance=self.instance,
            definitions=self.defs,
            resources={"warehouse": WarehouseResource(root=str(self.warehouse.root))},
        )
        return self.sensor(context)

    def requested(self) -> list[str]:
        return sorted(r.partition_key for r in self.tick().run_requests)


def target_rows(wh: Warehouse) -> list[dict]:
    return wh.query(
        "SELECT target, run_id, model, model_version FROM targets "
        "WHERE contract = 'spam' ORDER BY recorded_at, target"
    ).to_pylist()


def test_the_sensor_records_a_target_only_when_it_changed(spam: Path, tmp_path: Path):
    wh = Warehouse(tmp_path / "wh")
    sensor = Sensor(spam, wh)
    assert sensor.requested() == SPAM_TARGETS
    first = target_rows(wh)
    assert sorted(r["target"] for r in first) == SPAM_TARGETS
    files = sorted((wh.root / "targets").rglob("*.parquet"))
    for _ in range(3):  # nothing changed: nothing written
        sensor.requested()
    assert sorted((wh.root / "targets").rglob("*.parquet")) == files

    run_ids = {r["run_id"] for r in first}
    assert len(run_ids) == 1  # one tick, one run id ...
    assert run_ids.pop().startswith("sensor-2")  # ... saying when, not "sensor-0"

    path = spam / "spam" / "decguard.yaml"
    path.write_text(path.read_text().replace("model: spam-mock-v2", "model: spam-mock-v3"))
    assert "candidate@spam-mock-v3" in sensor.requested()
    rows = target_rows(wh)
    assert len(rows) == 3 and rows[-1]["target"] == "candidate@spam-mock-v3"
    assert rows[-1]["run_id"] != first[0]["run_id"]
    sensor.requested()
    assert len(target_rows(wh)) == 3


def test_the_sensor_does_not_request_what_evaluate_already_evaluated(spam: Path, tmp_path: Path):
    wh = Warehouse(tmp_path / "wh")
    sensor = Sensor(spam, wh)
    # `evaluate --backends default` on the same instance and warehouse
    result = evaluate_all(sensor.defs, sensor.entries, sensor.instance, wh, backends=["default"])
    assert [o.success for o in result.outcomes] == [True]
    assert sensor.requested() == ["candidate@spam-mock-v2"]  # only what was not evaluated

    result = evaluate_all(sensor.defs, sensor.entries, sensor.instance, wh)
    assert sensor.requested() == []
    assert sensor.requested() == []

    data = spam / "spam" / "cases.json"  # a changed dataset: everything is stale again
    data.write_text(data.read_text().replace("Lunch at noon", "Lunch at one"))
    assert sensor.requested() == SPAM_TARGETS


def test_a_run_counts_only_on_the_same_inputs_and_with_a_decided_case(spam: Path, tmp_path):
    from decguard_pipeline.steps.registration import Inputs, current_inputs, evaluated

    wh = Warehouse(tmp_path / "wh")
    entry = discover_contracts(str(spam))[0]
    now = current_inputs(entry)
    assert now.dataset_hash is not None and now.dataset_hash.startswith("sha256:")
    target = "default@spam-mock-v1"

    def run(run_id: str, inputs: Inputs, n_errored: int, *, verdict: bool = True) -> None:
        row = {"contract": "spam", "target": target, "run_id": run_id,
               "contract_hash": inputs.contract_hash, "dataset_hash": inputs.dataset_hash,
               "n_cases": 10, "n_errored": n_errored}  # fmt: skip
        wh.write("runs", [row], contract="spam", target=target, run_id=run_id)
        if verdict:
            write_verdict(wh, "spam", target, run_id)

    assert not evaluated(entry, target, wh, now)
    run("other-contract", Inputs("sha256:0", now.dataset_hash, frozenset()), 0)
    run("other-data", Inputs(now.contract_hash, "sha256:0", frozenset()), 0)
    run("all-errored", now, 10)  # the backend failed on every case: worth asking again
    assert not evaluated(entry, target, wh, now)
    run("killed", now, 0, verdict=False)  # its runs row, then kill -9 before its verdict
    assert not evaluated(entry, target, wh, now)
    wh.write("metrics", [{"metric": "accuracy", "value": 0.9}], contract="spam", target=target,
             run_id="killed")  # fmt: skip
    assert not evaluated(entry, target, wh, now)  # however far it got
    run("decided", now, 9)
    assert evaluated(entry, target, wh, now)
    assert not evaluated(entry, "candidate@spam-mock-v2", wh, now)


def test_a_run_that_ended_without_its_verdict_is_asked_again_a_few_times(spam, tmp_path):
    """Dagster launches a run key once: each run on the current inputs that ended without a
    verdict gives a new key, up to MAX_FAILED; nothing is asked while a run is in progress."""
    from decguard_pipeline.defs.sensors import MAX_FAILED, run_key
    from decguard_pipeline.steps.registration import current_inputs

    wh = Warehouse(tmp_path / "wh")
    sensor = Sensor(spam, wh)
    entry = sensor.entries[0]
    now = current_inputs(entry)
    target, other = "default@spam-mock-v1", "candidate@spam-mock-v2"

    def run(target: str, run_id: str, *, verdict: bool) -> None:
        row = {"contract_hash": now.contract_hash, "dataset_hash": now.dataset_hash,
               "n_cases": 10, "n_errored": 0}  # fmt: skip
        wh.write("runs", [row], contract="spam", target=target, run_id=run_id)
        if verdict:
            write_verdict(wh, "spam", target, run_id)

    def keys() -> dict[str, str | None]:
        return {r.partition_key: r.run_key for r in sensor.tick().run_requests}

    run(other, "other-done", verdict=True)
    assert keys() == {target: run_key(entry, target)}

    job = sensor.defs.resolve_job_def("evaluate_spam")
    running = sensor.instance.create_run_for_job(
        job, status=dg.DagsterRunStatus.STARTED, tags={"dagster/partition": target}
    )
    assert keys() == {}  # being evaluated: not asked twice
    run(target, "killed-1", verdict=False)  # ... and killed after its runs row
    sensor.instance.report_run_failed(running)
    assert keys() == {target: f"{run_key(entry, target)}|after 1 failed"}
    assert run_key(entry, target, 1) == f"{run_key(entry, target)}|after 1 failed"

    for k in range(2, MAX_FAILED + 1):
        run(target, f"killed-{k}", verdict=False)
    assert keys() == {}  # MAX_FAILED runs ended without a verdict: left to the nightly run
    run(target, "done", verdict=True)
    assert keys() == {}
