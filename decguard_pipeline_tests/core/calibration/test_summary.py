"""Honest calibration: equal-mass ECE on hand-computed vectors, the gap and its direction on
generated models, metadata splits, and DecGuard's equal-width ECE next to it."""

from __future__ import annotations

import numpy as np
import pytest

from decguard_pipeline.core.calibration import (
    CALIBRATED,
    MISSING,
    OVER,
    UNDER,
    calibration_summary,
    confidence_gap,
    equal_mass_reliability,
    gap_direction,
    metadata_groups,
)
from decguard_pipeline.core.contract import parse_contract
from decguard_pipeline.core.golden.metrics import expected_calibration_error
from decguard_pipeline.core.guard.extension import (
    extension_metrics,
    guard_config,
    guard_enabled,
    metric_rows,
)
from decguard_pipeline.core.guard.metrics import guard_metrics
from decguard_pipeline_tests.support.guard_results import make_results

T, F = True, False


def ece_em(confidence, correct, bins):
    return expected_calibration_error(
        equal_mass_reliability(np.array(confidence), np.array(correct), bins)
    )


def test_equal_mass_two_bins_perfectly_calibrated():
    conf = [0.1, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 0.9]
    correct = [F, F, T, F, T, T, F, T]
    # bins {.1 .2 .3 .4}: mean .25, accuracy 1/4; {.6 .7 .8 .9}: mean .75, accuracy 3/4
    rows = equal_mass_reliability(np.array(conf), np.array(correct), 2)
    assert [(r["lower"], r["upper"], r["count"]) for r in rows] == [(0.1, 0.4, 4), (0.6, 0.9, 4)]
    assert [(r["mean_confidence"], r["accuracy"]) for r in rows] == [(0.25, 0.25), (0.75, 0.75)]
    assert ece_em(conf, correct, 2) == 0.0


def test_equal_mass_four_bins_by_hand():
    conf = [0.9, 0.1, 0.8, 0.2, 0.7, 0.3, 0.6, 0.4]  # order does not matter
    correct = [T, F, F, F, T, T, T, F]
    # sorted pairs: (.1 F, .2 F) gap .15; (.3 T, .4 F) |.5-.35| = .15;
    # (.6 T, .7 T) |1-.65| = .35; (.8 F, .9 T) |.5-.85| = .35; each bin weighs 2/8
    assert ece_em(conf, correct, 4) == pytest.approx(0.25, abs=1e-15)


def test_uneven_sizes_follow_the_rank_formula():
    # 10 cases in 3 bins: boundaries 10 // 3 = 3 and 20 // 3 = 6 -> sizes 3, 3, 4
    conf = np.linspace(0.05, 0.95, 10)
    rows = equal_mass_reliability(conf, np.ones(10, dtype=bool), 3)
    assert [r["count"] for r in rows] == [3, 3, 4]


def test_tied_confidences_share_a_bin():
    conf = [0.5, 0.5, 0.5, 0.9]
    correct = [T, F, T, T]
    # the boundary at rank 2 would split the three 0.5s: it moves after them
    rows = equal_mass_reliability(np.array(conf), np.array(correct), 2)
    assert [r["count"] for r in rows] == [3, 1]
    # 3/4 * |2/3 - 0.5| + 1/4 * |1 - 0.9|
    assert ece_em(conf, correct, 2) == pytest.approx(0.75 / 6 + 0.025, abs=1e-15)
    # and the answer does not depend on the order of the tied cases
    assert ece_em(conf, correct, 2) == ece_em([0.5, 0.9, 0.5, 0.5], [F, T, T, T], 2)


def test_fewer_cases_than_bins_and_no_cases():
    conf, correct = [0.9, 0.6, 0.7], [T, F, T]
    assert len(equal_mass_reliability(np.array(conf), np.array(correct), 10)) == 3
    # one case per bin: the mean |confidence - correct|
    assert ece_em(conf, correct, 10) == pytest.approx((0.1 + 0.6 + 0.3) / 3, abs=1e-15)
    assert equal_mass_reliability(np.zeros(0), np.zeros(0, dtype=bool), 10) == []
    assert ece_em([], [], 10) is None
    summary = calibration_summary(np.zeros(0), np.zeros(0, dtype=bool), n_bins=5, gap_tolerance=0)
    assert summary["confidence_gap"] is None and summary["direction"] is None


