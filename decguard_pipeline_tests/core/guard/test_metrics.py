"""Guard metrics against scikit-learn on generated data (ties, single-class sets, empty sets),
and against decguard 0.1.1 where DecGuard defines the same number."""

from __future__ import annotations

import json
import math
import warnings
from typing import Any

import numpy as np
import pytest
from sklearn import metrics as skm

from decguard_pipeline.core.guard.metrics import (
    NO_CASES,
    NO_NEGATIVES,
    NO_POSITIVES,
    NO_PREDICTED_POSITIVE,
    average_precision,
    binary_metrics,
    guard_metrics,
    one_vs_rest,
    roc_auc,
)
from decguard_pipeline_tests.conftest import EXAMPLES
from decguard_pipeline_tests.support.guard_results import make_results


def sk(fn: Any, *args: Any, **kwargs: Any) -> float | None:
    """A scikit-learn metric with its undefined values (nan, after a warning) as None."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = float(fn(*args, **kwargs))
    return None if math.isnan(value) else value


def generated(seed: int, n: int, decimals: int, positive_share: float = 0.3):
    """Truth and scores that carry signal; rounding makes many ties."""
    rng = np.random.default_rng(seed)
    y = rng.random(n) < positive_share
    score = np.clip(rng.normal(np.where(y, 0.65, 0.4), 0.2), 0.0, 1.0).round(decimals)
    return y, score


CASES = [(seed, n, d) for seed in range(6) for n, d in ((7, 1), (60, 1), (500, 2), (3000, 3))]


@pytest.mark.parametrize(("seed", "n", "decimals"), CASES)
def test_threshold_metrics_match_sklearn(seed, n, decimals):
    y, score = generated(seed, n, decimals)
    for threshold in (0.0, 0.3, 0.5, 0.7, 1.0):
        m = binary_metrics(y, score, threshold)
        pred = score >= threshold
        tn, fp, fn, tp = skm.confusion_matrix(y, pred, labels=[False, True]).ravel()
        assert (m["tp"], m["fp"], m["tn"], m["fn"]) == (tp, fp, tn, fn)
        nan = {"zero_division": np.nan}
        assert m["accuracy"] == sk(skm.accuracy_score, y, pred)
        assert m["precision"] == sk(skm.precision_score, y, pred, **nan)
        assert m["recall"] == sk(skm.recall_score, y, pred, **nan)
        assert m["f1"] == pytest.approx(sk(skm.f1_score, y, pred, **nan), rel=1e-15)
        specificity = sk(skm.recall_score, y, pred, pos_label=False, **nan)
        assert m["fpr"] == (None if specificity is None else pytest.approx(1 - specificity))
        assert m["fnr"] == (None if m["recall"] is None else pytest.approx(1 - m["recall"]))


@pytest.mark.parametrize(("seed", "n", "decimals"), CASES)
def test_ranking_metrics_match_sklearn_with_ties(seed, n, decimals):
    y, score = generated(seed, n, decimals)
    assert len(np.unique(score)) < n or n == 7  # the rounding did produce ties
    assert roc_auc(y, score) == pytest.approx(sk(skm.roc_auc_score, y, score), rel=1e-12)
    assert average_precision(y, score) == pytest.approx(
        skm.average_precision_score(y, score), rel=1e-12
    )


def test_tie_between_positive_and_negative_counts_half():
    y = np.array([True, False, True, False])
    score = np.array([0.5, 0.5, 0.9, 0.1])
    # pairs: (0.9 > 0.5), (0.9 > 0.1), (0.5 = 0.5 -> 1/2), (0.5 > 0.1) = 3.5 of 4
    assert roc_auc(y, score) == 0.875 == skm.roc_auc_score(y, score)
    # all scores tied: no ranking at all
    assert roc_auc(y, np.full(4, 0.3)) == 0.5
    # thresholds 0.9 (P 1, R 1/2) and 0.5 (P 2/3, R 1): 1/2 * 1 + 1/2 * 2/3
    assert average_precision(y, score) == pytest.approx(5 / 6, rel=1e-15)
    assert average_precision(y, score) == pytest.approx(skm.average_precision_score(y, score))


def test_single_class_sets_are_undefined_not_crashes():
    score = np.array([0.2, 0.6, 0.9])
    only_negative = binary_metrics(np.zeros(3, dtype=bool), score, 0.5)
    assert only_negative["auroc"] is None and sk(skm.roc_auc_score, [0, 0, 0], score) is None
    assert only_negative["auprc"] is None  # scikit-learn says 0.0 with a warning
    assert only_negative["recall"] is None and only_negative["fnr"] is None
    assert only_negative["fpr"] == 2 / 3
    assert only_negative["precision"] == 0.0  # predicted positive twice, never right
    assert only_negative["f1"] == 0.0
    assert only_negative["undefined"] == {
        "recall": NO_POSITIVES,
        "fnr": NO_POSITIVES,
        "auroc": NO_POSITIVES,
        "auprc": NO_POSITIVES,
    }

    only_positive = binary_metrics(np.ones(3, dtype=bool), score, 0.5)
    assert only_positive["auroc"] is None
    assert only_positive["undefined"]["auroc"] == NO_NEGATIVES
    assert only_positive["fpr"] is None and only_positive["undefined"]["fpr"] == NO_NEGATIVES
    assert only_positive["auprc"] == 1.0 == skm.average_precision_score([1, 1, 1], score)
    assert only_positive["recall"] == 2 / 3


def test_nothing_predicted_positive():
    m = binary_metrics(np.array([True, False, False]), np.array([0.4, 0.3, 0.1]), 0.5)
    assert m["precision"] is None
    assert m["undefined"]["precision"] == NO_PREDICTED_POSITIVE
    # F1 stays defined: 2TP / (2TP + FP + FN) = 0 / 1, as scikit-learn computes it
    assert m["f1"] == 0.0 == sk(skm.f1_score, [1, 0, 0], [0, 0, 0], zero_division=np.nan)
    assert m["fnr"] == 1.0 and m["fpr"] == 0.0


def test_empty_set():
    m = binary_metrics(np.zeros(0, dtype=bool), np.zeros(0), 0.5)
    assert m["n"] == 0
    assert all(m[k] is None for k in ("accuracy", "precision", "recall", "f1", "fpr", "fnr"))
    assert m["undefined"]["accuracy"] == NO_CASES
    assert m["undefined"]["auroc"] == NO_CASES


@pytest.mark.parametrize("seed", range(4))
def test_one_vs_rest_matches_sklearn_per_label_and_macro(seed):
    rng = np.random.default_rng(seed)
    n, k = 400, 4
    logits = rng.normal(size=(n, k)) + 0.8 * np.eye(k)[rng.integers(0, k, n)]
    probs = np.exp(logits.round(1))
    probs /= probs.sum(axis=1, keepdims=True)
    expected = (probs + rng.normal(scale=0.15, size=(n, k))).argmax(axis=1)
    labels = ("a", "b", "c", "d")
    per_label = one_vs_rest(expected, probs, labels, labels, threshold=0.4)
    for j, label in enumerate(labels):
        m = per_label[label]
        y, s = expected == j, probs[:, j]
        assert m["auroc"] == pytest.approx(skm.roc_auc_score(y, s), rel=1e-12)
        assert m["auprc"] == pytest.approx(skm.average_precision_score(y, s), rel=1e-12)
        assert m["recall"] == skm.recall_score(y, s >= 0.4)
    macro = skm.roc_auc_score(expected, probs, multi_class="ovr", average="macro")
    assert np.mean([per_label[x]["auroc"] for x in labels]) == pytest.approx(macro, rel=1e-12)


def test_guard_metrics_use_labeled_decided_cases_only():
    probs = [[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.7, 0.3], [0.3, 0.7], [0.5, 0.5]]
    expected = [0, 1, 1, None, 0, 0]
    results = make_results(probs, expected, errored=(4,))
    g = guard_metrics(results)  # noul: the first label is the positive one
    assert list(g["labels"]) == ["yes"] and g["n"] == 4
    m = g["labels"]["yes"]
    # kept rows 0, 1, 2, 5: y = [1, 0, 0, 1], score = [.9, .2, .6, .5]
    assert (m["tp"], m["fp"], m["tn"], m["fn"]) == (2, 1, 1, 0)
    assert m["auroc"] == skm.roc_auc_score([1, 0, 0, 1], [0.9, 0.2, 0.6, 0.5])
    both = guard_metrics(results, guarded=("yes", "no"), threshold=0.65)
    assert both["labels"]["no"]["tp"] == 1  # row 1 (0.8); row 2 scores 0.4 for "no"


def test_guard_metrics_at_scale():
    # a smoke check of scale, not a benchmark: 100k cases through every metric
    y, score = generated(0, 100_000, 3)
    m = binary_metrics(y, score, 0.5)
    assert m["n"] == 100_000
    assert m["auroc"] == pytest.approx(skm.roc_auc_score(y, score), rel=1e-12)


def test_noul_guard_at_half_equals_decguard_per_label(ref, tmp_path):
    """At threshold 0.5 a yes/no guard predicts exactly DecGuard's selected label, so its
    precision and recall are decguard 0.1.1's per-label numbers for the positive label."""
    out = tmp_path / "ref.json"
    assert ref("test", EXAMPLES / "spam" / "decguard.yaml", "-o", out).exit_code == 0
    doc = json.loads(out.read_text())
    labels = tuple(doc["contract"]["labels"])
    rows = [r for r in doc["results"] if r["result"] is not None and r["expected"] is not None]
    probs = np.array([[r["result"]["probabilities"][x] for x in labels] for r in rows])
    expected = np.array([labels.index(r["expected"]) for r in rows])
    mine = one_vs_rest(expected, probs, labels, labels[:1], threshold=0.5)[labels[0]]
    theirs = doc["metrics"]["classification"]["per_label"][labels[0]]
    assert (mine["precision"], mine["recall"]) == (theirs["precision"], theirs["recall"])
    assert mine["tp"] + mine["fn"] == theirs["support"]
    assert mine["accuracy"] == doc["metrics"]["classification"]["accuracy"]
