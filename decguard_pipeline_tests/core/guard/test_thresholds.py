"""The threshold table against scikit-learn at every grid threshold, and the target points
against a brute-force search over every threshold that changes anything."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import metrics as skm

from decguard_pipeline.core.contract import parse_contract
from decguard_pipeline.core.guard.extension import extension_metrics
from decguard_pipeline.core.guard.metrics import NO_NEGATIVES, NO_POSITIVES
from decguard_pipeline.core.guard.thresholds import (
    FPR_UNREACHABLE,
    meeting_fpr,
    meeting_recall,
    threshold_table,
)
from decguard_pipeline_tests.core.guard.test_metrics import generated, sk
from decguard_pipeline_tests.support.guard_results import make_results

GRID = [i / 10 for i in range(1, 10)]
NAN = {"zero_division": np.nan}


def brute(y: np.ndarray, score: np.ndarray, t: float) -> dict:
    pred = score >= t
    tn, fp, fn, tp = skm.confusion_matrix(y, pred, labels=[False, True]).ravel()
    return {
        "tp": tp,
        "fp": fp,
        "tn": tn,
        "fn": fn,
        "recall": sk(skm.recall_score, y, pred, **NAN),
        "fpr": fp / (fp + tn) if fp + tn else None,
    }


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize(("n", "decimals"), [(9, 1), (200, 2), (2000, 3)])
def test_grid_rows_match_sklearn(seed, n, decimals):
    y, score = generated(seed, n, decimals)
    table = threshold_table(y, score, GRID)
    assert [r["threshold"] for r in table["grid"]] == GRID
    for row in table["grid"]:
        pred = score >= row["threshold"]
        tn, fp, fn, tp = skm.confusion_matrix(y, pred, labels=[False, True]).ravel()
        assert (row["tp"], row["fp"], row["tn"], row["fn"]) == (tp, fp, tn, fn)
        assert row["precision"] == sk(skm.precision_score, y, pred, **NAN)
        assert row["recall"] == sk(skm.recall_score, y, pred, **NAN)
        assert row["f1"] == pytest.approx(sk(skm.f1_score, y, pred, **NAN), abs=1e-15)
        assert row["fpr"] == (fp / (fp + tn) if fp + tn else None)
        assert row["fnr"] == (fn / (fn + tp) if fn + tp else None)
    assert table["target_recall"] is None and table["target_fpr"] is None


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("target", [0.0, 0.5, 0.8, 0.95, 1.0])
def test_target_points_are_the_extreme_thresholds_that_meet_them(seed, target):
    y, score = generated(seed, 150, 2)
    candidates = sorted(set(score.tolist()))
    at = {t: brute(y, score, t) for t in candidates}
    recall_ok = [t for t in candidates if at[t]["recall"] >= target]
    point = meeting_recall(y, score, target)
    assert point["threshold"] == max(recall_ok) and point["reason"] is None
    assert point["recall"] == at[point["threshold"]]["recall"] >= target
    assert point["target"] == target
    fpr_ok = [t for t in candidates if at[t]["fpr"] <= target]
    point = meeting_fpr(y, score, target)
    if fpr_ok:
        assert point["threshold"] == min(fpr_ok) and point["fpr"] <= target
        counts = tuple(at[point["threshold"]][k] for k in ("tp", "fp", "tn", "fn"))
        assert (point["tp"], point["fp"], point["tn"], point["fn"]) == counts
    else:
        assert point["threshold"] is None and point["reason"] == FPR_UNREACHABLE


def test_targets_that_cannot_be_met_say_why():
    scores = np.array([0.9, 0.8, 0.2])
    only_negatives = meeting_recall(np.array([False, False, False]), scores, 0.9)
    assert only_negatives["threshold"] is None and only_negatives["reason"] == NO_POSITIVES
    assert only_negatives["tp"] is None and only_negatives["recall"] is None
    only_positives = meeting_fpr(np.array([True, True, True]), scores, 0.1)
    assert only_positives["reason"] == NO_NEGATIVES
    # the highest score is a negative: any threshold at a case's score flags it
    top_negative = meeting_fpr(np.array([False, True, True]), scores, 0.0)
    assert top_negative["threshold"] is None and top_negative["reason"] == FPR_UNREACHABLE
    # ties cross together: 0.8 twice, one positive and one negative
    tied = meeting_recall(np.array([True, True, False, False]), np.array([0.9, 0.8, 0.8, 0.1]), 1)
    assert (tied["threshold"], tied["tp"], tied["fp"]) == (0.8, 2, 1)


def test_the_block_has_a_table_per_guarded_label_and_group():
    rng = np.random.default_rng(3)
    p = rng.random((60, 3))
    p /= p.sum(axis=1, keepdims=True)
    expected = rng.integers(0, 3, 60).tolist()
    meta = [{"tier": "gold" if i % 3 else "free"} for i in range(60)]
    results = make_results(p, expected, labels=("a", "b", "c"), kind="choice", metadata=meta,
                           errored=(4, 9))  # fmt: skip
    contract = parse_contract(
        {
            "schema_version": "0.1",
            "decision": {"name": "d", "type": "choice", "options": ["a", "b", "c"]},
            "backend": {"provider": "mock"},
            "pipeline": {
                "guard": {"labels": ["a", "c"], "threshold_grid": [0.7, 0.2],
                          "target_recall": 0.9, "target_fpr": 0.1},
                "calibration": {"split_by": ["tier"]},
            },
        }
    )  # fmt: skip
    block = extension_metrics(results, contract)
    section = block["thresholds"]
    assert section["grid"] == [0.2, 0.7]  # sorted
    assert (section["target_recall"], section["target_fpr"]) == (0.9, 0.1)
    assert list(section["labels"]) == ["a", "c"]
    ok = np.array([i not in (4, 9) for i in range(60)])
    for index, label in ((0, "a"), (2, "c")):
        y = np.array(expected)[ok] == index
        mine = section["labels"][label]
        assert mine == threshold_table(y, p[ok, index], [0.2, 0.7], target_recall=0.9,
                                       target_fpr=0.1)  # fmt: skip
        at_half = threshold_table(y, p[ok, index], [block["guard"]["threshold"]])["grid"][0]
        guard = block["guard"]["labels"][label]
        assert {k: guard[k] for k in ("tp", "fp", "tn", "fn", "f1")} == {
            k: at_half[k] for k in ("tp", "fp", "tn", "fn", "f1")
        }
    for group in block["splits"]["tier"]:
        assert set(group["thresholds"]["labels"]) == {"a", "c"}