def test_equal_width_is_decguards_documented_vector():
    # DecGuard 0.1's documented vector: conf [.95 .85 .3 .3], correct [T F T F] -> ECE 0.325
    s = calibration_summary(
        np.array([0.95, 0.85, 0.3, 0.3]), np.array([T, F, T, F]), n_bins=10, gap_tolerance=0.02
    )
    assert s["ece_equal_width"] == pytest.approx(0.325, abs=1e-15)
    assert [b["count"] for b in s["reliability_equal_width"]] == [0, 0, 2, 0, 0, 0, 0, 0, 1, 1]
    # mean confidence .6, accuracy .5
    assert s["confidence_gap"] == pytest.approx(0.1, abs=1e-15) and s["direction"] == OVER


def generated_model(seed: int, n: int, honesty: str):
    """Top-label confidences in [0.5, 1) and correctness drawn from a true accuracy."""
    rng = np.random.default_rng(seed)
    true_accuracy = rng.uniform(0.5, 1.0, n)
    stated = {
        "over": np.minimum(true_accuracy + 0.15, 0.999),
        "under": np.maximum(true_accuracy - 0.15, 0.5),
        "honest": true_accuracy,
    }[honesty]
    return stated, rng.random(n) < true_accuracy


def test_generated_over_confident_model_is_flagged():
    conf, correct = generated_model(1, 20_000, "over")
    s = calibration_summary(conf, correct, n_bins=10, gap_tolerance=0.02)
    assert s["direction"] == OVER
    assert s["confidence_gap"] == pytest.approx(0.14, abs=0.02)
    # equal-mass bins see the same miscalibration everywhere
    assert s["ece_equal_mass"] == pytest.approx(s["confidence_gap"], abs=0.02)
    assert all(r["mean_confidence"] > r["accuracy"] for r in s["reliability_equal_mass"])


def test_generated_under_confident_and_honest_models():
    conf, correct = generated_model(2, 20_000, "under")
    assert calibration_summary(conf, correct, n_bins=10, gap_tolerance=0.02)["direction"] == UNDER
    conf, correct = generated_model(3, 20_000, "honest")
    honest = calibration_summary(conf, correct, n_bins=10, gap_tolerance=0.02)
    assert honest["direction"] == CALIBRATED
    assert honest["ece_equal_mass"] < 0.02


def test_gap_direction_boundaries():
    assert gap_direction(0.02, 0.02) == CALIBRATED
    assert gap_direction(-0.02, 0.02) == CALIBRATED
    assert gap_direction(0.0200001, 0.02) == OVER
    assert gap_direction(-0.03, 0.02) == UNDER
    assert gap_direction(1e-9, 0.0) == OVER
    assert gap_direction(None, 0.02) is None
    assert confidence_gap(np.array([0.9, 0.7]), np.array([T, F])) == pytest.approx(0.3)


def test_metadata_groups():
    metadata = [
        {"difficulty": "hard"},
        {"difficulty": "easy"},
        {},
        {"difficulty": "hard"},
        {"difficulty": None},
        {"difficulty": 3},
        {"difficulty": {"level": 1}},
    ]
    groups = [(value, rows.tolist()) for value, rows in metadata_groups(metadata, "difficulty")]
    assert groups == [
        ("3", [5]),
        ("easy", [1]),
        ("hard", [0, 3]),
        ('{"level":1}', [6]),
        (MISSING, [2, 4]),
    ]


