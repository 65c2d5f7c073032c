"""Exact summation: ``core.exact`` equals ``math.fsum`` bit for bit, including the rows
whose rounded sum sits next to a rounding tie (where a compensated sum would be off)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from decguard_pipeline.core.exact import fsum, mean, row_fsum


def test_fsum_vectors():
    assert fsum([0.1, 0.2, 0.3]) == 0.6  # the naive sum gives 0.6000000000000001
    assert sum([0.1, 0.2, 0.3]) != 0.6
    assert fsum(np.array([1e16, 1.0, -1e16])) == 1.0
    assert fsum(np.array([1e100, 1.0, -1e100, 1e-100])) == 1.0
    assert fsum([]) == 0.0


def test_mean():
    assert mean(np.array([])) is None
    assert mean(np.array([0.1, 0.2, 0.3])) == 0.6 / 3
    assert mean(np.array([1.0, 2.0])) == 1.5


def _tie_rows(rng: random.Random, k: int) -> list[list[float]]:
    """Rows whose exact sum is (almost) halfway between two doubles."""
    rows = []
    for _ in range(200):
        base = rng.uniform(0.1, 1.0)
        ulp = math.ulp(base)
        tail = [ulp / 2, ulp / 2 * (1 + 2**-40), -ulp / 2, ulp / 4, ulp / 2 * (1 - 2**-50)]
        row = [base, rng.choice(tail)]
        while len(row) < k:
            row.append(rng.choice((0.0, ulp / 8, -ulp / 8, ulp * 2**-30)))
        rng.shuffle(row)
        rows.append(row[:k] if k >= 2 else [base])
    return rows


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8, 30])
def test_row_fsum_equals_math_fsum(k):
    rng = random.Random(k)
    rows = [[rng.random() for _ in range(k)] for _ in range(2000)]
    rows += [[v / sum(r) for v in r] for r in rows[:500]]  # distributions
    rows += [
        [rng.choice((1e-300, 1e300, -1e300, 0.5, 1e-17)) for _ in range(k)] for _ in range(500)
    ]
    if k >= 2:
        rows += _tie_rows(rng, k)
    matrix = np.array(rows, dtype=np.float64)
    got = row_fsum(matrix)
    want = [math.fsum(row) for row in rows]
    assert got.tolist() == want


def test_row_fsum_empty_shapes():
    assert row_fsum(np.zeros((0, 3))).tolist() == []
    assert row_fsum(np.zeros((4, 0))).tolist() == [0.0] * 4


def test_rows_sum_within_decides_as_row_fsum_at_the_edge():
    """Rows summing to the tolerance's edge within a few ulps, and far from it: the plain-sum
    shortcut decides each exactly as the correctly rounded sums do."""
    from decguard_pipeline.core.exact import row_fsum, rows_sum_within

    rng = np.random.default_rng(7)
    for tolerance in (1e-3, 1e-4, 0.05):
        for k in (2, 3, 7):
            raw = rng.random((400, k))
            rows = raw / raw.sum(axis=1, keepdims=True) * (1.0 + tolerance)
            # nudge every row by a few ulps either way around 1 + tolerance
            rows[:, 0] += rng.integers(-8, 9, size=400) * np.spacing(1.0)
            rows = np.abs(rows)
            truth = np.abs(row_fsum(rows) - 1.0) <= tolerance
            assert truth.any() and not truth.all()
            for i in range(len(rows)):
                assert rows_sum_within(rows[i : i + 1], 1.0, tolerance) == bool(truth[i])
            assert rows_sum_within(rows[truth], 1.0, tolerance)
            assert not rows_sum_within(rows, 1.0, tolerance)
