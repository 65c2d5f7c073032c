"""The Dagster project: definitions, materialisations against a temporary warehouse, gate
checks, the sensor and the schedule."""

from __future__ import annotations

import json
import shutil
import warnings
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest

from decguard_pipeline.definitions import build_definitions
from decguard_pipeline.defs.jobs import job_name
from decguard_pipeline.defs.partitions import targets_name
from decguard_pipeline.pipeline.contracts import discover_contracts
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline_tests.conftest import EXAMPLES

warnings.filterwarnings("ignore", category=dg.PreviewWarning)
QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


@pytest.fixture
def contracts(tmp_path: Path) -> Path:
    """A private copy of the example contracts (tests edit them)."""
    root = tmp_path / "contracts"
    shutil.copytree(EXAMPLES, root)
    return root


def _run(defs, entries, key, target, instance):
    instance.add_dynamic_partitions(targets_name(key), [target])
    job = defs.resolve_job_def(job_name(next(e for e in entries if e.key == key)))
    return job.execute_in_process(
        instance=instance, partition_key=target, raise_on_error=False, run_config=QUIET
    )


def golden_checks(result) -> list:
    """The golden gate checks of a run (features add their own checks to the group)."""
    return [
        e for e in result.get_asset_check_evaluations() if e.asset_key.path[-1] == "golden_metrics"
    ]


def test_definitions_are_loadable():
    defs = build_definitions()
    dg.Definitions.validate_loadable(defs)
    keys = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
    for contract in ("refund", "severity", "spam"):
        for name in ("contract", "golden_dataset", "case_results", "golden_metrics", "report"):
            assert f"{contract}/{name}" in keys


def test_broken_contract_is_reported_and_others_still_load(contracts, tmp_path):
    (contracts / "spam" / "decguard.yaml").write_text("schema_version: 0.1\n")
    entries = discover_contracts(str(contracts))
    defs = build_definitions(entries, warehouse_root=str(tmp_path / "wh"))
    dg.Definitions.validate_loadable(defs)
    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    assert "spam/contract" in keys and "spam/report" not in keys
    assert "refund/report" in keys and "severity/report" in keys
    node = graph.get(dg.AssetKey(["spam", "contract"]))
    assert "must be a string such as" in (node.description or "")
    result = dg.materialize(
        [defs.get_assets_def(dg.AssetKey(["spam", "contract"]))],
        raise_on_error=False,
    )
    assert not result.success


def test_materialised_rows_equal_the_cli_report(contracts, tmp_path, ours, ref):
    entries = discover_contracts(str(contracts))
    wh = Warehouse(tmp_path / "wh")
    defs = build_definitions(entries, warehouse_root=str(wh.root))
    instance = dg.DagsterInstance.ephemeral()
    result = _run(defs, entries, "refund", "default@refund-mock-v1", instance)
    assert result.success

    cli = json.loads(ours("test", contracts / "refund" / "decguard.yaml", "-f", "json").stdout)
    stored = {
        r["metric"]: r["value"]
        for r in wh.read_latest("metrics", "refund", "default@refund-mock-v1").to_pylist()
    }
    m = cli["metrics"]
    assert stored["accuracy"] == m["classification"]["accuracy"]
    assert stored["ece"] == m["calibration"]["ece"]
    assert stored["brier"] == m["calibration"]["brier"]
    assert stored["nll"] == m["calibration"]["nll"]
    assert stored["coverage"] == m["selective"]["coverage"]

    rows = wh.query(
        "SELECT case_id, selected, confidence, probs FROM latest_case_results "
        "WHERE contract = 'refund' ORDER BY position"
    ).to_pylist()
    assert [r["case_id"] for r in rows] == [r["case_id"] for r in cli["results"]]
    for row, case in zip(rows, cli["results"], strict=True):
        assert row["selected"] == case["result"]["selected"]
        assert row["confidence"] == case["result"]["confidence"]
        assert row["probs"] == list(case["result"]["probabilities"].values())

    checks = {e.check_name: e for e in golden_checks(result)}
    assert set(checks) == {"min_accuracy", "max_ece", "min_coverage", "max_error_rate",
                           "max_latency_p95_ms_warning"}  # fmt: skip
    assert checks["max_ece"].passed and checks["max_ece"].metadata["threshold"].value == 0.15
    assert checks["max_ece"].partition == "default@refund-mock-v1"

    report = wh.read_latest("reports", "refund", "default@refund-mock-v1").to_pylist()[0]
    assert report["status"] == "pass"
    verified = ref("report", report["path"])  # the reference verifies the asset's file
    assert verified.exit_code == 0, verified.stderr


