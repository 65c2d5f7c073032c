"""Cost through Dagster: a target's job stores its tokens and cost (``runs``, ``metrics``), the
``max_cost_per_1000`` gate is an asset check on golden_metrics (a failing requirement blocks the
report, as DecGuard's requirements do), the UI metadata has the numbers, the report's sidecar
the usage section."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import dagster as dg
import pytest

from decguard_pipeline.definitions import build_definitions
from decguard_pipeline.defs.jobs import job_name
from decguard_pipeline.defs.partitions import targets_name
from decguard_pipeline.steps.contracts import discover_contracts
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline_tests.support.priced_llm import (
    CASES,
    MODEL,
    expected_cost,
    priced_server,
    write_priced_contract,
)

warnings.filterwarnings("ignore", category=dg.PreviewWarning)
QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
TARGET = f"default@{MODEL}"


def _run(tmp_path: Path, pipeline: str) -> tuple[dg.ExecuteInProcessResult, float, list]:
    with priced_server() as server:
        write_priced_contract(tmp_path / "contracts" / "priced", server.url, pipeline=pipeline)
        (entry,) = discover_contracts(str(tmp_path / "contracts"))
        defs = build_definitions([entry], warehouse_root=str(tmp_path / "wh"))
        instance = dg.DagsterInstance.ephemeral()
        instance.add_dynamic_partitions(targets_name(entry.key), [TARGET])
        result = defs.resolve_job_def(job_name(entry)).execute_in_process(
            instance=instance, partition_key=TARGET, raise_on_error=False, run_config=QUIET
        )
        sent = list(server.sent_usage)
    return result, expected_cost(sent), sent


def _checks(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    return {
        e.check_name: e
        for e in result.get_asset_check_evaluations()
        if e.asset_key.path[-1] == "golden_metrics"
    }


def _materialised(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetMaterialization]:
    return {
        e.asset_key.path[-1]: e.step_materialization_data.materialization
        for e in result.get_asset_materialization_events()
    }


def test_failing_cost_requirement_blocks_the_approval(tmp_path):
    result, cost, sent = _run(tmp_path, "requirements:\n  max_cost_per_1000: 0.01\n")
    assert len(sent) == len(CASES)
    per_1000 = cost / len(CASES) * 1000
    assert result.success  # a verdict, not a crash: recorded, only the approval is blocked
    done = _materialised(result)
    assert {"golden_metrics", "report", "verdict"} <= set(done)
    assert "approved_target" not in done
    assert done["golden_metrics"].metadata["cost_per_1000"].value == pytest.approx(per_1000)
    # the scoreboard shows the cost when it is known (4 significant digits)
    [row] = done["scoreboard"].metadata["scoreboard"].records
    assert float(row.data["cost / 1k"]) == pytest.approx(per_1000, rel=5e-4)
    [target] = [r.data["target"] for r in done["scoreboard"].metadata["scoreboard"].records]
    assert f"cost.max_cost_per_1000 {per_1000:.4g} > 0.01" in (
        done["scoreboard"].metadata[target].value
    )
    check = _checks(result)["max_cost_per_1000"]
    assert (check.passed, check.severity) == (False, dg.AssetCheckSeverity.ERROR)
    assert check.metadata["value"].value == pytest.approx(per_1000, rel=1e-11)
    assert check.description == f"cost_per_1000 {per_1000:.4g} violates <= 0.01"

    wh = Warehouse(tmp_path / "wh")
    run = wh.read_latest("runs", "priced", TARGET).to_pylist()[0]
    assert run["prompt_tokens"] == sum(p for p, _ in sent)
    assert run["completion_tokens"] == len(CASES)
    assert run["cost_per_run"] == pytest.approx(cost, rel=1e-12)
    assert run["cost_per_1000"] == pytest.approx(per_1000, rel=1e-12)
    assert json.loads(run["usage_json"])["backend"]["requests"] == len(CASES)
    metrics = {
        r["metric"]: r["value"] for r in wh.read_latest("metrics", "priced", TARGET).to_pylist()
    }
    assert metrics["cost_per_1000"] == pytest.approx(per_1000, rel=1e-12)
    assert metrics["prompt_tokens"] == run["prompt_tokens"]
    gates = wh.query(
        "SELECT source, gate, level, status FROM latest_gate_results WHERE source = 'cost'"
    ).to_pylist()
    assert gates == [
        {"source": "cost", "gate": "max_cost_per_1000", "level": "requirement", "status": "fail"}
    ]

    meta = done["golden_metrics"].metadata
    assert meta["cost_per_1000"].value == pytest.approx(per_1000, rel=1e-12)
    assert meta["cost_per_run"].value == pytest.approx(cost, rel=1e-12)
    assert meta["prompt_tokens"].value == run["prompt_tokens"]
    assert meta["completion_tokens"].value == len(CASES)
    assert "max_cost_per_1000" in json.dumps(meta["gates"].value.records[-1].data)


def test_passing_cost_warning_and_the_sidecar_of_the_report(tmp_path):
    result, cost, _ = _run(tmp_path, "warnings:\n  max_cost_per_1000: 5\n")
    assert result.success
    check = _checks(result)["max_cost_per_1000_warning"]
    assert check.passed and check.severity == dg.AssetCheckSeverity.WARN
    path = Path(_materialised(result)["report"].metadata["path"].value)
    report = json.loads(path.read_text())
    assert "usage" not in report and report["status"] == "pass"
    sidecar = json.loads(path.with_name(path.stem + ".pipeline.json").read_text())
    assert sidecar["report"] == path.name
    usage = sidecar["usage"]
    assert usage["cost_per_run"] == pytest.approx(cost, rel=1e-12)
    assert [c["status"] for c in usage["checks"]] == ["pass"]
