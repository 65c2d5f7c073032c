"""The golden assets and their gate checks.

Assets are called as plain functions against a temporary warehouse where that proves the
behaviour (the report file and the rows against decguard==0.1.1 and our CLI, the metadata the
UI shows, the metrics computed once); whole job runs remain where the wiring is what is tested
(a failing requirement blocks the report, a failing warning does not)."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from decguard_pipeline.core.report import golden as report_module
from decguard_pipeline.definitions import build_definitions
from decguard_pipeline.defs.gate_checks import check_name
from decguard_pipeline.defs.jobs import job_name
from decguard_pipeline.defs.partitions import targets_name
from decguard_pipeline.demo.autostart import DEMO_URL_VARIABLE, demo_server_for
from decguard_pipeline.runs.golden import run_test
from decguard_pipeline.steps.contracts import discover_contracts
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline_tests.conftest import EXAMPLES, same_text
from decguard_pipeline_tests.support.golden_assets import check_specs, materialise
from decguard_pipeline_tests.support.golden_cases import comparable, write_inputs

warnings.filterwarnings("ignore", category=dg.PreviewWarning)
QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
UP_TO_METRICS = ("contract", "golden_dataset", "case_results", "golden_metrics")


@pytest.fixture
def contracts(tmp_path: Path) -> Path:
    """A private copy of the example contracts (tests edit them)."""
    root = tmp_path / "contracts"
    shutil.copytree(EXAMPLES, root)
    return root


def _entry(path: Path, key: str | None = None):
    entries = discover_contracts(str(path))
    return entries[0] if key is None else next(e for e in entries if e.key == key)


def _unfenced(markdown: Any) -> str:
    text = markdown.value if hasattr(markdown, "value") else markdown
    assert text.startswith("```\n") and text.endswith("\n```")
    return text[4:-4]


def _comparable_checks(checks: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """Gate, level, status and threshold of each check; value and message too unless the
    gate is on measured latency."""
    return [
        (c["gate"], c["level"], c["status"], c["threshold"])
        + (() if c["gate"] == "max_latency_p95_ms" else (c["value"], c["message"]))
        for c in checks
    ]


# -- assets as plain functions, against the reference -----------------------------------------


@pytest.mark.parametrize("seed", [1, 2, 4, 5, 7, 8, 10, 11, 13, 14, 16, 17])
def test_assets_write_the_reference_report(seed, ref, tmp_path):
    """Generated contracts (three decision types, thresholds, bins, gates, unlabeled cases,
    object inputs): the report asset's file, the stored rows and the UI's summary are
    DecGuard's."""
    folder = tmp_path / "contract"
    folder.mkdir()
    contract_path, _, contract = write_inputs(folder, seed)
    backend = "alt" if "backends" in contract and seed % 2 else "default"
    theirs = tmp_path / "ref.json"
    args = ["test", contract_path, "-o", theirs] + (["-b", backend] if backend != "default" else [])
    expected = ref(*args)
    assert expected.exit_code in (0, 1), expected.stderr
    entry = _entry(contract_path)
    target = f"{backend}@generated"
    done = materialise(entry, target, tmp_path / "wh")

    path = Path(done["report"].metadata["path"].value)
    ref_doc = json.loads(theirs.read_text())
    assert comparable(json.loads(path.read_text())) == comparable(ref_doc)
    summary = _unfenced(done["golden_metrics"].metadata["summary"])
    mine_text, ref_text = same_text(summary, expected.stdout)
    assert mine_text == ref_text
    assert done["golden_metrics"].metadata["status"] == ref_doc["status"].upper()

    wh = Warehouse(tmp_path / "wh")
    stored = wh.read_latest("gate_results", entry.key, target).to_pylist()
    assert _comparable_checks(stored) == _comparable_checks(ref_doc["checks"])
    rows = wh.read_latest("metrics", entry.key, target).to_pylist()
    metrics = {r["metric"]: r["value"] for r in rows}
    cls, cal = ref_doc["metrics"]["classification"], ref_doc["metrics"]["calibration"]
    assert (metrics["accuracy"], metrics["macro_f1"]) == (cls["accuracy"], cls["macro_f1"])
    assert (metrics["ece"], metrics["brier"], metrics["nll"]) == (
        cal["ece"],
        cal["brier"],
        cal["nll"],
    )
    row = wh.read_latest("reports", entry.key, target).to_pylist()[0]
    assert (row["status"], row["exit_code"], row["path"]) == (
        ref_doc["status"],
        expected.exit_code,
        str(path),
    )


