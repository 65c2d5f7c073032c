"""A target's evaluation in three Dagster steps (issue 15 item 1: Dagster's fixed cost is per
step): the contract's inputs, the evaluation (every per-target asset and its checks), the
scoreboard. Nothing the UI shows is lost: every asset key, check and dependency edge is the
one the contract implies (derived here from the contract file, not from the definitions); a
subset materialises only what was selected; a part that breaks stops only what depends on it
and the run's outcome names it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml

from decguard_pipeline.definitions import build_definitions
from decguard_pipeline.defs.assets.verdict import VERDICT_TAG
from decguard_pipeline.defs.job_runs import QUIET, run_job
from decguard_pipeline.defs.jobs import job_name
from decguard_pipeline.defs.partitions import targets_name
from decguard_pipeline.steps.contracts import discover_contracts
from decguard_pipeline.steps.summary import summarise
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline_tests.conftest import EXAMPLES
from decguard_pipeline_tests.support.evaluations import execute_target

# (example, its default target): properties + regression gates; the guard extension
RUNS = [("refund", "default@refund-mock-v1"), ("injection", "default@injection-guard-mock-v1")]
BASE = {"contract", "golden_dataset", "case_results", "golden_metrics", "report",
        "regression_diff", "verdict", "scoreboard"}  # fmt: skip
GATE_PREFIXES = ("max_", "min_")


def _named(gates: dict[str, Any], level: str) -> set[str]:
    return {g if level == "requirement" else f"{g}_warning" for g in gates}


def features(doc: dict[str, Any]) -> set[str]:
    """The per-target assets a contract's sections add to the golden chain."""
    pipeline = doc.get("pipeline") or {}
    return ({"property_results"} if doc.get("properties") else set()) | (
        {"guard_metrics"} if pipeline.get("guard") or pipeline.get("suites") else set()
    )


def expected_checks(doc: dict[str, Any]) -> set[tuple[str, str]]:
    """(asset, check) of every gate the contract declares, named as DecGuard names the gate
    (a warning gate ``_warning``): the golden gates and DecGuard's implicit
    ``max_error_rate``; each property's error and violation rates (and flip rate when set);
    the regression gates and the implicit ``max_error_rate_increase``; the guard's extension
    gates, ``partial_runs`` and, with a second suite, ``suite_gates``; and the verdict's own
    check."""
    golden = _named(doc.get("requirements", {}), "requirement") | {"max_error_rate"}
    golden |= _named(doc.get("warnings", {}), "warning")
    regression = {k for k in doc.get("regression") or {} if k.startswith(GATE_PREFIXES)}
    out = {("golden_metrics", g) for g in golden}
    out |= {("regression_diff", g) for g in regression | {"max_error_rate_increase"}}
    for name, settings in (doc.get("properties") or {}).items():
        gates = ["max_error_rate", "max_violation_rate"]
        gates += ["max_flip_rate"] if "max_flip_rate" in settings else []
        out |= {("property_results", f"{name}.{g}") for g in gates}
    if "guard_metrics" in features(doc):
        pipeline = doc["pipeline"]
        guard = _named(pipeline.get("requirements", {}), "requirement")
        guard |= _named(pipeline.get("warnings", {}), "warning") | {"partial_runs"}
        guard |= {"suite_gates"} if len(pipeline.get("suites") or {}) > 1 else set()
        out |= {("guard_metrics", g) for g in guard}
    return out | {("verdict", "verdict")}


def expected_upstream(doc: dict[str, Any]) -> dict[str, set[str]]:
    """The lineage the contract implies: the golden chain, the features after
    ``case_results``, the report after the metrics and the properties (its ``all`` mode),
    the verdict after every per-target asset, the approval and the scoreboard after it."""
    extra = features(doc)
    per_target = {"case_results", "golden_metrics", "report", "regression_diff", *extra}
    return {
        "contract": set(),
        "golden_dataset": {"contract"},
        "case_results": {"golden_dataset"},
        "golden_metrics": {"case_results"},
        "report": {"golden_metrics"} | (extra & {"property_results"}),
        "regression_diff": {"case_results"},
        **{name: {"case_results"} for name in extra},
        "verdict": per_target,
        "approved_target": {"verdict"},
        "scoreboard": {"verdict"},
    }


def _contract(tmp_path: Path, name: str) -> tuple[Path, dict[str, Any]]:
    folder = tmp_path / "contracts" / name
    shutil.copytree(EXAMPLES / name, folder)
    path = folder / "decguard.yaml"
    return path, yaml.safe_load(path.read_text())


def _execute(root: Path, target: str, wh: Path, *, instance=None, selection=None):
    return execute_target(root, target, wh, instance=instance, selection=selection)


def steps(result) -> set[str]:
    return {e.step_key for e in result.all_events if e.is_step_start}


def materialised(result) -> set[str]:
    return {e.asset_key.path[-1] for e in result.get_asset_materialization_events()}


def checked(result) -> dict[tuple[str, str], Any]:
    return {(e.asset_key.path[-1], e.check_name): e for e in result.get_asset_check_evaluations()}


@pytest.mark.parametrize(("name", "target"), RUNS)
def test_a_target_run_is_three_steps_with_every_asset_and_check(tmp_path, name, target):
    path, doc = _contract(tmp_path, name)
    result = _execute(path.parent, target, tmp_path / "wh")
    assert result.success
    assert steps(result) == {f"{name}__inputs", f"{name}__evaluation", f"{name}__scoreboard"}
    evaluations = checked(result)
    assert set(evaluations) == expected_checks(doc)
    assert {e.partition for e in evaluations.values()} == {target}
    # approved when no requirement (an ERROR check) failed
    blocking = [k for k, e in evaluations.items()
                if not e.passed and e.severity == dg.AssetCheckSeverity.ERROR]  # fmt: skip
    approved = set() if blocking else {"approved_target"}
    assert materialised(result) == BASE | features(doc) | approved
    assert {e.partition for e in result.get_asset_materialization_events()} == {None, target}


