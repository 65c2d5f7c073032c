"""Production records and contracts for the check tests, and running both CLIs on them."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from decguard_pipeline_tests.conftest import same_text

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


def record_by_record_report(contract: Path, dataset: Path, out: Path) -> bytes:
    """A check report as the record-by-record writer writes it (``check -o`` before it was
    written column-wise): the oracle that does not share the column-wise writer."""
    from decguard_pipeline.core.contract import load_contract
    from decguard_pipeline.core.production.check import run_check

    run_check(load_contract(contract), dataset=dataset).write(out)
    return out.read_bytes()
