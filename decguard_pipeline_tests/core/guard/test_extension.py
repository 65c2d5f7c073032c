"""The extension block reuses DecGuard's metrics it is given (a report's ``metrics``) for the
whole set instead of computing them again; metadata groups compute their own."""

from __future__ import annotations

import copy

import numpy as np

from decguard_pipeline.core.contract import load_contract
from decguard_pipeline.core.golden.metrics import golden_metrics
from decguard_pipeline.core.guard.extension import extension_metrics
from decguard_pipeline_tests.support.guard_results import make_results

CONTRACT = """\
schema_version: "0.1"
decision: {name: is_spam, type: noul, labels: [spam, ham]}
backend: {provider: mock}
evaluation: {calibration_bins: 5}
pipeline:
  calibration: {bins: 4, split_by: [difficulty]}
"""


def test_given_golden_metrics_are_used_for_the_whole_set_only(write):
    contract = load_contract(write("decguard.yaml", CONTRACT)).contract
    rng = np.random.default_rng(7)
    spam = rng.random(40).round(2)
    results = make_results(
        np.column_stack([spam, 1 - spam]),
        [int(i % 3 == 0) for i in range(40)],
        labels=("spam", "ham"),
        errored=(3, 11),
        metadata=[{"difficulty": "hard" if i % 2 else "easy"} for i in range(40)],
    )
    computed = extension_metrics(results, contract)
    golden = golden_metrics(results, calibration_bins=5, confidence_threshold=None)
    assert extension_metrics(results, contract, golden=golden) == computed

    marked = copy.deepcopy(golden)
    marked["classification"]["accuracy"] = 0.123  # no formula gives this here
    block = extension_metrics(results, contract, golden=marked)
    assert block["golden"]["accuracy"] == 0.123
    assert block["golden"]["accuracy"] != computed["golden"]["accuracy"]
    assert [g["value"] for g in computed["splits"]["difficulty"]] == ["easy", "hard"]
    assert block["splits"] == computed["splits"]  # groups are not the given metrics
    assert {k: v for k, v in block.items() if k != "golden"} == {
        k: v for k, v in computed.items() if k != "golden"
    }
