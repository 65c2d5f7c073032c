"""``check`` against decguard 0.1.1 on generated record sets: same layout, same JSON report
(bar version and timestamp), same exit code; the refund example's documented numbers; each
CLI verifies the other's stored report."""

from __future__ import annotations

import json
import random
import textwrap
from pathlib import Path
from typing import Any

import pytest

from decguard_pipeline_tests.conftest import EXAMPLES, same_text
from decguard_pipeline_tests.support.production_records import (
    CONTRACTS,
    make_record,
    run_both,
    write_records,
)

REFUND = EXAMPLES / "refund"


def contract_file(write: Any, kind: str, extra: str = "") -> Path:
    return write(f"{kind}.yaml", textwrap.dedent(CONTRACTS[kind]) + extra)


@pytest.mark.parametrize("kind", ["choice", "score", "noul"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_generated_records_match_reference(kind, seed, ours, ref, write, tmp_path):
    rng = random.Random(seed * 31 + len(kind))
    contract = contract_file(write, kind)
    suffix = ".json" if seed == 3 else ".jsonl"
    current = write_records(
        tmp_path / f"current{suffix}", [make_record(rng, kind, i) for i in range(60)]
    )
    base = write_records(tmp_path / "base.jsonl", [make_record(rng, kind, i) for i in range(25)])
    run_both(ours, ref, contract, "--dataset", current)
    run_both(ours, ref, contract, "--dataset", current, "--baseline", base)
    run_both(ours, ref, contract, "--dataset", current, "--baseline", base, "--fail-on-warn")


def test_refund_example_reproduces_documented_numbers(ours, ref):
    contract = REFUND / "decguard.yaml"
    healthy = ours("check", contract, "--dataset", REFUND / "production.jsonl")
    assert healthy.exit_code == 0
    for line in (
        "  Records       4 total · 4 with correctness · 4 with label outcome",
        "  Outcomes      accuracy 1.000 · error 0.000",
        "  Calibration   ECE 0.160 · Brier 0.060 · NLL 0.185",
        "  Confidence    mean 0.840 · p50 0.875 · p95 0.951",
        "  Threshold     confidence >= 0.8: coverage 0.750",
        "  Routing       abstain 0.000 · fallback 0.500 · review 0.250",
        "    PASS locale=en · 2 records · accuracy 1.000 · ECE 0.070",
        "    PASS locale=it · 2 records · accuracy 1.000 · ECE 0.250",
    ):
        assert line in healthy.stdout.splitlines()
    for message in ("accuracy 1 >= 0.9", "ece 0.16 <= 0.25", "threshold_coverage 0.75 >= 0.5",
                    "fallback_rate 0.5 <= 0.6", "segment[locale=en].accuracy 1 >= 0.8",
                    "segment[locale=it].accuracy 1 >= 0.8"):  # fmt: skip
        assert message in healthy.stdout
    drift = ours(
        "check", contract, "--dataset", REFUND / "production-drift.jsonl",
        "--baseline", REFUND / "production.jsonl",
    )  # fmt: skip
    assert drift.exit_code == 1
    for line in (
        "  Outcomes      accuracy 0.000 · error 1.000",
        "  Calibration   ECE 0.975 · Brier 1.924 · NLL 4.432",
        "  Confidence    mean 0.975 · p50 0.975 · p95 0.989",
        "  Baseline      dataset · 4 records",
        "  Drift         confidence TV 0.750 · mean delta 0.135 · accuracy drop 1.000 · "
        "ECE increase 0.815",
        "    FAIL locale=en · 2 records · accuracy 0.000 · ECE 0.985",
        "    FAIL locale=it · 2 records · accuracy 0.000 · ECE 0.965",
    ):
        assert line in drift.stdout.splitlines()
    run_both(ours, ref, contract, "--dataset", REFUND / "production.jsonl")
    run_both(ours, ref, contract, "--dataset", REFUND / "production-drift.jsonl",
             "--baseline", REFUND / "production.jsonl")  # fmt: skip


def test_refund_metrics_hand_computed(ours):
    """ECE of the healthy set by hand: bins (0.6,0.7] {.65 ok}, (0.8,0.9] {.85 ok, .9 ok},
    (0.9,1] {.96 ok} -> (1·.35 + 2·.125 + 1·.04)/4 = 0.16."""
    doc = json.loads(
        ours(
            "check", REFUND / "decguard.yaml", "-d", REFUND / "production.jsonl", "-f", "json"
        ).stdout
    )
    m = doc["metrics"]
    assert m["calibration"]["ece"] == pytest.approx((0.35 + 2 * 0.125 + 0.04) / 4, abs=1e-15)
    assert m["confidence"]["p50"] == pytest.approx(0.875, abs=1e-15)
    assert m["confidence"]["histogram"] == [0, 0, 0, 0, 0, 0, 1, 0, 2, 1]
    assert m["routing"] == {"n_actions": 4, "abstention_rate": 0.0, "human_review_rate": 0.25,
                            "n_fallback": 4, "fallback_rate": 0.5}  # fmt: skip
    assert [r["outcome_correct"] for r in doc["records"]] == [True] * 4


def test_each_cli_verifies_the_others_report(ours, ref, tmp_path):
    contract = REFUND / "decguard.yaml"
    mine, theirs = tmp_path / "ours.json", tmp_path / "theirs.json"
    assert ours("check", contract, "-d", REFUND / "production.jsonl", "-o", mine).exit_code == 0
    assert ref("check", contract, "-d", REFUND / "production.jsonl", "-o", theirs).exit_code == 0
    drift = REFUND / "production-drift.jsonl"
    a = ours("check", contract, "-d", drift, "--baseline", theirs)
    b = ref("check", contract, "-d", drift, "--baseline", mine)
    assert a.exit_code == b.exit_code == 1
    assert "  Baseline      report · 4 records" in a.stdout.splitlines()
    assert same_text(a.stdout, a.stdout)[0] == same_text(b.stdout, b.stdout)[0]


def test_generated_report_round_trip(ours, ref, write, tmp_path):
    """A report with a baseline and every field variant: each side verifies the other's."""
    rng = random.Random(7)
    contract = contract_file(write, "choice")
    current = write_records(
        tmp_path / "c.jsonl", [make_record(rng, "choice", i) for i in range(80)]
    )
    base = write_records(tmp_path / "b.jsonl", [make_record(rng, "choice", i) for i in range(30)])
    mine, theirs = tmp_path / "ours.json", tmp_path / "theirs.json"
    ours("check", contract, "-d", current, "--baseline", base, "-o", mine)
    ref("check", contract, "-d", current, "--baseline", base, "-o", theirs)
    for baseline in (mine, theirs):
        run_both(ours, ref, contract, "-d", base, "--baseline", baseline)


def test_contracts_cover_every_gate():
    import yaml

    from decguard_pipeline.core.contract import ProductionGates, SegmentGates

    seen: dict[str, set[str]] = {}
    for text in CONTRACTS.values():
        production = yaml.safe_load(textwrap.dedent(text))["production"]
        for section, gates in production.items():
            if section != "segments":
                seen.setdefault(section, set()).update(gates)
    assert seen["requirements"] == seen["warnings"] == set(ProductionGates.model_fields)
    assert seen["segment_requirements"] == set(SegmentGates.model_fields)
    assert seen["segment_warnings"] == set(SegmentGates.model_fields)
