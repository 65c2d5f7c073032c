"""Segments of a diff: the values looked up a column at a time are ``segment_value``'s, case by
case, and the groups are the ones a case-by-case grouping gives."""

from __future__ import annotations

import random

import numpy as np
import pytest

from decguard_pipeline.core.diff.segments import (
    MISSING,
    group_rows,
    segment_value,
    segment_values,
)

ODD_VALUES = [MISSING, "", "en", 1, 1.0, True, None, [1, "a"], {"b": 1, "a": [2]}, 2**70]


def _metadata(rng: random.Random, n: int, odd: bool) -> list[dict]:
    rows = []
    for _ in range(n):
        row = {}
        if rng.random() < 0.8:
            row["locale"] = rng.choice(ODD_VALUES if odd else ["en", "it", "de"])
        if rng.random() < 0.5:
            row["channel"] = rng.choice(["chat", "email"])
        rows.append(row)
    return rows


def _grouped_one_by_one(metadata: list[dict], keys: tuple[str, ...]) -> list[tuple]:
    out = []
    for key in keys:
        values = [segment_value(m, key) for m in metadata]
        for value in sorted(set(values)):
            rows = [i for i, v in enumerate(values) if v == value]
            out.append((key, value, rows))
    return out


@pytest.mark.parametrize("odd", [False, True], ids=["strings", "any JSON values"])
@pytest.mark.parametrize("seed", range(4))
def test_segments_are_those_of_the_case_by_case_grouping(seed, odd):
    rng = random.Random(seed)
    metadata = _metadata(rng, 300, odd)
    keys = ("locale", "channel", "absent")
    for key in keys:
        assert segment_values(metadata, key) == [segment_value(m, key) for m in metadata]
    grouped = [(s.key, s.value, s.rows.tolist()) for s in group_rows(metadata, keys)]
    assert grouped == _grouped_one_by_one(metadata, keys)
    assert all(s.rows.dtype == np.int64 for s in group_rows(metadata, keys))


def test_a_missing_key_and_the_string_missing_are_one_segment():
    metadata = [{}, {"k": MISSING}, {"k": "x"}, {"k": {"a": 1}}]
    assert segment_values(metadata, "k") == [MISSING, MISSING, "x", '{"a": 1}']
    assert [(s.value, s.rows.tolist()) for s in group_rows(metadata, ("k",))] == [
        (MISSING, [0, 1]),
        ("x", [2]),
        ('{"a": 1}', [3]),
    ]


def test_no_cases_no_segments():
    assert group_rows([], ("k",)) == []
