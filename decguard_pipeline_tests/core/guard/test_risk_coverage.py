"""Risk-coverage: hand-computed sweeps and areas, an independent loop for the area on
generated data, and DecGuard's own selective numbers at the contract threshold."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest

from decguard_pipeline.core.guard.risk_coverage import aurc, optimal_aurc, risk_coverage, sweep
from decguard_pipeline_tests.conftest import EXAMPLES

T, F = True, False
CONF = np.array([0.9, 0.8, 0.7, 0.6])
RIGHT = np.array([T, T, F, T])


def test_sweep_by_hand():
    rows = sweep(CONF, RIGHT, [0.0, 0.65, 0.7, 0.85, 1.0], escalation_cost=2.0, error_cost=10.0)
    assert [(r["kept"], r["handed_off"]) for r in rows] == [(4, 0), (3, 1), (3, 1), (1, 3), (0, 4)]
    assert [r["coverage"] for r in rows] == [1.0, 0.75, 0.75, 0.25, 0.0]
    assert [r["selective_accuracy"] for r in rows] == [0.75, 2 / 3, 2 / 3, 1.0, None]
    assert [r["selective_risk"] for r in rows] == [0.25, 1 / 3, 1 / 3, 0.0, None]
    # 1000 * (handed off * 2 + wrong kept * 10) / 4
    assert [r["cost_per_1000"] for r in rows] == [2500.0, 3000.0, 3000.0, 1500.0, 2000.0]


def test_threshold_is_inclusive_like_decguard():
    rows = sweep(CONF, RIGHT, [0.7])
    assert rows[0]["kept"] == 3  # 0.7 itself is kept (confidence >= threshold)
    assert rows[0]["cost_per_1000"] is None  # no escalation cost, no cost


def test_aurc_by_hand_without_and_with_ties():
    # risks after 1..4 cases: 0, 0, 1/3, 1/4 -> mean 7/48
    assert aurc(CONF, RIGHT) == pytest.approx(7 / 48, abs=1e-16)
    # right = 3 of 4: only k = 4 has risk (4 - 3) / 4 -> 1/16
    assert optimal_aurc(RIGHT) == 1 / 16
    # ties enter together: {.9 .9} risk 1/2 over coverage 1/2, then all four risk 1/4
    assert aurc(np.array([0.9, 0.9, 0.5, 0.5]), np.array([T, F, T, T])) == 0.375
    # one confidence for everything: the curve is one point, the risk of all cases
    assert aurc(np.full(5, 0.8), np.array([T, T, F, T, F])) == 0.4


def loop_aurc(confidence: np.ndarray, correct: np.ndarray) -> Fraction:
    """Independent, exact: sum over distinct thresholds (high to low) of coverage step x
    selective risk at that threshold."""
    n = len(confidence)
    area, previous = Fraction(0), 0
    for t in sorted(set(confidence.tolist()), reverse=True):
        kept = confidence >= t
        k = int(kept.sum())
        wrong = int((~correct[kept]).sum())
        area += Fraction(k - previous, n) * Fraction(wrong, k)
        previous = k
    return area


@pytest.mark.parametrize(("seed", "decimals"), [(0, 1), (1, 2), (2, 6), (3, 2)])
def test_aurc_equals_an_independent_exact_loop(seed, decimals):
    rng = np.random.default_rng(seed)
    n = 300
    correct = rng.random(n) < 0.7
    confidence = np.clip(rng.normal(np.where(correct, 0.8, 0.65), 0.12), 0, 1).round(decimals)
    assert aurc(confidence, correct) == pytest.approx(float(loop_aurc(confidence, correct)))
    right = int(correct.sum())
    exact_optimum = sum(Fraction(k - right, k) for k in range(right + 1, n + 1)) / n
    assert optimal_aurc(correct) == pytest.approx(float(exact_optimum))
    # a ranking never beats the optimum; a perfect one meets it
    assert aurc(confidence, correct) >= optimal_aurc(correct)
    perfect = np.where(correct, 1.0, 0.0) + rng.random(n) * 0.5  # right always above wrong
    assert aurc(perfect, correct) == pytest.approx(optimal_aurc(correct), abs=1e-15)


def test_empty_and_cheapest():
    empty = risk_coverage(np.zeros(0), np.zeros(0, dtype=bool), [0.5], escalation_cost=1.0)
    assert empty["aurc"] is None and empty["optimal_aurc"] is None and empty["excess_aurc"] is None
    assert empty["sweep"][0]["coverage"] is None and empty["sweep"][0]["cost_per_1000"] is None
    assert empty["cheapest"] is None
    full = risk_coverage(CONF, RIGHT, [0.0, 0.85, 1.0], escalation_cost=2.0, error_cost=10.0)
    assert full["cheapest"] == {"threshold": 0.85, "cost_per_1000": 1500.0}
    assert full["excess_aurc"] == pytest.approx(7 / 48 - 1 / 16, abs=1e-16)
    # equal costs: the lowest threshold wins (keep more decisions for the same price)
    tie = risk_coverage(CONF, np.ones(4, dtype=bool), [0.0, 0.5], escalation_cost=1.0)
    assert tie["cheapest"] == {"threshold": 0.0, "cost_per_1000": 0.0}


def test_sweep_at_contract_threshold_equals_decguard_selective(ref, tmp_path):
    """refund: at evaluation.confidence_threshold 0.8 the sweep's selective accuracy is
    decguard 0.1.1's (both over labeled cases at or above the threshold)."""
    out = tmp_path / "ref.json"
    assert ref("test", EXAMPLES / "refund" / "decguard.yaml", "-o", out).exit_code == 0
    doc = json.loads(out.read_text())
    labeled = [r for r in doc["results"] if r["result"] and r["expected"] is not None]
    confidence = np.array([r["result"]["confidence"] for r in labeled])
    correct = np.array([r["result"]["selected"] == r["expected"] for r in labeled])
    threshold = doc["evaluation"]["confidence_threshold"]
    row = sweep(confidence, correct, [threshold])[0]
    selective = doc["metrics"]["selective"]
    assert row["selective_accuracy"] == selective["selective_accuracy"]
    assert row["kept"] == selective["n_covered_labeled"]
