"""``calibrate`` and calibrators applied at decision time (``test``, ``run``, ``check``, the
contract's ``pipeline.calibration.apply``), checked against an independent computation from
the contract's own files: a synthetic over-confident model (it reports its true
distributions sharpened to the power 2, so the right temperature is 2), the split redone by
hand, the temperature fitted by scipy, the calibrated probabilities by a softmax."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from scipy import optimize, special

from decguard_pipeline_tests.support.calibration_contracts import (
    LABELS,
    generated_model,
    token,
    write_contract,
)

POLICY = {"routes": [{"when": {"confidence_gte": 0.8}, "action": "accept"},
                     {"action": "human_review"}]}  # fmt: skip
SPLIT = {"fraction": 0.5, "seed": 7}


def _contract(
    folder: Path, *, n: int = 600, calibration: dict[str, Any] | None = None, version: str = "v1"
) -> Path:
    probs, expected, _ = generated_model(seed=21, n=n, kind="over")
    pipeline = {"calibration": calibration} if calibration is not None else None
    path = write_contract(folder, probs, expected, pipeline=pipeline, top={"policy": POLICY})
    contract = yaml.safe_load(path.read_text())
    contract["backend"]["model_version"] = version
    path.write_text(yaml.safe_dump(contract, sort_keys=False))
    return path


def _answers(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """The mock's probabilities (as its rules give them) and the expected labels, read from
    the contract's files."""
    contract = yaml.safe_load(path.read_text())
    rules = contract["backend"]["rules"]
    probs = np.array([[rule["probabilities"][label] for label in LABELS] for rule in rules])
    cases = [json.loads(line) for line in (path.parent / "cases.jsonl").read_text().splitlines()]
    expected = np.array([LABELS.index(case["expected"]) for case in cases])
    return probs, expected


