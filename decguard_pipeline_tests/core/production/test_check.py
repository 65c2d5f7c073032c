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

REFUND = EXAMPLES / "refund"

# Across the three contracts every production gate appears as a requirement and as a
# warning, and every segment gate as a segment requirement and a segment warning.
CONTRACTS = {
    "choice": """
        schema_version: "0.1"
        decision: {name: route, type: choice, options: [refund, reject, review]}
        backend: {provider: mock}
        evaluation: {confidence_threshold: 0.6, calibration_bins: 7}
        production:
          segments: [locale, tier]
          requirements: {min_accuracy: 0.4, max_ece: 0.5, max_fallback_rate: 0.9,
                         max_confidence_tv_distance: 0.6, max_accuracy_drop: 0.3}
          warnings: {max_brier: 0.9, max_nll: 1.5, min_threshold_coverage: 0.5,
                     max_abstention_rate: 0.2, max_error_rate: 0.5, max_ece_increase: 0.1}
          segment_requirements: {min_accuracy: 0.3, max_error_rate: 0.9}
          segment_warnings: {max_ece: 0.3, min_threshold_coverage: 0.4, max_abstention_rate: 0.3,
                             max_fallback_rate: 0.5, max_brier: 1.0, max_nll: 2.0}
    """,
    "score": """
        schema_version: "0.1"
        decision: {name: severity, type: score, levels: [1, 2, 3, 4]}
        backend: {provider: mock}
        evaluation: {probability_tolerance: 0.01}
        production:
          segments: [team]
          requirements: {max_error_rate: 0.7, max_ece_increase: 0.2}
          warnings: {min_accuracy: 0.9, max_accuracy_drop: 0.01, max_confidence_tv_distance: 0.1}
          segment_requirements: {max_brier: 1.2}
          segment_warnings: {min_accuracy: 0.5, max_error_rate: 0.4}
    """,
    "noul": """
        schema_version: "0.1"
        decision: {name: spam, type: noul, labels: [spam, ham]}
        backend: {provider: mock}
        evaluation: {confidence_threshold: 0.9, calibration_bins: 1}
        production:
          segments: [locale]
          requirements: {min_threshold_coverage: 0.2, max_abstention_rate: 0.5, max_brier: 0.6,
                         max_nll: 0.9}
          warnings: {max_ece: 0.1, max_fallback_rate: 0.3}
          segment_requirements: {max_ece: 0.4, max_nll: 1.0, min_threshold_coverage: 0.3,
                                 max_abstention_rate: 0.4, max_fallback_rate: 0.5}
    """,
}
NAMES = {"choice": "route", "score": "severity", "noul": "spam"}
LABELS = {
    "choice": ["refund", "reject", "review"],
    "score": ["1", "2", "3", "4"],
    "noul": ["spam", "ham"],
}
ACTIONS = ["accept", "abstain", "fallback", "human_review"]
SEGMENT_VALUES: list[Any] = ["en", "it", "de", None, True, False, 1, 2, 1.5, -0.5, "1", "x'y"]
ABSENT = object()


def distribution(rng: random.Random, k: int) -> list[float]:
    """A distribution in hundredths, sometimes with a tie for the maximum."""
    if rng.random() < 0.1:
        cut = [50, 50] + [0] * (k - 2)
        rng.shuffle(cut)
        return [c / 100 for c in cut]
    points = sorted(rng.sample(range(1, 100), k - 1))
    parts = [b - a for a, b in zip([0, *points], [*points, 100], strict=True)]
    return [p / 100 for p in parts]


# per segment key, one JSON type per file: what a typed logger writes (the columnar path)
UNIFORM_SEGMENTS: dict[str, list[Any]] = {
    "locale": ["en", "it", "de", None],
    "tier": [1, 2, 3, None],
    "team": [True, False, None],
}


