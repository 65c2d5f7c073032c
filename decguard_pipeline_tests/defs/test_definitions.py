"""The Dagster project: definitions (a broken contract included), the sensor and the schedule.
The golden assets and checks are tested in test_golden.py."""

from __future__ import annotations

import shutil
import warnings
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest

from decguard_pipeline.definitions import build_definitions
from decguard_pipeline.steps.contracts import discover_contracts
from decguard_pipeline_tests.conftest import EXAMPLES

warnings.filterwarnings("ignore", category=dg.PreviewWarning)


@pytest.fixture
def contracts(tmp_path: Path) -> Path:
    """A private copy of the example contracts (tests edit them)."""
    root = tmp_path / "contracts"
    shutil.copytree(EXAMPLES, root)
    return root


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


def test_sensor_adds_targets_and_reruns_when_the_contract_changes(contracts, tmp_path):
    entries = discover_contracts(str(contracts))
    defs = build_definitions(entries, warehouse_root=str(tmp_path / "wh"))
    sensor = defs.resolve_sensor_def("model_versions")
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
    schedule = defs.resolve_schedule_def("nightly_refund")
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
