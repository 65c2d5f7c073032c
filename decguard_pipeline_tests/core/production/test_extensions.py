"""What ``check`` adds beyond DecGuard, turned on by ``pipeline.production``: hand-computed
label drift (TV, PSI), Wilson intervals, pending outcomes and calibration per model_version;
the sidecar next to ``-o``; DecGuard's report and layout unchanged (the reference still
verifies the report)."""

from __future__ import annotations

import json
import math
import textwrap

import pytest

from decguard_pipeline.core.production.extensions import psi
from decguard_pipeline.core.report.sidecar import sidecar_path
from decguard_pipeline_tests.conftest import EXAMPLES, same_text

BASE = """
    schema_version: "0.1"
    decision: {name: route, type: choice, options: [refund, reject, review]}
    backend: {provider: mock}
    production:
      segments: [locale]
      requirements: {min_accuracy: 0.5}
"""
EXTENDED = (
    BASE
    + """
    pipeline:
      production: {psi_epsilon: 0.001}
"""
)


def _record(i, selected, outcome=None, version=None, locale="en"):
    probs = {"refund": 0.1, "reject": 0.1, "review": 0.1}
    probs[selected] = 0.8
    record = {"id": f"r{i}", "decision": "route", "probabilities": probs, "selected": selected,
              "metadata": {"locale": locale}}  # fmt: skip
    if outcome is not None:
        record["outcome"] = outcome
    if version is not None:
        record["model_version"] = version
    return record


def _write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.fixture
def files(tmp_path):
    current = _write(tmp_path / "current.jsonl", [
        _record(1, "refund", "refund", "v1"), _record(2, "refund", "reject", "v1"),
        _record(3, "reject", None, "v2", "it"), _record(4, "review", "review", "v2", "it"),
    ])  # fmt: skip
    baseline = _write(tmp_path / "baseline.jsonl", [
        _record(i, "refund", "refund", "v1") for i in range(4)
    ])  # fmt: skip
    return current, baseline


def test_psi_and_tv_by_hand(write, files, ours, tmp_path):
    """Current labels (refund, refund, reject, review) = .5/.25/.25 against a baseline of
    refund only: TV = ½(.5 + .25 + .25) = .5; PSI with empty baseline shares read as 0.001."""
    current, baseline = files
    contract = write("c.yaml", textwrap.dedent(EXTENDED))
    out = tmp_path / "check.json"
    ran = ours("check", contract, "-d", current, "--baseline", baseline, "-o", out)
    assert ran.exit_code == 0
    side = json.loads(sidecar_path(out).read_text())
    drift = side["label_drift"]
    assert drift["current_counts"] == [2, 1, 1] and drift["baseline_counts"] == [4, 0, 0]
    assert drift["tv_distance"] == 0.5
    eps = 0.001
    by_hand = (0.5 - 1.0) * math.log(0.5) + 2 * (0.25 - eps) * math.log(0.25 / eps)
    assert drift["psi"] == pytest.approx(by_hand, rel=1e-15)
    assert psi([0.5, 0.5], [0.5, 0.5], 1e-4) == 0.0