def _split_by_hand(expected: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """docs/contracts.md: per label in the contract's order, that label's cases shuffled by
    one generator seeded with the seed; the first round(fraction x count) fit."""
    rng = np.random.default_rng(seed)
    chosen = np.zeros(len(expected), dtype=bool)
    for label in range(len(LABELS)):
        rows = np.flatnonzero(expected == label)
        take = math.floor(fraction * len(rows) + 0.5)
        chosen[rng.permutation(rows)[:take]] = True
    return chosen


def _log(p: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):  # the mock's rounded probabilities hold some zeros
        return np.log(p)


def _scipy_temperature(probs: np.ndarray, expected: np.ndarray) -> float:
    z = _log(probs)
    usable = np.isfinite(z[np.arange(len(expected)), expected])  # others: inf at every T
    z, expected = z[usable], expected[usable]

    def nll(t: float) -> float:
        return -np.mean(special.log_softmax(z / t, axis=1)[np.arange(len(expected)), expected])

    return float(
        optimize.minimize_scalar(
            nll, bounds=(0.01, 100), method="bounded", options={"xatol": 1e-12}
        ).x
    )


def test_fitted_temperature_and_run_calibrator_match_an_independent_computation(tmp_path, ours):
    path = _contract(tmp_path / "c", calibration={"split": SPLIT, "method": "temperature"})
    ran = ours("calibrate", path, "-o", tmp_path / "cal.json", "--format", "json")
    assert ran.exit_code == 0, ran.stderr
    section = json.loads(ran.stdout)
    document = json.loads((tmp_path / "cal.json").read_text())
    probs, expected = _answers(path)
    fits = _split_by_hand(expected, 0.5, 7)
    t = _scipy_temperature(probs[fits], expected[fits])
    assert t == pytest.approx(2.0, rel=0.15)  # the sharpening the model applied
    assert document["parameters"]["temperature"] == pytest.approx(t, rel=1e-7)
    assert document["method"] == "temperature" and document["logits"] == "log_probabilities"
    assert document["target"] == "default@v1"
    assert document["backend"] == {
        "name": "default", "provider": "mock", "model": "gen-v1", "model_version": "v1"
    }  # fmt: skip
    assert document["data"]["n_calibration"] == int(fits.sum())
    assert document["data"]["n_held_out"] == int((~fits).sum())
    # the held-out numbers are the held-out cases', before and after
    held = ~fits
    scaled = special.softmax(_log(probs[held]) / t, axis=1)
    rows = {row["measure"]: row for row in section["held_out"]["measures"]}
    picked = np.arange(int(held.sum())), expected[held]
    assert rows["nll"]["before"] == pytest.approx(-np.mean(np.log(probs[held][picked])))
    assert rows["nll"]["after"] == pytest.approx(-np.mean(np.log(scaled[picked])), rel=1e-6)
    assert rows["accuracy"]["change"] == 0.0 and section["top_label_changes"] == 0
    assert rows["ece"]["after"] < rows["ece"]["before"]
    # run --calibrator: the decision is made on softmax(log p / T)
    for case in (3, 100, 401):
        ran = ours("run", path, f"message {token(case)}", "--calibrator", tmp_path / "cal.json",
                   "--format", "json")  # fmt: skip
        assert ran.exit_code == 0, ran.stderr
        decision = json.loads(ran.stdout)
        result = decision["result"]
        by_hand = special.softmax(_log(probs[case]) / t)
        got = [result["probabilities"][label] for label in LABELS]
        np.testing.assert_allclose(got, by_hand, rtol=1e-6)
        assert result["selected"] == LABELS[int(np.argmax(by_hand))]
        assert result["confidence"] == max(got)
        note = result["metadata"]["calibration"]
        assert [note["raw_probabilities"][label] for label in LABELS] == probs[case].tolist()
        assert note["method"] == "temperature" and note["target"] == "default@v1"
        assert decision["action"] == ("accept" if max(got) >= 0.8 else "human_review")


def test_another_model_version_is_refused_everywhere(tmp_path, ours):
    path = _contract(tmp_path / "c", n=120, calibration={"split": SPLIT})
    assert ours("calibrate", path, "-o", tmp_path / "cal.json").exit_code == 0
    newer = _contract(tmp_path / "c2", n=120, version="v2")
    cal = tmp_path / "cal.json"
    records = tmp_path / "records.jsonl"
    records.write_text(
        json.dumps({"decision": "grade", "probabilities": {"low": 0.2, "mid": 0.3, "high": 0.5},
                    "selected": "high", "backend": "default", "model_version": "v2"}) + "\n"
    )  # fmt: skip
    for args in (
        ("run", newer, f"message {token(1)}", "--calibrator", cal),
        ("test", newer, "--calibrator", cal),
        ("check", newer, "-d", records, "--calibrator", cal),
    ):
        ran = ours(*args)
        assert ran.exit_code == 2, (args[0], ran.stdout, ran.stderr)
        assert "calibrator for default@v1 cannot calibrate model version v2" in ran.stderr
        assert "Traceback" not in ran.stderr


def test_a_broken_calibrator_file_is_named(tmp_path, ours):
    path = _contract(tmp_path / "c", n=60)
    bad = tmp_path / "cal.json"
    bad.write_text(json.dumps({"calibrator_version": "0.1", "method": "magic"}))
    ran = ours("run", path, "message", "--calibrator", bad)
    assert ran.exit_code == 2
    assert f"{bad}: invalid calibrator:" in ran.stderr and "method" in ran.stderr
    bad.write_text("{")
    assert "invalid JSON" in ours("test", path, "--calibrator", bad).stderr


def test_test_calibrator_reports_the_calibrated_decider_and_the_raw_numbers(tmp_path, ours):
    path = _contract(tmp_path / "c", n=300, calibration={"split": SPLIT})
    assert ours("calibrate", path, "-o", tmp_path / "cal.json").exit_code == 0
    out = tmp_path / "out" / "r.json"
    ran = ours("test", path, "--calibrator", tmp_path / "cal.json", "-o", out)
    assert ran.exit_code == 0, ran.stderr
    report = json.loads(out.read_text())
    sidecar = json.loads(out.with_name("r.pipeline.json").read_text())
    probs, expected = _answers(path)
    t = json.loads((tmp_path / "cal.json").read_text())["parameters"]["temperature"]
    first = report["results"][0]["result"]
    np.testing.assert_allclose(
        [first["probabilities"][label] for label in LABELS],
        special.softmax(_log(probs[0]) / t),
        rtol=1e-9,
    )
    # DecGuard's numbers are the calibrated decider's, the raw ones are beside them
    calibrated = special.softmax(_log(probs) / t, axis=1)
    picked = np.arange(len(expected)), expected
    assert report["metrics"]["calibration"]["nll"] == pytest.approx(
        -np.mean(np.log(calibrated[picked])), rel=1e-9
    )
    rows = {row["metric"]: row for row in sidecar["calibrated"]["metrics"]}
    assert rows["nll"]["raw"] == pytest.approx(-np.mean(np.log(probs[picked])), rel=1e-9)
    assert rows["nll"]["calibrated"] == report["metrics"]["calibration"]["nll"]
    fits = _split_by_hand(expected, 0.5, 7)
    assert sidecar["calibrated"]["fitted_on_these_cases"] == int(fits.sum())
    assert "Calibrated decisions · temperature for default@v1" in ran.stdout
    # the reference DecGuard verifies the calibrated report as it verifies its own
    from decguard.cli import app
    from typer.main import get_command

    from decguard_pipeline_tests.conftest import _invoke

    assert _invoke(get_command(app), ["report", str(out)], "decguard").exit_code == 0


def test_the_contract_names_its_calibrator(tmp_path, ours):
    path = _contract(tmp_path / "c", n=200, calibration={"split": SPLIT})
    assert ours("calibrate", path, "-o", path.parent / "calibrator.json").exit_code == 0
    contract = yaml.safe_load(path.read_text())
    contract["pipeline"]["calibration"]["apply"] = "calibrator.json"
    path.write_text(yaml.safe_dump(contract, sort_keys=False))
    ran = ours("run", path, f"message {token(0)}", "--format", "json")
    assert ran.exit_code == 0, ran.stderr
    assert json.loads(ran.stdout)["result"]["metadata"]["calibration"]["target"] == "default@v1"


def test_check_calibrator_redecides_production_records(tmp_path, ours):
    path = _contract(tmp_path / "c", n=300, calibration={"split": SPLIT})
    assert ours("calibrate", path, "-o", tmp_path / "cal.json").exit_code == 0
    probs, expected = _answers(path)
    t = json.loads((tmp_path / "cal.json").read_text())["parameters"]["temperature"]
    lines = []
    for i in range(40):
        p = dict(zip(LABELS, probs[i].tolist(), strict=True))
        lines.append({"id": f"r{i}", "decision": "grade", "probabilities": p,
                      "selected": LABELS[int(np.argmax(probs[i]))], "backend": "default",
                      "model": "gen-v1", "model_version": "v1",
                      "outcome": LABELS[expected[i]]})  # fmt: skip
    records = tmp_path / "records.jsonl"
    records.write_text("".join(json.dumps(r) + "\n" for r in lines))
    out = tmp_path / "check.json"
    ran = ours("check", path, "-d", records, "--calibrator", tmp_path / "cal.json", "-o", out)
    assert ran.exit_code == 0, ran.stderr
    section = json.loads(out.with_name("check.pipeline.json").read_text())["calibrated"]
    rows = {row["measure"]: row for row in section["measures"]}
    calibrated = special.softmax(_log(probs[:40]) / t, axis=1)
    picked = np.arange(40), expected[:40]
    assert rows["nll"]["before"] == pytest.approx(-np.mean(np.log(probs[:40][picked])))
    assert rows["nll"]["after"] == pytest.approx(-np.mean(np.log(calibrated[picked])), rel=1e-9)
    assert section["n_with_outcome"] == 40
    raw_accept = float(np.mean(probs[:40].max(axis=1) >= 0.8))
    assert section["routes"]["raw"]["accept"] == pytest.approx(raw_accept)
    assert section["routes"]["calibrated"]["accept"] == pytest.approx(
        float(np.mean(calibrated.max(axis=1) >= 0.8))
    )
    assert "Calibrated · temperature for default@v1" in ran.stdout


def test_retry_errors_replays_the_raw_answers_of_a_calibrated_report(tmp_path, ours):
    path = _contract(tmp_path / "c", n=100, calibration={"split": SPLIT})
    assert ours("calibrate", path, "-o", tmp_path / "cal.json").exit_code == 0
    first = tmp_path / "first.json"
    assert ours("test", path, "--calibrator", tmp_path / "cal.json", "-o", first).exit_code == 0
    again = tmp_path / "again.json"
    ran = ours("test", path, "--calibrator", tmp_path / "cal.json", "--retry-errors", first,
               "-o", again)  # fmt: skip
    assert ran.exit_code == 0, ran.stderr
    # calibrated once, not twice: the replayed answers are the model's own
    before, after = json.loads(first.read_text()), json.loads(again.read_text())
    assert [r["result"]["probabilities"] for r in after["results"]] == [
        r["result"]["probabilities"] for r in before["results"]
    ]
    assert after["results"][0]["result"]["metadata"] == before["results"][0]["result"]["metadata"]


def test_validate_reads_the_calibration_dataset_and_the_applied_calibrator(tmp_path, ours):
    path = _contract(tmp_path / "c", n=60, calibration={"split": {"dataset": "cal.jsonl"}})
    ran = ours("validate", path)
    assert ran.exit_code == 2 and "cal.jsonl" in ran.stderr  # named, not a traceback
    (path.parent / "cal.jsonl").write_text((path.parent / "cases.jsonl").read_text())
    ran = ours("validate", path)
    assert ran.exit_code == 0, ran.stderr
    assert "calibrator auto on " in ran.stdout and "cal.jsonl: 60 cases, 60 labeled" in ran.stdout
    contract = yaml.safe_load(path.read_text())
    contract["pipeline"]["calibration"] = {"apply": "missing.json"}
    path.write_text(yaml.safe_dump(contract, sort_keys=False))
    ran = ours("validate", path)
    assert ran.exit_code == 2 and "missing.json: cannot read calibrator" in ran.stderr
