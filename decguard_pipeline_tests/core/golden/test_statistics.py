"""Intervals of the golden metrics (pipeline.statistics): CLI sidecar, text and warehouse."""

from __future__ import annotations

import json
import shutil
import warnings

import dagster as dg
import pytest
from scipy.stats import binomtest

from decguard_pipeline.definitions import build_definitions
from decguard_pipeline.steps.contracts import discover_contracts
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline_tests.conftest import EXAMPLES, same_text

warnings.filterwarnings("ignore", category=dg.PreviewWarning)
STATISTICS = "\npipeline:\n  statistics: {bootstrap_resamples: 400, seed: 3}\n"


@pytest.fixture
def refund(tmp_path):
    root = tmp_path / "contracts"
    shutil.copytree(EXAMPLES / "refund", root / "refund")
    path = root / "refund" / "decguard.yaml"
    path.write_text(path.read_text() + STATISTICS)
    return path


def _wilson(k: int, n: int) -> tuple[float, float]:
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    return ci.low, ci.high


def test_sidecar_and_text_carry_the_intervals(refund, tmp_path, ours, ref):
    out = tmp_path / "out" / "r.json"
    ran = ours("test", refund, "-o", out)
    assert ran.exit_code == 0
    section = json.loads((tmp_path / "out" / "r.pipeline.json").read_text())["statistics"]
    intervals = section["intervals"]
    low, high = _wilson(10, 10)  # refund: 10 labeled cases, all correct
    assert intervals["accuracy"]["value"] == 1.0
    assert intervals["accuracy"]["low"] == pytest.approx(low, abs=1e-12)
    assert intervals["accuracy"]["high"] == pytest.approx(high, abs=1e-12)
    low, high = _wilson(8, 11)  # coverage: 8 of 11 decided cases at or above 0.8
    assert (intervals["coverage"]["low"], intervals["coverage"]["high"]) == pytest.approx(
        (low, high), abs=1e-12
    )
    for name in ("macro_f1", "ece", "brier", "nll"):
        entry = intervals[name]
        assert entry["method"] == "bootstrap"
        assert entry["low"] <= entry["value"] <= entry["high"] or name == "macro_f1"
    # DecGuard's report file and layout are untouched; the block comes before DecGuard's final
    # line, which stays the last (the statistics have no gate)
    assert ref("report", out).exit_code == 0
    plain = refund.with_name("plain.yaml")  # DecGuard knows no `pipeline` section
    plain.write_text(refund.read_text().replace(STATISTICS, ""))
    mine, theirs = same_text(ran.stdout, ref("test", plain).stdout.replace(str(plain), str(refund)))
    # identical but for the contract line: the extension is part of the contract's hash
    body = len(theirs) - 2  # DecGuard's lines up to the blank line before its final one
    assert mine[2] != theirs[2] and mine[:2] + mine[3:body] == theirs[:2] + theirs[3:body]
    assert mine[body : body + 2] == [
        "",
        "  Intervals    95% · Wilson (rates) · bootstrap 400 resamples, seed 3",
    ]
    assert mine[-2:] == theirs[-2:] == ["", "PASS: all gates hold"]


def test_bootstrap_is_deterministic_for_a_seed(refund, tmp_path, ours):
    original = refund.read_text()

    def intervals(seed: int) -> dict:
        refund.write_text(original.replace("seed: 3}", f"seed: {seed}}}"))
        out = tmp_path / f"s{seed}.json"
        assert ours("test", refund, "-o", out).exit_code == 0
        return json.loads(out.with_name(f"s{seed}.pipeline.json").read_text())["statistics"]

    first, again, other = intervals(5), intervals(5), intervals(6)
    assert first["intervals"] == again["intervals"]
    assert first["intervals"]["ece"] != other["intervals"]["ece"]


def test_golden_metrics_asset_writes_the_same_intervals(refund, tmp_path, ours):
    out = tmp_path / "cli.json"
    assert ours("test", refund, "-o", out).exit_code == 0
    expected = json.loads(out.with_name("cli.pipeline.json").read_text())["statistics"]
    entries = discover_contracts(str(refund.parent.parent))
    wh = Warehouse(tmp_path / "wh")
    defs = build_definitions(entries, warehouse_root=str(wh.root))
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("refund_targets", ["default@refund-mock-v1"])
    result = defs.resolve_job_def("evaluate_refund").execute_in_process(
        instance=instance, partition_key="default@refund-mock-v1", raise_on_error=False
    )
    assert result.success
    rows = wh.read_latest("metric_intervals", "refund", "default@refund-mock-v1").to_pylist()
    stored = {r["metric"]: {k: r[k] for k in ("value", "low", "high", "method")} for r in rows}
    assert stored == expected["intervals"]
    assert {r["bootstrap_resamples"] for r in rows} == {400}