def test_golden_metrics_asset_shows_the_cli_report(contracts, tmp_path, ours):
    """Rows, case results and metadata of the golden assets equal `decguard-pipeline test`."""
    entry = _entry(contracts, "refund")
    target = "default@refund-mock-v1"
    done = materialise(entry, target, tmp_path / "wh", UP_TO_METRICS)
    cli = ours("test", contracts / "refund" / "decguard.yaml", "-f", "json")
    doc = json.loads(cli.stdout)

    wh = Warehouse(tmp_path / "wh")
    stored = {
        r["metric"]: r["value"] for r in wh.read_latest("metrics", "refund", target).to_pylist()
    }
    m = doc["metrics"]
    assert stored["accuracy"] == m["classification"]["accuracy"]
    assert stored["ece"] == m["calibration"]["ece"]
    assert stored["coverage"] == m["selective"]["coverage"]
    rows = wh.query(
        "SELECT case_id, selected, confidence, probs FROM latest_case_results "
        "WHERE contract = 'refund' ORDER BY position"
    ).to_pylist()
    assert [r["case_id"] for r in rows] == [r["case_id"] for r in doc["results"]]
    for row, case in zip(rows, doc["results"], strict=True):
        assert row["selected"] == case["result"]["selected"]
        assert row["confidence"] == case["result"]["confidence"]
        assert row["probs"] == list(case["result"]["probabilities"].values())

    shown = done["golden_metrics"].metadata
    assert shown["status"] == doc["status"].upper()
    gates = shown["gates"].value.records
    assert [(r.data["gate"], r.data["status"]) for r in gates] == [
        (c["gate"], c["status"]) for c in doc["checks"]
    ]
    per_label = shown["per_label"].value.records
    assert {r.data["label"]: r.data["support"] for r in per_label} == {
        label: scores["support"] for label, scores in m["classification"]["per_label"].items()
    }
    assert len(shown["reliability"].value.records) == m["calibration"]["bins"]
    failing = [r.data["case_id"] for r in shown["failing_cases"].value.records]
    assert failing == [f["case_id"] for f in doc["failures"]]
    evaluated = done["case_results"].metadata
    assert evaluated["dagster/row_count"] == doc["dataset"]["n_cases"]
    assert evaluated["model"] == doc["backend"]["model"]
    assert evaluated["model_version"] == (doc["backend"]["model_version"] or "-")


def test_golden_metrics_are_computed_once(contracts, tmp_path, monkeypatch):
    """The golden_metrics asset stores and shows one report: DecGuard's metrics are computed
    once (they were computed twice, for the rows and again for the summary)."""
    entry = _entry(contracts, "spam")
    target = "default@spam-mock-v1"
    materialise(entry, target, tmp_path / "wh", UP_TO_METRICS[:3])
    calls = []
    real = report_module.golden_metrics

    def counted(*args: Any, **kwargs: Any) -> dict[str, Any]:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(report_module, "golden_metrics", counted)
    done = materialise(entry, target, tmp_path / "wh", ("golden_metrics",))
    assert len(calls) == 1
    assert done["golden_metrics"].metadata["status"] == "PASS"


def test_check_names_follow_the_report_checks(contracts, monkeypatch):
    """One Dagster check per golden gate, in the order of the report's checks: requirements
    (the implicit max_error_rate included, or the contract's own), then warnings; then the
    calibration gates and the cost gates, in the order of the run's sections (the tickets
    example has one of each). The
    demo server the tickets example names is started for the test."""
    severity = contracts / "severity" / "decguard.yaml"
    severity.write_text(
        severity.read_text() + "\nwarnings:\n  max_error_rate: 0.1\n  min_accuracy: 0.99\n"
    )
    spam = contracts / "spam" / "decguard.yaml"
    spam.write_text(
        spam.read_text().replace("requirements:\n", "requirements:\n  max_error_rate: 0.2\n")
    )
    names = {}
    entries = discover_contracts(str(contracts))
    monkeypatch.delenv(DEMO_URL_VARIABLE, raising=False)
    with demo_server_for([e.require().contract for e in entries]):
        for entry in entries:
            specs = check_specs(entry, "golden_metrics")
            names[entry.key] = [spec.name for spec in specs]
            report = run_test(entry.require(), backend="default")
            usage = report.extensions.get("usage", {}).get("checks", [])
            calibration = report.extensions.get("calibration", {}).get("checks", [])
            checks = [*report.document["checks"], *calibration, *usage]
            assert names[entry.key] == [check_name(c["gate"], c["level"]) for c in checks]
    assert names["tickets"][-2:] == ["max_smece_warning", "max_cost_per_1000_warning"]
    assert names["severity"][-2:] == ["min_accuracy_warning", "max_error_rate_warning"]
    assert "max_error_rate" in names["severity"]  # the implicit requirement
    assert names["spam"].count("max_error_rate") == 1  # the contract's own, not twice


# -- whole job runs: the checks' wiring ------------------------------------------------------