def test_splits_are_the_metrics_of_each_group():
    """The hidden behaviour: calibrated on average, over-confident on the hard cases."""
    rng = np.random.default_rng(5)
    n = 600
    hard = np.arange(n) % 3 == 0
    p_yes = np.where(hard, rng.uniform(0.85, 0.95, n), rng.uniform(0.05, 0.95, n)).round(2)
    expected = [
        int(rng.random() >= (0.55 if h else p)) for h, p in zip(hard, p_yes, strict=True)
    ]  # index 0 = "yes" with probability p_yes on easy cases, ~0.55 on hard ones
    metadata = [{"difficulty": "hard" if h else "easy"} for h in hard]
    results = make_results(
        np.column_stack([p_yes, 1 - p_yes]), expected, metadata=metadata, errored=(1, 4)
    )
    contract = parse_contract(
        {
            "schema_version": "0.1",
            "decision": {"name": "d", "type": "noul"},
            "backend": {"provider": "mock"},
            "pipeline": {"calibration": {"split_by": ["difficulty"], "bins": 5}},
        }
    )
    block = extension_metrics(results, contract)
    groups = {g["value"]: g for g in block["splits"]["difficulty"]}
    assert list(groups) == ["easy", "hard"]
    for value, group in groups.items():
        rows = np.flatnonzero(hard if value == "hard" else ~hard)
        part = results.take(rows)
        assert group["n_cases"] == len(rows) == group["run"]["total"]
        assert group["guard"] == guard_metrics(part)
        ok = part.ok
        conf = part.confidence[ok]
        correct = part.selected[ok] == part.expected_index[ok]
        assert group["calibration"] == calibration_summary(
            conf, correct, n_bins=5, gap_tolerance=0.02
        )
    assert groups["easy"]["run"]["errored"] == 2  # rows 1 and 4 are easy
    assert groups["hard"]["calibration"]["direction"] == OVER
    assert groups["easy"]["calibration"]["direction"] == CALIBRATED
    assert "splits" not in groups["hard"]
    config = guard_config(contract)
    assert config.bins == 5 and config.guarded == ("yes",)


def test_metric_rows_flatten_the_block_for_the_warehouse():
    probs = [[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.7, 0.3]]
    metadata = [{"difficulty": d} for d in ("easy", "hard", "hard", "easy")]
    results = make_results(probs, [0, 1, 0, 1], metadata=metadata)
    contract = parse_contract(
        {
            "schema_version": "0.1",
            "decision": {"name": "d", "type": "noul"},
            "backend": {"provider": "mock"},
            "pipeline": {"calibration": {"split_by": ["difficulty"]}},
        }
    )
    block = extension_metrics(results, contract)
    rows = metric_rows(block, suite="clear")
    assert {r["suite"] for r in rows} == {"clear"}
    parts = {(r["split_key"], r["split_value"]) for r in rows}
    assert parts == {(None, None), ("difficulty", "easy"), ("difficulty", "hard")}

    def value(metric, label=None, key=None, split=None):
        (row,) = [
            r for r in rows
            if (r["metric"], r["label"], r["split_key"], r["split_value"])
            == (metric, label, key, split)
        ]  # fmt: skip
        return row["value"]

    assert value("accuracy") == 0.75  # selected yes, no, yes, yes: only row 3 is wrong
    # yes-scores .9 .2 .6 .7 for truths yes no yes no: 3 of 4 pairs ranked right
    assert value("auroc", "yes") == 0.75
    assert value("auroc") == 0.75  # the headline takes the (only) guarded label
    assert value("tp", "yes") == 2 and value("fp", "yes") == 1
    assert value("accuracy", key="difficulty", split="hard") == 1.0  # rows 1 and 2
    assert value("accuracy", key="difficulty", split="easy") == 0.5  # rows 0 and 3
    assert value("auroc", "yes", "difficulty", "easy") == 1.0  # .9 (yes) above .7 (no)
    assert value("drop_rate", key="difficulty", split="easy") == 0.0


def test_empty_pipeline_section_is_not_the_guard_extension():
    base = {"schema_version": "0.1", "decision": {"name": "d", "type": "noul"},
            "backend": {"provider": "mock"}}  # fmt: skip
    assert not guard_enabled(parse_contract(base))
    assert not guard_enabled(parse_contract({**base, "pipeline": {}}))
    assert guard_enabled(parse_contract({**base, "pipeline": {"warnings": {"max_aurc": 0.2}}}))