def make_record(
    rng: random.Random, kind: str, i: int, *, uniform: bool = False, **force: Any
) -> dict[str, Any]:
    """One valid record; every optional field present or absent at random. ``uniform`` keeps
    each field to one JSON type across records (text labels and inputs, typed segments)."""
    labels = LABELS[kind]
    probs = distribution(rng, len(labels))
    best = max(range(len(labels)), key=lambda j: (probs[j], -j))
    keys = list(range(len(labels)))
    rng.shuffle(keys)
    numeric = kind == "score" and not uniform and rng.random() < 0.5
    as_label = (lambda j: int(labels[j])) if numeric else (lambda j: labels[j])
    record: dict[str, Any] = {
        "decision": NAMES[kind],
        "probabilities": {labels[j]: probs[j] for j in keys},
        "selected": labels[best] if kind != "score" else as_label(best),
    }
    if rng.random() < 0.8:
        record["id"] = f"r{i}"
    optional = {
        "timestamp": lambda: rng.choice(
            ["2026-11-02T09:15:00Z", "2026-01-31T23:59:59.5+02:00", "2026-02-03 10:00:00-05:00"]
        ),
        "input": lambda: (
            "a message" if uniform else rng.choice(["a message", {"text": "hello", "n": 3}, None])
        ),
        "confidence": lambda: probs[best],
        "backend": lambda: rng.choice(["default", "staging"]),
        "model": lambda: "m-1",
        "model_version": lambda: rng.choice(["v1", "v2", None]),
        "latency_ms": lambda: rng.choice([12, 40.5, 0.0]),
        "cost": lambda: rng.choice([0.001, 2, 0.5]),
    }
    for key, value in optional.items():
        if rng.random() < 0.6:
            record[key] = value()
    if rng.random() < 0.7:
        outcome = rng.randrange(len(labels))
        record["outcome"] = as_label(outcome)
        if rng.random() < 0.4:
            record["outcome_correct"] = outcome == best
    elif rng.random() < 0.5:
        record["outcome_correct"] = rng.random() < 0.6
    if rng.random() < 0.7:
        action = rng.choice(ACTIONS)
        record["action"] = action
        if rng.random() < 0.5:
            record["fallback"] = action == "fallback"
    elif rng.random() < 0.4:
        record["fallback"] = rng.random() < 0.5
    metadata: dict[str, Any] = {}
    for key in ("locale", "tier", "team"):
        pool = UNIFORM_SEGMENTS[key] if uniform else SEGMENT_VALUES
        value = rng.choice([*pool, ABSENT])
        if value is not ABSENT:
            metadata[key] = value
    if rng.random() < 0.8:
        record["metadata"] = metadata
    if not isinstance(record["selected"], str):
        record["confidence"] = probs[best]  # DecGuard derives it only from a text label
    record.update(force)
    return record


def write_records(path: Path, records: list[dict[str, Any]]) -> Path:
    if path.suffix == ".json":
        path.write_text(json.dumps(records, indent=1))
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def contract_file(write: Any, kind: str, extra: str = "") -> Path:
    return write(f"{kind}.yaml", textwrap.dedent(CONTRACTS[kind]) + extra)


def same_document(ours_json: str, ref_json: str) -> tuple[dict[str, Any], dict[str, Any]]:
    a, b = json.loads(ours_json), json.loads(ref_json)
    for doc in (a, b):
        doc.pop("decguard_version")
        doc.pop("created_at")
    return a, b


def run_both(ours: Any, ref: Any, *args: Any) -> None:
    """Text and JSON output and exit codes of both CLIs must agree."""
    a, b = ours("check", *args), ref("check", *args)
    mine, theirs = same_text(a.stdout, b.stdout)
    assert (a.exit_code, mine, a.stderr) == (b.exit_code, theirs, b.stderr)
    a, b = ours("check", *args, "-f", "json"), ref("check", *args, "-f", "json")
    assert a.exit_code == b.exit_code
    mine, theirs = same_document(a.stdout, b.stdout)
    assert mine == theirs


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
