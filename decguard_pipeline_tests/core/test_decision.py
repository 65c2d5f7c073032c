"""Decision normalisation (§4): answers are checked, never repaired, with DecGuard's
messages; canonical order; ties to the first label; secret-looking metadata redacted."""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import pytest

from decguard_pipeline.core.decision import (
    select_index,
    select_many,
    validate_many,
    validate_probabilities,
)
from decguard_pipeline.core.errors import InvalidResponse
from decguard_pipeline.core.secrets import redact

LABELS = ("refund", "reject", "review")

RAWS: list[Any] = [
    {"refund": 0.96, "reject": 0.01, "review": 0.03},
    {"review": 0.03, "refund": 0.96, "reject": 0.01},  # any order in, canonical out
    {"refund": 1, "reject": 0, "review": 0},
    {"refund": 0.5, "reject": 0.5, "review": 0.0},
    {"refund": 0.7, "reject": 0.2, "review": 0.101},  # 1.001: on the edge, inside
    {"refund": 0.7, "reject": 0.2, "review": 0.1011},
    {"refund": 0.7, "reject": 0.2, "review": 0.0989},
    {"refund": 0.7, "reject": 0.2},
    {"refund": 0.7, "reject": 0.2, "review": 0.1, "other": 0.0},
    {"refund": 0.7, "review": 0.3, "Reject": 0.0},
    {"refund": float("nan"), "reject": 0.5, "review": 0.5},
    {"refund": float("inf"), "reject": 0.0, "review": 0.0},
    {"refund": -0.0, "reject": 0.5, "review": 0.5},
    {"refund": -1e-12, "reject": 0.5, "review": 0.5},
    {"refund": "0.5", "reject": 0.5, "review": 0.0},
    {"refund": True, "reject": 0.0, "review": 0.0},
    {"refund": None, "reject": 1.0, "review": 0.0},
    {"refund": 10**400, "reject": 0.0, "review": 0.0},
    {"refund": 2.0, "reject": -1.0, "review": 0.0},
    [0.5, 0.5, 0.0],
    None,
    "refund",
    {1: 1.0, "reject": 0.0, "review": 0.0},
]


@pytest.mark.parametrize("tolerance", [1e-3, 1e-4, 1e-9, 0.02, 0.1])
def test_single_validation_matches_reference(tolerance):
    from decguard.decisions import validate_probabilities as ref_validate
    from decguard.errors import InvalidResponse as RefInvalid

    for raw in RAWS:
        try:
            mine: Any = validate_probabilities(LABELS, raw, tolerance=tolerance)
            assert list(mine) == list(LABELS)
        except InvalidResponse as exc:
            mine = str(exc)
        except OverflowError as exc:  # DecGuard lets this through: a per-case "exception"
            mine = ("OverflowError", str(exc))
        try:
            theirs: Any = ref_validate(LABELS, raw, tolerance=tolerance)
        except RefInvalid as exc:
            theirs = str(exc)
        except OverflowError as exc:
            theirs = ("OverflowError", str(exc))
        assert mine == theirs, raw


def test_messages():
    with pytest.raises(InvalidResponse) as caught:
        validate_probabilities(LABELS, {"refund": 0.7, "reject": 0.2, "review": 0.2})
    assert str(caught.value) == "probabilities sum to 1.1, outside 1 ± 0.001"
    with pytest.raises(InvalidResponse) as caught:
        validate_probabilities(LABELS, {"refund": 0.5, "x": 0.5}, tolerance=1e-5)
    assert str(caught.value) == (
        "probabilities do not match the contract labels: missing labels ['reject', 'review']; "
        "unknown labels ['x']"
    )
    with pytest.raises(InvalidResponse) as caught:
        validate_probabilities(
            LABELS, {"refund": 0.99995, "reject": 0, "review": 0}, tolerance=1e-5
        )
    assert str(caught.value) == "probabilities sum to 0.99995, outside 1 ± 1e-05"


@pytest.mark.parametrize("tolerance", [1e-3, 1e-9, 0.05])
def test_batch_validation_equals_one_by_one(tolerance):
    rng = random.Random(7)
    shared = {"refund": 0.2, "reject": 0.3, "review": 0.5}
    raws: list[Any] = []
    for _ in range(3000):
        roll = rng.random()
        if roll < 0.3:
            raws.append(shared)  # the same object many times
        elif roll < 0.4:
            raws.append(rng.choice(RAWS))
        else:
            p = [rng.random() for _ in LABELS]
            total = math.fsum(p) * rng.choice((1.0, 1.0, 1.0 + 1e-3, 1.0 - 5e-4, 1.0 + 1e-10))
            raws.append(dict(zip(LABELS, [v / total for v in p], strict=True)))
    batch = validate_many(LABELS, raws, tolerance=tolerance)
    for i, raw in enumerate(raws):
        try:
            want: Any = list(validate_probabilities(LABELS, raw, tolerance=tolerance).values())
            assert (batch.errors[i], batch.kinds[i]) == (None, None)
            assert batch.probs[i].tolist() == want
        except InvalidResponse as exc:
            assert (batch.errors[i], batch.kinds[i]) == (str(exc), "invalid_response")
            assert np.isnan(batch.probs[i]).all()
        except OverflowError as exc:
            assert (batch.errors[i], batch.kinds[i]) == (f"OverflowError: {exc}", "exception")
            assert np.isnan(batch.probs[i]).all()


def test_ties_go_to_the_first_label():
    assert select_index([0.4, 0.4, 0.2]) == 0
    assert select_index([0.2, 0.4, 0.4]) == 1
    probs = np.array([[0.4, 0.4, 0.2], [0.2, 0.4, 0.4], [1 / 3, 1 / 3, 1 / 3], [np.nan] * 3])
    selected, confidence = select_many(probs)
    assert selected.tolist() == [0, 1, 0, -1]
    assert confidence[:3].tolist() == [0.4, 0.4, 1 / 3] and np.isnan(confidence[3])


def test_selection_matches_reference():
    from decguard.decisions import select_label

    rng = random.Random(1)
    rows = [[rng.choice((0.1, 0.2, 0.3, 0.25)) for _ in LABELS] for _ in range(500)]
    selected, _ = select_many(np.array(rows))
    for row, index in zip(rows, selected.tolist(), strict=True):
        assert LABELS[index] == select_label(LABELS, dict(zip(LABELS, row, strict=True)))


METADATA: list[Any] = [
    {"api_key": "k", "API-KEY": "k", "Api_Key": "k", "apikey": "k", "other": "fine"},
    {"nested": {"Authorization": "Bearer x", "list": [{"password": "p"}, {"cookie": "c"}]}},
    {"set-cookie": "c", "Set_Cookie": "c", "refresh_token": "r", "client_secret": "s"},
    {"token_count": 3, "secretary": "Ann", "tokens": ["a"], "secret": {"deep": 1}},
    {1: "int key", None: "none key", ("token",): "tuple key"},
    [{"access_token": "t"}, ({"token": "x"},)],
    "plain",
]


@pytest.mark.parametrize("value", METADATA)
def test_redaction_matches_reference(value):
    from decguard._validation import redact_sensitive_values

    assert redact(value) == redact_sensitive_values(value)
    text = repr(redact(value))
    assert "Bearer x" not in text and "'k'" not in text
