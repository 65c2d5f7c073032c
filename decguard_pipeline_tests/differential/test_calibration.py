"""The calibration measures leave DecGuard's output alone: on generated contracts (every
decision type, unlabeled cases, thresholds, bins, gates), ``test`` of the contract with a
``pipeline.calibration_measures`` section and calibration warning gates writes decguard 0.1.1's
report of the contract without it (the contract hash aside, which covers the pipeline section),
prints its text line for line before the calibration block (its final line moved after the
block, as the verdict over both gates), and exits as it does unless ``--fail-on-warn`` meets
a failing calibration warning."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from decguard_pipeline.core.calibration.render import render_calibration
from decguard_pipeline.core.gates import overall_status
from decguard_pipeline_tests.conftest import same_text
from decguard_pipeline_tests.support.golden_cases import comparable, write_inputs

STRICT = {"max_smece": 0.05, "max_selective_risk": 0.2}  # generated models fail these
LOOSE = {"max_smece": 1.0}
HASH = re.compile(r"sha256:[0-9a-f]+")


def _without_hash(doc: dict[str, Any]) -> dict[str, Any]:
    doc = comparable(doc)
    doc["contract"].pop("hash")
    return doc


@pytest.mark.parametrize("seed", range(24))
def test_report_and_text_are_decguards(seed, ours, ref, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plain_path, _, contract = write_inputs(tmp_path, seed)
    pipeline = {
        "calibration_measures": {"bootstrap_resamples": 20},
        "warnings": STRICT if seed // 2 % 2 else LOOSE,
    }
    extended = tmp_path / "extended.yaml"
    extended.write_text(yaml.safe_dump({**contract, "pipeline": pipeline}, sort_keys=False))
    args: list[Any] = ["--fail-on-warn"] if seed % 2 else []
    b = ref("test", plain_path.name, "-o", "ref.json", *args)
    a = ours("test", extended.name, "-o", "ours.json", *args)
    if b.exit_code == 2:
        assert (a.exit_code, a.stderr) == (2, b.stderr.replace(plain_path.name, extended.name))
        return
    ours_doc = json.loads(Path("ours.json").read_text())
    ref_doc = json.loads(Path("ref.json").read_text())
    ours_doc["contract"]["path"] = ref_doc["contract"]["path"]
    assert _without_hash(ours_doc) == _without_hash(ref_doc)
    section = json.loads(Path("ours.pipeline.json").read_text())["calibration"]
    warned = section["status"] == "warn" and bool(args)
    assert a.exit_code == (1 if warned else b.exit_code)
    # DecGuard's layout up to its final line, our section, then the final line: the
    # verdict over DecGuard's gates and the calibration gates
    decguard_part, _, block = a.stdout.partition("\n\n  Calibration measures")
    block, _, final = block.rpartition("\n\n")
    ref_part, _, _ = b.stdout.rpartition("\n\n")
    mine, theirs = same_text(HASH.sub("H", decguard_part + "\n"), HASH.sub("H", ref_part + "\n"))
    assert [line.replace(extended.name, plain_path.name) for line in mine] == theirs
    assert "  Calibration measures" + block == render_calibration(section)
    worst = overall_status([{"status": ref_doc["status"]}, {"status": section["status"]}])
    assert final.startswith(f"Pipeline verdict: {worst.upper()} — ") and final.endswith("\n")
