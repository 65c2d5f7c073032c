"""Differential tests of the golden path against decguard==0.1.1.

A seeded generator writes contracts and datasets that cover the three decision types,
unlabeled cases, object inputs, thresholds on and off, several bin counts, every mock
answer path (rules, default, hashed fallback, position_bias) and probability-tolerance
edges. Both CLIs run each one in-process; reports must agree on everything but the
producer version, timestamps and measured latency, and the terminal text line for line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from decguard_pipeline_tests.conftest import same_text
from decguard_pipeline_tests.support.golden_cases import comparable, write_inputs


def _run_both(ours, ref, tmp_path: Path, args: list[Any]) -> tuple[Any, Any, Path, Path]:
    mine, theirs = tmp_path / "ours.json", tmp_path / "ref.json"
    a = ours(*args, "-o", mine)
    b = ref(*args, "-o", theirs)
    return a, b, mine, theirs


SEEDS = range(150)


@pytest.mark.parametrize("seed", SEEDS)
def test_generated_contract_matches_reference(seed, ours, ref, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    contract_path, _, contract = write_inputs(tmp_path, seed)
    args: list[Any] = ["test", contract_path.name]
    if "backends" in contract and seed % 2:
        args += ["-b", "alt"]
    if seed % 5 == 0:
        args += ["--fail-on-warn"]
    a, b, mine, theirs = _run_both(ours, ref, tmp_path, args)
    assert a.exit_code == b.exit_code, (a.stderr, b.stderr)
    if b.exit_code == 2:
        assert a.stderr == b.stderr
        assert not mine.exists() and not theirs.exists()
        return
    ours_doc, ref_doc = json.loads(mine.read_text()), json.loads(theirs.read_text())
    assert comparable(ours_doc) == comparable(ref_doc)
    assert ours_doc["decguard_version"].startswith("pipeline-")
    mine_text, ref_text = same_text(a.stdout, b.stdout)
    assert mine_text == ref_text


@pytest.mark.parametrize("seed", range(0, 60, 7))
def test_validate_matches_reference(seed, ours, ref, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    contract_path, dataset, _ = write_inputs(tmp_path, seed)
    for extra in ([], ["-d", dataset.name]):
        a, b = (
            ours("validate", contract_path.name, *extra),
            ref("validate", contract_path.name, *extra),
        )
        assert (a.exit_code, a.stdout, a.stderr) == (b.exit_code, b.stdout, b.stderr)