def _run(
    contracts: Path,
    tmp_path: Path,
    key: str,
    target: str,
    instance: dg.DagsterInstance | None = None,
) -> dg.ExecuteInProcessResult:
    entries = discover_contracts(str(contracts))
    defs = build_definitions(entries, warehouse_root=str(tmp_path / "wh"))
    instance = instance or dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(targets_name(key), [target])
    job = defs.resolve_job_def(job_name(next(e for e in entries if e.key == key)))
    return job.execute_in_process(
        instance=instance, partition_key=target, raise_on_error=False, run_config=QUIET
    )


def _golden_checks(result: dg.ExecuteInProcessResult) -> list[Any]:
    """The golden gate checks of a run (features add their own checks to the group)."""
    return [
        e for e in result.get_asset_check_evaluations() if e.asset_key.path[-1] == "golden_metrics"
    ]


def test_failing_requirement_is_a_verdict_not_a_crash(contracts, tmp_path):
    target = "order_sensitive@refund-mock-v2"
    instance = dg.DagsterInstance.ephemeral()
    result = _run(contracts, tmp_path, "refund", target, instance)
    # the run succeeds with a failed check and the verdict FAIL as a tag; everything is
    # recorded, only the approval is not
    assert result.success
    assert instance.get_run_by_id(result.run_id).tags["decguard/verdict"] == "FAIL"
    materialised = {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}
    assert {"refund/golden_metrics", "refund/report", "refund/verdict",
            "refund/scoreboard"} <= materialised  # fmt: skip
    assert "refund/approved_target" not in materialised
    wh = Warehouse(tmp_path / "wh")
    report = wh.read_latest("reports", "refund", target).to_pylist()[-1]
    assert Path(report["path"]).is_file() and Path(report["path"]).with_suffix(".html").is_file()
    [verdict] = wh.read_latest("verdicts", "refund", target).to_pylist()
    assert (verdict["status"], verdict["approved"]) == ("fail", False)
    # every failing requirement, the golden one and the example's order property
    assert verdict["failing"] == ["golden.max_ece", "option_order.max_violation_rate"]
    assert verdict["headline"] == "FAIL — golden.max_ece, option_order.max_violation_rate"
    # the scoreboard's row for the target, and the numbers of golden_metrics are numbers
    [board] = [
        e.materialization.metadata
        for e in result.get_asset_materialization_events()
        if e.asset_key.to_user_string() == "refund/scoreboard"
    ]
    rows = {r.data["target"]: r.data for r in board["scoreboard"].records}
    assert rows[target]["ECE"] == 0.1751
    assert board[target].value.startswith(
        "**FAIL** · golden.max_ece 0.1751 > 0.15, option_order.max_violation_rate 0.8182 > 0"
    )
    # the verdict's own check is red, and says why
    [judged] = [e for e in result.get_asset_check_evaluations() if e.check_name == "verdict"]
    assert (judged.passed, judged.severity) == (False, dg.AssetCheckSeverity.ERROR)
    assert judged.description == verdict["headline"]
    [golden] = [
        e.materialization.metadata
        for e in result.get_asset_materialization_events()
        if e.asset_key.to_user_string() == "refund/golden_metrics"
    ]
    for name in ("accuracy", "macro_f1", "ece", "brier", "nll", "error_rate", "latency_p95_ms",
                 "ece_equal_mass"):  # fmt: skip
        assert isinstance(golden[name], dg.FloatMetadataValue), name
    assert golden["ece"].value == pytest.approx(0.1751, abs=5e-5)
    assert golden["reliability_diagram"].value.startswith("![reliability")
    checks = {e.check_name: e for e in _golden_checks(result)}
    assert set(checks) == {"min_accuracy", "max_ece", "min_coverage", "max_error_rate",
                           "max_latency_p95_ms_warning"}  # fmt: skip
    assert all(e.partition == target for e in checks.values())
    failed = [e for e in checks.values() if not e.passed]
    assert [(e.check_name, e.severity) for e in failed] == [
        ("max_ece", dg.AssetCheckSeverity.ERROR)
    ]
    assert "ece 0.1751 violates <= 0.15" in failed[0].description
    assert failed[0].metadata["threshold"].value == 0.15
    # rounded as every number the UI shows (the sum is 0.17510000000000003)
    assert failed[0].metadata["value"].value == 0.1751


def test_failing_warning_does_not_stop_the_report(contracts, tmp_path):
    path = contracts / "spam" / "decguard.yaml"
    path.write_text(path.read_text() + "\nwarnings:\n  min_accuracy: 0.99\n")
    result = _run(contracts, tmp_path, "spam", "default@spam-mock-v1")
    assert result.success
    warned = [e for e in result.get_asset_check_evaluations() if not e.passed]
    assert [(e.check_name, e.severity) for e in warned] == [
        ("min_accuracy_warning", dg.AssetCheckSeverity.WARN),
        ("verdict", dg.AssetCheckSeverity.WARN),  # the verdict WARN: yellow, not red
    ]
    report = Warehouse(tmp_path / "wh").read_latest("reports", "spam", "default@spam-mock-v1")
    assert report.to_pylist()[0]["status"] == "warn"
