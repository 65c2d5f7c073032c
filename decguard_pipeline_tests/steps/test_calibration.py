"""The golden steps with the calibration measures: score_target's ``calibration``,
``calibration_curve`` and ``gate_results`` rows hold the library's numbers recomputed from the
target's report, and the report step's sidecar holds what ``test -o`` writes."""

from __future__ import annotations

import json
from pathlib import Path

from decguard_pipeline.core.calibration.section import calibration_section
from decguard_pipeline.steps.base import Step
from decguard_pipeline.steps.contracts import discover_contracts
from decguard_pipeline.steps.golden import (
    evaluate_target,
    golden_report,
    record_contract,
    record_dataset,
    score_target,
    write_report,
)
from decguard_pipeline.steps.verdict import decide_target
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline_tests.support.calibration_contracts import (
    LABELS,
    generated_model,
    labeled_rows,
    write_contract,
)

TARGET = "default@gen-v1"
SETTINGS = {"bootstrap_resamples": 30, "seed": 5, "bins": 6}
GATES = {"requirements": {"max_smece": 0.9}, "warnings": {"max_classwise_ece": 0.001}}


def _scored(tmp_path: Path, pipeline: dict | None):
    probs, expected, _ = generated_model(seed=2, n=120, kind="under")
    write_contract(tmp_path / "contracts" / "gen", probs, expected, pipeline=pipeline)
    (entry,) = discover_contracts(str(tmp_path / "contracts"))
    step = Step(Warehouse(tmp_path / "wh"), "run-1")
    record_contract(entry, step)
    record_dataset(entry, step)
    evaluate_target(entry, TARGET, step)
    scored = score_target(entry, TARGET, step)
    decide_target(entry, TARGET, step)  # the evaluation is complete: latest_* shows it
    return entry, step, scored


def test_rows_hold_the_library_numbers(tmp_path):
    _, step, golden = _scored(tmp_path, {"calibration_measures": SETTINGS, **GATES})
    probs, expected = labeled_rows(golden.report.full())
    independent = calibration_section(probs, expected, n_bins=6, n_bootstrap=30, seed=5)
    headline = independent.headline()
    wh = step.warehouse
    rows = wh.query(
        "SELECT * FROM latest_calibration WHERE contract = 'gen' ORDER BY measure, label"
    ).to_pylist()
    by_measure = {r["measure"]: r for r in rows if r["label"] is None}
    expected_measures = set(headline) - {"smece_low", "smece_high"}
    assert set(by_measure) == expected_measures
    for measure in expected_measures:
        assert by_measure[measure]["value"] == headline[measure], measure
    smece = by_measure["smece"]
    assert (smece["low"], smece["high"]) == (headline["smece_low"], headline["smece_high"])
    assert by_measure["temperature"]["low"] is None
    per_label = {r["label"]: r["value"] for r in rows if r["measure"] == "ece_label"}
    assert per_label == dict(zip(LABELS, independent.ece_per_label, strict=True))
    assert {r["n_cases"] for r in rows} == {120}
    assert json.loads(rows[0]["settings_json"])["bins"] == 6
    who = wh.query("SELECT DISTINCT backend, model_version FROM latest_metrics").to_pylist()
    assert [{"backend": r["backend"], "model_version": r["model_version"]} for r in rows[:1]] == who

    curve = wh.query(
        "SELECT * FROM latest_calibration_curve WHERE contract = 'gen' ORDER BY point"
    ).to_pylist()
    c = independent.smooth.curve
    assert [r["confidence"] for r in curve] == list(c.mesh)
    assert [r["accuracy"] for r in curve] == list(c.accuracy)
    assert [(r["lower"], r["upper"]) for r in curve] == list(zip(c.lower, c.upper, strict=True))
    assert [r["density"] for r in curve] == list(c.density)

    checks = wh.query(
        "SELECT source, gate, level, status, value FROM latest_gate_results "
        "WHERE contract = 'gen' AND source = 'calibration'"
    ).to_pylist()
    assert checks == [
        {"source": "calibration", "gate": "max_smece", "level": "requirement",
         "status": "pass", "value": headline["smece"]},
        {"source": "calibration", "gate": "max_classwise_ece", "level": "warning",
         "status": "warn", "value": headline["ece_classwise"]},
    ]  # fmt: skip
    golden_rows = wh.query(
        "SELECT gate FROM latest_gate_results WHERE contract = 'gen' AND source = 'golden'"
    ).to_pylist()
    assert golden_rows == [{"gate": "max_error_rate"}]  # DecGuard's checks are still there


