"""The array shortcuts of the production path against the plain Python they replace: exact
sums against ``math.fsum``, the tolerance test against ``fsum``, the timestamp check against
``datetime.fromisoformat``, duplicate ids against a dict."""

from __future__ import annotations

import math
import random
from datetime import datetime

import numpy as np
import pyarrow as pa
import pytest

from decguard_pipeline.core.production.columns import first_repeat, id_hashes
from decguard_pipeline.core.production.exact_groups import ExactColumn, exact_sum
from decguard_pipeline.core.production.invariants import outside_tolerance
from decguard_pipeline.core.production.timestamps import timestamps_ok

RNG = np.random.default_rng(0)
ADVERSARIAL = [
    RNG.random(20_000),
    RNG.random(20_000) * 1e-300,
    np.concatenate([RNG.random(5000), [1e300, -1e300], RNG.random(5000) * 1e-310]),
    RNG.normal(size=20_000),
    np.round(RNG.random(20_000), 2),
    np.full(20_000, 0.1),
    np.concatenate([[2.0**53, 1.0, -(2.0**53)], np.full(9000, 0.5)]),
    np.array([1.0, 2.0**-53, 2.0**-53] * 3000),  # ties to even decided by tiny terms
    np.array([1.0, 2.0**-53] * 3000 + [2.0**-106]),
    np.array([-0.0] * 5000),
    np.array([5e-324, 5e-324, 1e-320] * 2000),  # subnormals
]


@pytest.mark.parametrize("values", ADVERSARIAL, ids=range(len(ADVERSARIAL)))
def test_exact_sum_is_fsum(values):
    got, want = exact_sum(values), math.fsum(values.tolist())
    assert got == want and math.copysign(1.0, got) == math.copysign(1.0, want)
    assert ExactColumn(values).sums(None, 1)[0] == want


def test_grouped_and_masked_sums_are_fsum_per_group():
    values = np.concatenate([RNG.random(30_000), RNG.random(30_000) * 1e-12, [1e10, -1e10]])
    groups = RNG.integers(0, 7, len(values))
    rows = RNG.random(len(values)) < 0.4
    column = ExactColumn(values)
    assert column.sums(groups, 7) == [math.fsum(values[groups == g].tolist()) for g in range(7)]
    assert column.sums(groups, 7, rows) == [
        math.fsum(values[rows & (groups == g)].tolist()) for g in range(7)
    ]
    assert column.sums(groups, 9, rows)[7:] == [0.0, 0.0]


@pytest.mark.parametrize("tolerance", [1e-3, 0.02, 0.1, 1e-9])
def test_tolerance_test_matches_fsum(tolerance):
    probs = RNG.random((50_000, 3))
    probs /= probs.sum(axis=1, keepdims=True)
    nudge = [0, tolerance, -tolerance, tolerance * (1 + 1e-16), tolerance * 0.999999999, 2**-40]
    probs[:, 0] = np.abs(probs[:, 0] + RNG.choice(nudge, size=len(probs)))
    got = outside_tolerance(probs, np.ones(len(probs), dtype=bool), tolerance)
    want = [abs(math.fsum(row) - 1.0) > tolerance for row in probs.tolist()]
    assert got.tolist() == want


def _python_ok(value: str) -> bool:
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).tzinfo is not None
    except ValueError:
        return False


def test_timestamp_column_check_matches_fromisoformat():
    rng = random.Random(1)
    values = []
    for _ in range(20_000):
        y = rng.choice(["0000", "0001", "1900", "2000", "2023", "2024", "2100", "9999"])
        date = f"{y}-{rng.randint(0, 13):02d}-{rng.randint(0, 32):02d}"
        clock = f"{rng.randint(0, 25):02d}:{rng.randint(0, 61):02d}:{rng.randint(0, 61):02d}"
        frac = rng.choice(["", ".1", ".123", ".123456", ".1234567", "."])
        zone = rng.choice(["Z", "+00:00", "-23:59", "+24:00", "+05:60", "", "+0530", "z"])
        values.append(f"{date}{rng.choice('TT t')}{clock}{frac}{zone}")
    got = timestamps_ok(pa.array([*values, None]))
    assert got.tolist() == [*map(_python_ok, values), True]
    fixed = [v for v in values if len(v) == 20 and v.endswith("Z") and "T" in v]
    assert timestamps_ok(pa.array(fixed)).tolist() == [_python_ok(v) for v in fixed]


def test_repeated_ids_found_like_a_dict():
    ids = [f"r{i}" for i in range(5000)]
    assert first_repeat(id_hashes(pa.array(ids)), pa.chunked_array([pa.array(ids)])) is None
    ids[4000] = "r17"
    ids[4500] = "r4499"
    tail = "a rather long identifier of thirty-odd bytes"
    long = [*ids, tail, tail]
    found = first_repeat(id_hashes(pa.array(long)), pa.chunked_array([pa.array(long)]))
    assert found == (18, 4001)  # 1-based: first seen at 18, repeated at 4001
    assert np.array_equal(id_hashes(pa.array(["", "a", ""])), id_hashes(pa.array(["", "a", ""])))
    assert len(set(id_hashes(pa.array(["ab", "ba", "abc", "a", "b"])).tolist())) == 5
