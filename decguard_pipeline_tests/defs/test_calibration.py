"""The calibration gates as Dagster checks on ``golden_metrics``: one partitioned check per
gate, next to DecGuard's, a failing requirement blocking the report like a golden one and a
failing warning not; the asset's metadata shows the measures as numbers."""

from __future__ import annotations

import base64
import re
import warnings
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import dagster as dg
import numpy as np

from decguard_pipeline.core.calibration.section import calibration_section
from decguard_pipeline.definitions import build_definitions
from decguard_pipeline.defs.jobs import job_name
from decguard_pipeline.defs.metadata.base import significant
from decguard_pipeline.defs.partitions import targets_name
from decguard_pipeline.steps.contracts import discover_contracts
from decguard_pipeline.steps.golden import golden_report
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline_tests.support.calibration_contracts import (
    generated_model,
    labeled_rows,
    write_contract,
)
from decguard_pipeline_tests.support.golden_assets import check_specs, materialise

warnings.filterwarnings("ignore", category=dg.PreviewWarning)
QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
TARGET = "default@gen-v1"
FAST = {"bootstrap_resamples": 20}
UP_TO_METRICS = ("contract", "golden_dataset", "case_results", "golden_metrics")


def _contracts(tmp_path: Path, pipeline: dict[str, Any]) -> Path:
    probs, expected, _ = generated_model(seed=3, n=100, kind="over")
    write_contract(tmp_path / "contracts" / "gen", probs, expected, pipeline=pipeline)
    return tmp_path / "contracts"


def _run(root: Path, tmp_path: Path) -> dg.ExecuteInProcessResult:
    entries = discover_contracts(str(root))
    defs = build_definitions(entries, warehouse_root=str(tmp_path / "wh"))
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(targets_name("gen"), [TARGET])
    job = defs.resolve_job_def(job_name(entries[0]))
    return job.execute_in_process(
        instance=instance, partition_key=TARGET, raise_on_error=False, run_config=QUIET
    )


def test_check_names_follow_the_gates(tmp_path):
    root = _contracts(
        tmp_path,
        {"requirements": {"max_smece": 0.5, "max_selective_risk": 0.2, "min_auroc": 0.1},
         "warnings": {"max_miscalibration": 0.5, "max_classwise_ece": 0.5}},
    )  # fmt: skip
    (entry,) = discover_contracts(str(root))
    specs = check_specs(entry, "golden_metrics")
    assert [spec.name for spec in specs] == [
        "max_error_rate",  # DecGuard's implicit requirement
        "max_smece",
        "max_selective_risk",  # not the guard's min_auroc: that is guard_metrics' check
        "max_classwise_ece_warning",
        "max_miscalibration_warning",
    ]
    assert {spec.blocking for spec in specs if spec.name.endswith("_warning")} == {False}


def test_failing_requirement_blocks_the_approval(tmp_path):
    root = _contracts(
        tmp_path,
        {"calibration_measures": FAST,
         "requirements": {"max_smece": 0.0001}, "warnings": {"max_classwise_ece": 0.9}},
    )  # fmt: skip
    result = _run(root, tmp_path)
    assert result.success  # a verdict, not a crash: recorded, only the approval is blocked
    materialised = {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
    assert {"gen/golden_metrics", "gen/report", "gen/verdict"} <= materialised
    assert "gen/approved_target" not in materialised
    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    smece = checks["max_smece"]
    assert (smece.passed, smece.severity, smece.partition) == (
        False,
        dg.AssetCheckSeverity.ERROR,
        TARGET,
    )
    assert smece.description.startswith("smece ") and "violates <= 0.0001" in smece.description
    assert checks["max_classwise_ece_warning"].passed
    assert checks["max_error_rate"].passed


def test_failing_warning_does_not_block_and_metadata_has_the_numbers(tmp_path):
    root = _contracts(tmp_path, {"calibration_measures": FAST, "warnings": {"max_smece": 0.0001}})
    result = _run(root, tmp_path)
    assert result.success
    warned = [e for e in result.get_asset_check_evaluations() if not e.passed]
    assert [(e.check_name, e.severity) for e in warned] == [
        ("max_smece_warning", dg.AssetCheckSeverity.WARN),
        ("verdict", dg.AssetCheckSeverity.WARN),  # WARN: calibration.max_smece
    ]
    report = Warehouse(tmp_path / "wh").read_latest("reports", "gen", TARGET).to_pylist()[0]
    assert report["status"] == "pass"  # DecGuard's report; the sidecar carries the warning

    (entry,) = discover_contracts(str(root))
    done = materialise(entry, TARGET, tmp_path / "wh2", UP_TO_METRICS)
    shown = {k: getattr(v, "value", v) for k, v in done["golden_metrics"].metadata.items()}
    doc = golden_report(entry, TARGET, Warehouse(tmp_path / "wh2")).report.full()
    independent = calibration_section(*labeled_rows(doc), n_bootstrap=20).headline()
    assert shown["calibration/smece"] == independent["smece"]
    assert shown["calibration/brier_miscalibration"] == independent["brier_miscalibration"]
    assert shown["calibration_status"] == "WARN"
    image = re.fullmatch(
        r"!\[smooth reliability\]\(data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)\)",
        shown["calibration_diagram"],
    )
    assert image is not None
    diagram = ET.fromstring(base64.b64decode(image[1]))
    heading = f"default · smooth ECE {independent['smece']:.3f}"
    assert diagram.find("{http://www.w3.org/2000/svg}title").text.startswith(heading)
    assert [r.data["gate"] for r in shown["calibration_gates"].records] == ["max_smece"]
    listed = {r.data["metric"]: r.data["value"] for r in shown["calibration"].records}
    # (tables show 4 significant digits)
    assert listed == {k: significant(v, 4) for k, v in independent.items() if v is not None}


def test_diff_metadata_says_which_way_the_candidate_moved(tmp_path):
    from decguard_pipeline.defs.metadata.diff import materialisation_metadata
    from decguard_pipeline.steps.base import Step
    from decguard_pipeline.steps.diff import diff_target
    from decguard_pipeline_tests.support.evaluations import evaluate

    rng = np.random.default_rng(4)
    probs, expected, truth = generated_model(seed=8, n=200, kind="calibrated")
    degraded = 0.4 * truth + 0.6 * rng.dirichlet(np.ones(3), len(truth))
    write_contract(tmp_path / "contracts" / "gen", probs, expected,
                   pipeline={"calibration_measures": FAST}, candidate=degraded)  # fmt: skip
    (entry,) = discover_contracts(str(tmp_path / "contracts"))
    wh = Warehouse(tmp_path / "wh")
    evaluate(entry, TARGET, wh, "run-1")
    evaluate(entry, "candidate@gen-v2", wh, "run-2")
    outcome = diff_target(entry, "candidate@gen-v2", Step(wh, "run-2"))
    meta = {k: getattr(v, "value", v) for k, v in materialisation_metadata(outcome).items()}
    delta = outcome.diff.calibration["decomposition"]["brier"]["delta"]
    assert meta["calibration_discrimination"] == "less able to tell cases apart"
    assert meta["discrimination_delta"] == delta["discrimination"] < 0
    assert meta["miscalibration_delta"] == delta["miscalibration"]
    assert "Verdict" in meta["calibration"]
