"""The consistency measures (core/consistency/measures.py) against plain-Python computations
written from their definitions, on random label matrices and probability tensors, and their
documented edge cases."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from decguard_pipeline.core.consistency.measures import (
    agreement_with_report,
    label_flips,
    mean_tv_distance,
    pairwise_agreement,
    unanimous_share,
)


def random_asks(seed: int, n: int, r: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.ones(k) * 0.7, size=(n, r))
    return probs.argmax(axis=2), probs


def by_hand(selected: np.ndarray, probs: np.ndarray) -> dict[str, float]:
    rows = selected.tolist()
    n, r = len(rows), len(rows[0])
    unanimous = sum(len(set(row)) == 1 for row in rows) / n
    pairs = [
        sum(row[a] == row[b] for a, b in itertools.combinations(range(r), 2)) / (r * (r - 1) / 2)
        for row in rows
    ]
    report = [sum(row[j] == row[0] for j in range(1, r)) / (r - 1) for row in rows]
    tv = []
    for case in probs.tolist():
        k = len(case[0])
        mean = [sum(ask[j] for ask in case) / r for j in range(k)]
        tv.append(sum(0.5 * sum(abs(ask[j] - mean[j]) for j in range(k)) for ask in case) / r)
    return {
        "unanimous": unanimous,
        "pairwise": sum(pairs) / n,
        "report": sum(report) / n,
        "tv": sum(tv) / n,
    }


@pytest.mark.parametrize("seed", range(20))
def test_measures_equal_their_definitions(seed):
    rng = np.random.default_rng(1000 + seed)
    n, r, k = int(rng.integers(1, 40)), int(rng.integers(2, 21)), int(rng.integers(2, 6))
    selected, probs = random_asks(seed, n, r, k)
    expected = by_hand(selected, probs)
    assert unanimous_share(selected) == pytest.approx(expected["unanimous"], abs=1e-12)
    assert pairwise_agreement(selected) == pytest.approx(expected["pairwise"], abs=1e-12)
    assert agreement_with_report(selected) == pytest.approx(expected["report"], abs=1e-12)
    assert mean_tv_distance(probs) == pytest.approx(expected["tv"], abs=1e-12)
    flips = [
        sum(1 for row in selected.tolist() if label in row and set(row) != {label})
        for label in range(k)
    ]
    assert label_flips(selected, k).tolist() == flips


def test_a_consistent_model_scores_exactly_one_and_zero():
    probs = np.tile(np.array([[0.1, 0.7, 0.2]]), (5, 7, 1)) / 3 * 3  # float noise in the mean
    selected = probs.argmax(axis=2)
    assert unanimous_share(selected) == pairwise_agreement(selected) == 1.0
    assert agreement_with_report(selected) == 1.0
    assert mean_tv_distance(probs) == 0.0
    assert label_flips(selected, 3).tolist() == [0, 0, 0]


def test_a_small_worked_example():
    # case 0: a, a, b; case 1: b, b, b; case 2: a, b, c (three labels, three asks)
    selected = np.array([[0, 0, 1], [1, 1, 1], [0, 1, 2]])
    assert unanimous_share(selected) == pytest.approx(1 / 3)
    assert pairwise_agreement(selected) == pytest.approx((1 / 3 + 1 + 0) / 3)
    assert agreement_with_report(selected) == pytest.approx((0.5 + 1 + 0) / 3)
    assert label_flips(selected, 3).tolist() == [2, 2, 1]
    probs = np.array([[[1.0, 0.0], [0.0, 1.0]]])  # opposite answers: each 0.5 from the mean
    assert mean_tv_distance(probs) == pytest.approx(0.5)


def test_no_case_is_nan_and_one_ask_is_refused():
    empty = np.zeros((0, 3), dtype=np.int64)
    for measure in (unanimous_share, pairwise_agreement, agreement_with_report):
        assert math.isnan(measure(empty))
    assert math.isnan(mean_tv_distance(np.zeros((0, 3, 2))))
    assert label_flips(empty, 2).tolist() == [0, 0]
    for measure in (unanimous_share, pairwise_agreement, agreement_with_report):
        with pytest.raises(ValueError, match="at least two asks"):
            measure(np.zeros((4, 1), dtype=np.int64))
    with pytest.raises(ValueError, match="at least two asks"):
        mean_tv_distance(np.full((4, 1, 2), 0.5))
    with pytest.raises(ValueError, match="shape"):
        unanimous_share(np.zeros(4, dtype=np.int64))
