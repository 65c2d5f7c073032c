"""The ``calibrator`` step and asset: one calibrator per target fitted on the target's stored
golden answers (never asked again), the same document ``calibrate`` writes, its rows in the
``calibrators``, ``calibrator_metrics`` and ``escalation_sweep`` tables (read through the
catalog's views as the evaluation site reads them), and the report step's sidecar and page
showing it; a calibration dataset is decided through the target's backend."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest
import yaml

from decguard_pipeline.core.guard.extension import guard_enabled
from decguard_pipeline.defs.assets.calibrator import parts
from decguard_pipeline.defs.assets.features import report_inputs
from decguard_pipeline.steps.base import Step
from decguard_pipeline.steps.calibrator import fit_target
from decguard_pipeline.steps.contracts import discover_contracts
from decguard_pipeline.steps.golden import (
    evaluate_target,
    record_contract,
    record_dataset,
    score_target,
    write_report,
)
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline_tests.support.calibration_contracts import generated_model, write_contract

TARGET = "default@gen-v1"
CALIBRATION = {
    "split": {"fraction": 0.5, "seed": 4},
    "conformal": {"alpha": 0.2, "method": "aps"},
    "escalation_cost": 1.5,
    "bootstrap_resamples": 40,
}


def _evaluated(tmp_path: Path, calibration: dict | None, n: int = 200):
    probs, expected, _ = generated_model(seed=6, n=n, kind="over")
    pipeline = None if calibration is None else {"calibration": calibration}
    path = write_contract(tmp_path / "contracts" / "gen", probs, expected, pipeline=pipeline)
    (entry,) = discover_contracts(str(tmp_path / "contracts"))
    step = Step(Warehouse(tmp_path / "wh"), "run-1")
    record_contract(entry, step)
    record_dataset(entry, step)
    evaluate_target(entry, TARGET, step)
    score_target(entry, TARGET, step)
    return entry, step, path


def test_the_step_fits_what_calibrate_fits_and_stores_it(tmp_path, ours):
    entry, step, path = _evaluated(tmp_path, CALIBRATION)
    done = fit_target(entry, TARGET, step)
    # the same calibrator as the command's on the same answers
    ran = ours("calibrate", path, "-o", tmp_path / "cli.json")
    assert ran.exit_code == 0, ran.stderr
    cli = json.loads((tmp_path / "cli.json").read_text())
    stored = json.loads(done.path.read_text())
    for key in ("method", "parameters", "target", "backend", "data", "conformal"):
        assert stored[key] == cli[key], key
    assert done.path.is_relative_to(tmp_path / "wh" / "calibrator_files")
    wh = step.warehouse
    row = wh.query("SELECT * FROM latest_calibrators WHERE contract = 'gen'").to_pylist()[0]
    assert (row["method"], row["target"], row["model_version"]) == (stored["method"], TARGET, None)
    assert row["data_hash"] == stored["data"]["hash"]
    assert row["conformal_method"] == "aps" and row["conformal_alpha"] == 0.2
    assert row["conformal_coverage"] == done.section["conformal"]["coverage"]
    assert row["abstain_below"] == done.section["abstain_below"]["abstain_below"]
    assert row["calibrator_path"] == str(done.path)
    metrics = wh.query(
        "SELECT measure, before, after, low, high FROM latest_calibrator_metrics"
        " WHERE contract = 'gen' ORDER BY measure"
    ).to_pylist()
    rows = {r["measure"]: r for r in done.section["held_out"]["measures"]}
    assert {m["measure"] for m in metrics} == set(rows)
    for m in metrics:
        assert (m["before"], m["after"], m["low"], m["high"]) == tuple(
            rows[m["measure"]][k] for k in ("before", "after", "low", "high")
        )
    sweep = wh.query(
        "SELECT probabilities, threshold, coverage, hand_off_rate, escalation_cost_per_1000"
        " FROM latest_escalation_sweep WHERE contract = 'gen' ORDER BY probabilities, threshold"
    ).to_pylist()
    calibrated = [r for r in sweep if r["probabilities"] == "calibrated"]
    assert len(calibrated) == len(sweep) / 2 == 21
    for got, want in zip(calibrated, done.section["escalation"]["calibrated"], strict=True):
        assert got["coverage"] == want["coverage"]
        handed_off = want["handed_off"] / done.section["held_out"]["n"]
        assert got["escalation_cost_per_1000"] == pytest.approx(1000 * 1.5 * handed_off)
    # the report of the run shows the calibrator: sidecar and page
    written = write_report(entry, TARGET, step)
    sidecar = json.loads(written.path.with_name(written.path.stem + ".pipeline.json").read_text())
    assert sidecar["calibrator"] == done.section
    assert 'id="calibrator"' in written.html.read_text()


def test_a_calibration_dataset_is_decided_through_the_targets_backend(tmp_path):
    entry, step, path = _evaluated(tmp_path, None, n=120)
    # the other 120 cases of a longer run of the same model, as a file of its own
    probs, expected, _ = generated_model(seed=6, n=240, kind="over")
    other = write_contract(tmp_path / "other", probs, expected)
    contract = yaml.safe_load(path.read_text())
    contract["backend"]["rules"] = yaml.safe_load(other.read_text())["backend"]["rules"]
    lines = (other.parent / "cases.jsonl").read_text().splitlines()
    (path.parent / "calibration.jsonl").write_text("\n".join(lines[120:]) + "\n")
    contract["pipeline"] = {"calibration": {"split": {"dataset": "calibration.jsonl"}}}
    path.write_text(yaml.safe_dump(contract, sort_keys=False))
    (entry,) = discover_contracts(str(tmp_path / "contracts"))
    done = fit_target(entry, TARGET, step)
    data = done.section["data"]
    assert (data["n_calibration"], data["n_held_out"]) == (120, 120)
    assert data["split"]["path"].endswith("calibration.jsonl")


def test_the_asset_exists_only_with_calibrator_keys(tmp_path):
    entry, _, _ = _evaluated(tmp_path / "a", {"bins": 5})  # the guard's key only
    assert parts(entry) == [] and dg.AssetKey(["gen", "calibrator"]) not in report_inputs(entry)
    assert guard_enabled(entry.require().contract)
    entry, _, _ = _evaluated(tmp_path / "b", {"split": {"fraction": 0.4}})
    assert [p.name for p in parts(entry)] == ["calibrator"]
    assert dg.AssetKey(["gen", "calibrator"]) in report_inputs(entry)
    # calibrator keys alone do not switch the guard extension on
    assert not guard_enabled(entry.require().contract)