def test_a_subset_of_one_partition_runs_only_its_parts(tmp_path):
    path, doc = _contract(tmp_path, "refund")
    target, instance = "default@refund-mock-v1", dg.DagsterInstance.ephemeral()
    assert _execute(path.parent, target, tmp_path / "wh", instance=instance).success

    key = dg.AssetKey(["refund", "report"])
    report = _execute(path.parent, target, tmp_path / "wh", instance=instance, selection=[key])
    assert report.success
    assert (steps(report), materialised(report)) == ({"refund__evaluation"}, {"report"})
    assert checked(report) == {}

    key = dg.AssetKey(["refund", "golden_metrics"])
    metrics = _execute(path.parent, target, tmp_path / "wh", instance=instance, selection=[key])
    assert metrics.success and materialised(metrics) == {"golden_metrics"}
    assert set(checked(metrics)) == {c for c in expected_checks(doc) if c[0] == "golden_metrics"}

    # one check alone (the UI's "execute check"): evaluated from the stored gate rows
    check = dg.AssetCheckKey(dg.AssetKey(["refund", "golden_metrics"]), "min_accuracy")
    entries = discover_contracts(str(path.parent))
    job = build_definitions(entries, warehouse_root=str(tmp_path / "wh")).resolve_job_def(
        job_name(entries[0])
    )
    alone = job.get_subset(asset_check_selection={check}).execute_in_process(
        instance=instance, partition_key=target, run_config=QUIET
    )
    assert materialised(alone) == set() and set(checked(alone)) == {
        ("golden_metrics", "min_accuracy")
    }

    # the approval alone: the verdict it is derived from is decided (and tags the run), not
    # materialised
    key = dg.AssetKey(["refund", "approved_target"])
    approval = _execute(path.parent, target, tmp_path / "wh", instance=instance, selection=[key])
    assert materialised(approval) == {"approved_target"}
    assert instance.get_run_by_id(approval.run_id).tags[VERDICT_TAG] == "PASS"

    key = dg.AssetKey(["refund", "golden_dataset"])
    dataset = _execute(path.parent, target, tmp_path / "wh", instance=instance, selection=[key])
    assert (steps(dataset), materialised(dataset)) == ({"refund__inputs"}, {"golden_dataset"})


def test_a_broken_part_stops_only_what_depends_on_it(tmp_path):
    """Guard settings that do not fit the decision: ``guard_metrics`` fails when run. The
    parts that do not depend on it are materialised, with their checks; the verdict and the
    approval (after it) are not; the outcome and the summary name the broken part."""
    contract, _ = _contract(tmp_path, "injection")
    text = contract.read_text()
    good = "guard: {threshold: 0.5}"
    assert good in text
    contract.write_text(text.replace(good, "guard: {threshold: 0.5, labels: [attack, maybe]}"))
    message = "pipeline.guard.labels: unknown labels ['maybe']"
    entries = discover_contracts(str(contract.parent))
    wh = Warehouse(tmp_path / "wh")
    defs = build_definitions(entries, warehouse_root=str(wh.root))
    instance = dg.DagsterInstance.ephemeral()
    target = "default@injection-guard-mock-v1"
    instance.add_dynamic_partitions(targets_name("injection"), [target])
    job = defs.resolve_job_def(job_name(entries[0]))

    outcome = run_job(job, instance, "injection", target, {})
    assert not outcome.success and outcome.failed_steps == ["injection__evaluation"]
    # the first line of the part's error, as for a step of its own; the UI shows all of it
    events = [e.dagster_event for e in instance.all_logs(outcome.run_id) if e.dagster_event]
    assert outcome.errors == {"injection__guard_metrics": f"{contract}: invalid contract:"}
    [failure] = [e for e in events if e.is_step_failure]
    shown = failure.step_failure_data.user_failure_data.description
    assert shown.startswith(f"guard_metrics: {contract}: invalid contract:\n")
    assert message in shown and shown.endswith(
        "not run (after a broken part): approved_target, verdict, verdict checks"
    )
    done = {e.asset_key.path[-1] for e in events if e.is_step_materialization}
    assert done == {"contract", "golden_dataset", "case_results", "golden_metrics", "report",
                    "regression_diff"}  # fmt: skip
    assert wh.read_latest("verdicts", "injection", target) is None
    # the independent parts' checks are recorded too
    evaluated = {e.asset_check_evaluation_data.asset_key.path[-1] for e in events
                 if e.event_type_value == "ASSET_CHECK_EVALUATION"}  # fmt: skip
    assert evaluated == {"golden_metrics", "regression_diff"}

    class Result:  # what summarise reads: the outcomes of the main job
        outcomes = [outcome]

    [row] = summarise(wh, Result())
    assert not row["ran"] and row["error"] == f"guard_metrics: {contract}: invalid contract:"


@pytest.mark.parametrize("name", ["refund", "injection", "tickets", "severity", "spam"])
def test_lineage_is_the_one_the_contract_implies(tmp_path, name):
    path, doc = _contract(tmp_path, name)
    defs = build_definitions(discover_contracts(str(path.parent)), warehouse_root=str(tmp_path))
    graph = defs.resolve_asset_graph()
    expected = expected_upstream(doc)
    present = {k.path[-1] for k in graph.get_all_asset_keys()} & set(expected)
    assert present == set(expected) - ({"guard_metrics", "property_results"} - features(doc))
    for asset in present:
        upstream = {k.path[-1] for k in graph.get(dg.AssetKey([name, asset])).parent_keys}
        assert upstream == expected[asset], asset