def test_report_sidecar_is_what_test_writes(tmp_path, ours):
    pipeline = {"calibration_measures": SETTINGS, **GATES}
    entry, step, _ = _scored(tmp_path, pipeline)
    written = write_report(entry, TARGET, step)
    path, report = written.path, written.report
    sidecar = json.loads(path.with_name(path.stem + ".pipeline.json").read_text())
    out = tmp_path / "cli" / "r.json"
    ours("test", entry.path, "-o", out)
    cli = json.loads(out.with_name("r.pipeline.json").read_text())
    assert sidecar["calibration"] == cli["calibration"]
    assert sidecar["status"] == "warn" and report.status == "pass"


def test_nothing_without_the_extension(tmp_path):
    entry, step, golden = _scored(tmp_path, None)
    assert golden.calibration is None
    assert golden_report(entry, TARGET, step.warehouse).calibration is None
    assert step.warehouse.query("SELECT count(*) AS n FROM calibration").to_pylist() == [{"n": 0}]


def test_diff_step_writes_the_comparison(tmp_path):
    """The regression diff of a recalibrated candidate against its over-confident baseline:
    ``diff_calibration`` rows are the sidecar's section, next to the statistics."""
    from decguard_pipeline.steps.diff import diff_target
    from decguard_pipeline_tests.support.evaluations import evaluate

    probs, expected, truth = generated_model(seed=7, n=200, kind="over")
    pipeline = {"calibration_measures": {"bootstrap_resamples": 30}, "statistics": {}}
    write_contract(
        tmp_path / "contracts" / "gen", probs, expected, pipeline=pipeline, candidate=truth
    )
    (entry,) = discover_contracts(str(tmp_path / "contracts"))
    wh = Warehouse(tmp_path / "wh")
    evaluate(entry, TARGET, wh, "run-1")
    evaluate(entry, "candidate@gen-v2", wh, "run-2")
    outcome = diff_target(entry, "candidate@gen-v2", Step(wh, "run-2"))
    assert outcome.baseline_target == TARGET
    section = outcome.diff.calibration
    assert section["verdict"] == {"honesty": "more honest", "discrimination": "no clear change"}
    sidecar = json.loads(outcome.sidecar.read_text())
    assert sidecar["calibration"] == json.loads(json.dumps(section))
    assert "overall" in sidecar  # the statistics are still there
    rows = wh.query(
        "SELECT score, component, baseline, candidate, delta, low, high, verdict, n_cases "
        "FROM latest_diff_calibration ORDER BY score, component"
    ).to_pylist()
    assert len(rows) == 12 and {r["n_cases"] for r in rows} == {200}
    for r in rows:
        sides = section["decomposition"][r["score"]]
        assert (r["baseline"], r["candidate"], r["delta"]) == (
            sides["baseline"][r["component"]],
            sides["candidate"][r["component"]],
            sides["delta"][r["component"]],
        )
    mcb = next(r for r in rows if (r["score"], r["component"]) == ("brier", "miscalibration"))
    interval = section["intervals"]["miscalibration"]
    assert (mcb["low"], mcb["high"], mcb["verdict"]) == (
        interval["low"],
        interval["high"],
        "more honest",
    )
    assert all(r["verdict"] is None for r in rows if r["score"] != "brier")


def test_measured_once_per_evaluation_and_not_for_a_diff(tmp_path, monkeypatch):
    """The golden metrics and the report of one run measure the evaluation once (a bootstrap
    each time before); a diff, which compares the reports' own numbers, measures nothing."""
    import decguard_pipeline.core.calibration.extension as extension

    calls = []
    measure = extension.calibration_extension

    def counted(*args, **kwargs):
        calls.append(1)
        return measure(*args, **kwargs)

    monkeypatch.setattr(extension, "calibration_extension", counted)
    entry, step, golden = _scored(tmp_path, {"calibration_measures": SETTINGS, **GATES})
    written = write_report(entry, TARGET, step)
    assert len(calls) == 1
    assert written.report.extensions["calibration"] == golden.calibration
    assert golden_report(entry, TARGET, step.warehouse, measures=False).calibration is None
    assert len(calls) == 1
