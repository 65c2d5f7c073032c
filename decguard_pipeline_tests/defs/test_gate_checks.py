"""A stored check as Dagster shows it: numbers rounded as every other number of the UI (no
binary noise of a sum), and no ``-0`` in the value or the message."""

from __future__ import annotations

import math

import dagster as dg

from decguard_pipeline.defs.gate_checks import check_result

ASSET = dg.AssetKey(["refund", "regression_diff"])


def stored(**changes: object) -> dict[str, object]:
    row: dict[str, object] = {
        "gate": "max_accuracy_drop",
        "level": "requirement",
        "metric": "accuracy_drop",
        "comparison": "<=",
        "threshold": 0.02,
        "value": -0.0,
        "status": "pass",
        "message": "accuracy_drop -0 <= 0.02",  # DecGuard's message for a drop of -0.0
    }
    return {**row, **changes}


def test_a_zero_is_shown_without_its_sign():
    result = check_result(stored(), ASSET, "max_accuracy_drop")
    value = result.metadata["value"].value
    assert value == 0 and math.copysign(1.0, value) == 1.0
    assert result.description == "accuracy_drop 0 <= 0.02"
    assert result.metadata["message"].value == "accuracy_drop 0 <= 0.02"
    # a negative number, a decimal and a name that ends in -0 keep theirs
    text = "delta -0.05 and -0.0x, model v-0 <= 0"
    assert check_result(stored(message=text), ASSET, "g").description == text


def test_values_are_rounded_like_every_other_number():
    row = stored(gate="max_ece", metric="ece", threshold=0.15, value=0.17510000000000003,
                 status="fail", message="ece 0.1751 violates <= 0.15")  # fmt: skip
    result = check_result(row, ASSET, "max_ece")
    assert result.metadata["value"].value == 0.1751
    assert result.metadata["threshold"].value == 0.15
    undefined = check_result(stored(value=None, message="could not be computed"), ASSET, "g")
    assert "value" not in undefined.metadata