def test_failing_requirement_stops_the_report(contracts, tmp_path):
    entries = discover_contracts(str(contracts))
    wh = Warehouse(tmp_path / "wh")
    defs = build_definitions(entries, warehouse_root=str(wh.root))
    result = _run(defs, entries, "refund", "order_sensitive@refund-mock-v2",
                  dg.DagsterInstance.ephemeral())  # fmt: skip
    assert not result.success
    materialised = {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
    assert "refund/golden_metrics" in materialised
    assert "refund/report" not in materialised
    failed = [e for e in golden_checks(result) if not e.passed]
    assert [(e.check_name, e.severity) for e in failed] == [
        ("max_ece", dg.AssetCheckSeverity.ERROR)
    ]
    assert "ece 0.1751 violates <= 0.15" in failed[0].description


def test_failing_warning_does_not_stop_the_report(contracts, tmp_path):
    path = contracts / "spam" / "decguard.yaml"
    path.write_text(path.read_text() + "\nwarnings:\n  min_accuracy: 0.99\n")
    entries = discover_contracts(str(contracts))
    wh = Warehouse(tmp_path / "wh")
    defs = build_definitions(entries, warehouse_root=str(wh.root))
    result = _run(defs, entries, "spam", "default@spam-mock-v1", dg.DagsterInstance.ephemeral())
    assert result.success
    warned = [e for e in result.get_asset_check_evaluations() if not e.passed]
    assert [(e.check_name, e.severity) for e in warned] == [
        ("min_accuracy_warning", dg.AssetCheckSeverity.WARN)
    ]
    report = wh.read_latest("reports", "spam", "default@spam-mock-v1").to_pylist()[0]
    assert report["status"] == "warn"


def test_sensor_adds_targets_and_reruns_when_the_contract_changes(contracts, tmp_path):
    entries = discover_contracts(str(contracts))
    defs = build_definitions(entries, warehouse_root=str(tmp_path / "wh"))
    sensor = defs.get_sensor_def("model_versions")
    instance = dg.DagsterInstance.ephemeral()

    from decguard_pipeline.defs.resources import WarehouseResource

    resources = {"warehouse": WarehouseResource(root=str(tmp_path / "wh"))}

    def tick():
        context = dg.build_sensor_context(instance=instance, definitions=defs, resources=resources)
        return sensor(context)

    first = tick()
    added = {r.partitions_def_name: r.partition_keys for r in first.dynamic_partitions_requests}
    assert added["refund_targets"] == [
        "default@refund-mock-v1", "order_sensitive@refund-mock-v2", "strong_model@refund-strong-v1"
    ]  # fmt: skip
    assert "spam_targets" in added and "severity_targets" in added
    refund = [r for r in first.run_requests if r.job_name == "evaluate_refund"]
    assert [r.partition_key for r in refund] == added["refund_targets"]
    keys_before = {r.run_key for r in first.run_requests}
    assert {r.run_key for r in tick().run_requests} == keys_before  # same state: same keys

    path = contracts / "refund" / "decguard.yaml"
    path.write_text(path.read_text().replace("min_accuracy: 0.9", "min_accuracy: 0.8", 1))
    changed = {r.run_key for r in tick().run_requests if r.job_name == "evaluate_refund"}
    assert not changed & keys_before  # every refund target is requested again
    data = contracts / "spam" / "cases.json"
    data.write_text(data.read_text().replace("Lunch at noon", "Lunch at one"))
    spam = {r.run_key for r in tick().run_requests if r.job_name == "evaluate_spam"}
    assert not spam & keys_before


def test_nightly_schedule_requests_the_latest_target_of_every_backend(tmp_path):
    entries = discover_contracts(str(EXAMPLES))
    defs = build_definitions(entries, warehouse_root=str(tmp_path / "wh"))
    schedule = defs.get_schedule_def("nightly_refund")
    # contexts as `with` blocks: a context opens an instance from the ref (which becomes the
    # current definitions-state storage) and only its exit closes it in order
    with dg.instance_for_test() as instance:
        with dg.build_schedule_context(
            instance=instance, repository_def=defs.get_repository_def()
        ) as context:
            assert "no targets" in schedule.evaluate_tick(context).skip_message
        instance.add_dynamic_partitions(
            "refund_targets",
            ["default@v1", "order_sensitive@v1", "default@v2", "strong_model@s1"],
        )
        with dg.build_schedule_context(
            instance=instance,
            scheduled_execution_time=datetime(2026, 11, 30, 2, tzinfo=UTC),
            repository_def=defs.get_repository_def(),
        ) as context:
            requests = schedule.evaluate_tick(context).run_requests
    assert [r.partition_key for r in requests] == ["default@v2", "order_sensitive@v1",
                                                    "strong_model@s1"]  # fmt: skip
    assert len({r.run_key for r in requests}) == 3