def test_wilson_pending_and_versions(write, files, ours, tmp_path):
    current, baseline = files
    contract = write("c.yaml", textwrap.dedent(EXTENDED))
    out = tmp_path / "check.json"
    ours("check", contract, "-d", current, "--baseline", baseline, "-o", out)
    side = json.loads(sidecar_path(out).read_text())
    # 3 records with an outcome, 2 of them right: Wilson 95% for 2/3
    interval = side["accuracy_interval"]
    assert (interval["n"], interval["correct"]) == (3, 2)
    z = 1.959963984540054
    center = (2 / 3 + z * z / 6) / (1 + z * z / 3)
    half = z / (1 + z * z / 3) * math.sqrt(2 / 3 * (1 / 3) / 3 + z * z / 36)
    assert interval["low"] == pytest.approx(center - half, abs=1e-12)
    assert interval["high"] == pytest.approx(center + half, abs=1e-12)
    assert side["outcomes"] == {
        "total": 4, "with_correctness": 3, "with_outcome": 3, "pending": 1,
        "pending_rate": 0.25, "pending_label": 1, "pending_label_rate": 0.25,
    }  # fmt: skip
    versions = {v["model_version"]: v for v in side["calibration_by_model_version"]}
    # v1: confidences .8, .8, one right -> one bin, ECE |0.5 - 0.8| = 0.3; baseline all right
    # at .8 -> ECE 0.2 (1 - 0.8); v2: the labelled record is right -> ECE 0.2
    assert versions["v1"]["ece"] == pytest.approx(0.3, abs=1e-15)
    assert versions["v1"]["baseline"]["ece"] == pytest.approx(0.2, abs=1e-15)
    assert versions["v1"]["ece_increase"] == pytest.approx(0.1, abs=1e-15)
    assert versions["v2"]["ece"] == pytest.approx(0.2, abs=1e-15)
    assert versions["v2"]["baseline"] is None
    segments = {s["value"]: s for s in side["segments"]}
    assert segments["it"]["outcomes"]["pending"] == 1
    assert segments["en"]["accuracy_interval"]["correct"] == 1


def test_decguard_output_unchanged(write, files, ours, ref, tmp_path):
    """The report file and the layout up to DecGuard's verdict are DecGuard's: the reference
    verifies the report and prints the same lines for the same contract without the section."""
    current, baseline = files
    extended = write("c.yaml", textwrap.dedent(EXTENDED))
    plain = write("plain.yaml", textwrap.dedent(BASE))
    out = tmp_path / "check.json"
    mine = ours("check", extended, "-d", current, "--baseline", baseline, "-o", out)
    theirs = ref("check", plain, "-d", current, "--baseline", baseline)
    decguard_part, extension_part = mine.stdout.split("\n\nPipeline extensions\n")
    assert same_text(decguard_part + "\n", theirs.stdout)[0] == same_text(theirs.stdout, "")[0]
    assert "still lack an outcome (25.0%)" in extension_part
    assert "Label drift   TV 0.500 · PSI" in extension_part
    assert f"pipeline results written to {sidecar_path(out)}" in mine.stderr
    verified = ref("check", plain, "-d", current, "--baseline", out)
    assert verified.exit_code == 0 and "Baseline      report · 4 records" in verified.stdout
    doc = json.loads(out.read_text())
    assert "pipeline" not in json.dumps(doc["config"])


def test_without_the_section_nothing_is_added(write, files, ours, tmp_path):
    current, _ = files
    contract = write("plain.yaml", textwrap.dedent(BASE))
    out = tmp_path / "check.json"
    ran = ours("check", contract, "-d", current, "-o", out)
    assert "Pipeline extensions" not in ran.stdout
    assert not sidecar_path(out).exists()


def test_refund_example_extensions_from_the_api():
    """The API always computes them (the Dagster assets record them)."""
    from decguard_pipeline.core.production.check import run_check

    refund = EXAMPLES / "refund"
    report = run_check(refund / "decguard.yaml", dataset=refund / "production-drift.jsonl",
                       baseline=refund / "production.jsonl")  # fmt: skip
    ext = report.extensions
    assert ext["outcomes"]["pending"] == 0
    assert ext["accuracy_interval"]["correct"] == 0 and ext["accuracy_interval"]["low"] == 0.0
    # baseline selects refund, reject, refund, review; the drift set selects refund 4 times
    assert ext["label_drift"]["baseline_counts"] == [2, 1, 1]
    assert ext["label_drift"]["tv_distance"] == 0.5
    z2 = 1.959963984540054**2
    assert ext["accuracy_interval"]["high"] == pytest.approx(z2 / (4 + z2), abs=1e-12)  # 0/4
