"""Binary guard-classifier metrics over NumPy columns.

A guard answers "is this case positive?" (spam, unsafe, urgent). Its score is the probability
the model gives the positive label. At a threshold the scores become predictions, counted in a
confusion matrix (TP, FP, TN, FN) from which accuracy, precision, recall, F1, FPR and FNR
follow; AUROC and AUPRC use the raw scores and no threshold. For ``choice`` (and ``score``)
decisions every guarded label is scored one-vs-rest.

Functions take ``y_true`` (bool, True = positive) and ``y_score`` (float) columns and return a
number, or None when the ratio is undefined (a zero denominator): never a crash and never a
silent 0. :func:`binary_metrics` records why each None is None. Definitions follow
scikit-learn's metrics module: ties in the scores are handled as ``roc_curve`` and
``precision_recall_curve`` handle them (cases with equal scores cross the threshold together),
F1 is ``2TP / (2TP + FP + FN)``. See docs/metrics.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from decguard_pipeline.core.exact import fsum
from decguard_pipeline.core.results import CaseResults

DEFAULT_THRESHOLD = 0.5

# Why a ratio has no value, by metric (the denominator that is zero).
NO_CASES = "no labeled cases"
NO_POSITIVES = "no positive cases"
NO_NEGATIVES = "no negative cases"
NO_PREDICTED_POSITIVE = "no case scored at or above the threshold"
NO_POSITIVES_EITHER_WAY = "no positive cases and none predicted positive"

RATIO_METRICS = ("accuracy", "precision", "recall", "f1", "fpr", "fnr")


def confusion_counts(y_true: np.ndarray, y_pred: np.ndarray) -> tuple[int, int, int, int]:
    """``(tp, fp, tn, fn)`` of boolean truth and prediction columns."""
    y_true = np.asarray(y_true, dtype=bool)
    y_pred = np.asarray(y_pred, dtype=bool)
    tp = int(np.count_nonzero(y_true & y_pred))
    fp = int(np.count_nonzero(y_pred)) - tp
    fn = int(np.count_nonzero(y_true)) - tp
    tn = len(y_true) - tp - fp - fn
    return tp, fp, tn, fn


def predict_at(y_score: np.ndarray, threshold: float) -> np.ndarray:
    """Positive where the score reaches the threshold (inclusive, like DecGuard's selective)."""
    return np.asarray(y_score, dtype=np.float64) >= threshold


def _ratio(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


def accuracy(tp: int, fp: int, tn: int, fn: int) -> float | None:
    """(TP + TN) / all; None without cases."""
    return _ratio(tp + tn, tp + fp + tn + fn)


def precision(tp: int, fp: int) -> float | None:
    """TP / (TP + FP); None when nothing was predicted positive."""
    return _ratio(tp, tp + fp)


def recall(tp: int, fn: int) -> float | None:
    """TP / (TP + FN), the true-positive rate; None without positive cases."""
    return _ratio(tp, tp + fn)


def f1(tp: int, fp: int, fn: int) -> float | None:
    """2TP / (2TP + FP + FN): equals 2PR / (P + R) and stays defined (0) when precision is
    undefined but positives were missed; None only with no positives on either side."""
    return _ratio(2 * tp, 2 * tp + fp + fn)


def false_positive_rate(fp: int, tn: int) -> float | None:
    """FP / (FP + TN); None without negative cases."""
    return _ratio(fp, fp + tn)


def false_negative_rate(fn: int, tp: int) -> float | None:
    """FN / (FN + TP) = 1 - recall; None without positive cases."""
    return _ratio(fn, fn + tp)


def ranking_points(
    y_true: np.ndarray, y_score: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct scores, highest first, with the cumulative (true positives, false
    positives) at each: entry i counts the cases whose score is at least the i-th highest
    distinct score, so tied cases always enter together (scikit-learn's
    ``_binary_clf_curve``)."""
    y_true = np.asarray(y_true, dtype=bool)
    y_score = np.asarray(y_score, dtype=np.float64)
    if not len(y_score):
        empty = np.zeros(0, dtype=np.int64)
        return np.zeros(0, dtype=np.float64), empty, empty
    order = np.argsort(-y_score, kind="stable")
    ranked = y_score[order]
    # the last position of every run of equal scores
    ends = np.append(np.flatnonzero(ranked[1:] != ranked[:-1]), len(ranked) - 1)
    tps = np.cumsum(y_true[order], dtype=np.int64)[ends]
    fps = ends + 1 - tps
    return ranked[ends], tps, fps


def ranking_counts(y_true: np.ndarray, y_score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cumulative (true positives, false positives) at each distinct score, highest first
    (:func:`ranking_points` without the scores)."""
    _, tps, fps = ranking_points(y_true, y_score)
    return tps, fps


def roc_auc(y_true: np.ndarray, y_score: np.ndarray) -> float | None:
    """Area under the ROC curve (trapezoids between distinct thresholds, so a tie between a
    positive and a negative counts one half); None unless both classes occur."""
    return _auc_from_counts(*ranking_counts(y_true, y_score))


def average_precision(y_true: np.ndarray, y_score: np.ndarray) -> float | None:
    """AUPRC as scikit-learn's ``average_precision_score``: the sum over distinct thresholds
    of (recall gained) x (precision there), without interpolation; None without positives."""
    return _ap_from_counts(*ranking_counts(y_true, y_score))


def _auc_from_counts(tps: np.ndarray, fps: np.ndarray) -> float | None:
    if not len(tps):
        return None
    positives, negatives = int(tps[-1]), int(fps[-1])
    if not positives or not negatives:
        return None
    # twice the area times P*N is an integer: accumulate it exactly, divide once
    tp = np.concatenate(([0], tps))
    fp = np.concatenate(([0], fps))
    twice_area = int((np.diff(fp) * (tp[1:] + tp[:-1])).sum())
    return twice_area / (2 * positives * negatives)


def _ap_from_counts(tps: np.ndarray, fps: np.ndarray) -> float | None:
    if not len(tps) or not tps[-1]:
        return None
    gained = np.diff(tps, prepend=0)
    keep = gained > 0  # thresholds that gain no recall add nothing
    terms = gained[keep] * tps[keep] / (tps[keep] + fps[keep])
    return fsum(terms) / int(tps[-1])


def binary_metrics(y_true: np.ndarray, y_score: np.ndarray, threshold: float) -> dict[str, Any]:
    """Every guard metric of one positive class, with the reason for each undefined value."""
    y_true = np.asarray(y_true, dtype=bool)
    tp, fp, tn, fn = confusion_counts(y_true, predict_at(y_score, threshold))
    n = tp + fp + tn + fn
    counts = ranking_counts(y_true, y_score)  # shared by both areas
    values: dict[str, float | None] = {
        "accuracy": accuracy(tp, fp, tn, fn),
        "precision": precision(tp, fp),
        "recall": recall(tp, fn),
        "f1": f1(tp, fp, fn),
        "fpr": false_positive_rate(fp, tn),
        "fnr": false_negative_rate(fn, tp),
        "auroc": _auc_from_counts(*counts),
        "auprc": _ap_from_counts(*counts),
    }
    reasons = {
        "accuracy": NO_CASES,
        "precision": NO_PREDICTED_POSITIVE,
        "recall": NO_POSITIVES,
        "f1": NO_POSITIVES_EITHER_WAY,
        "fpr": NO_NEGATIVES,
        "fnr": NO_POSITIVES,
        "auroc": NO_CASES if not n else (NO_POSITIVES if not tp + fn else NO_NEGATIVES),
        "auprc": NO_CASES if not n else NO_POSITIVES,
    }
    return {
        "threshold": threshold,
        "n": n,
        "positives": tp + fn,
        "negatives": fp + tn,
        "tp": tp,
        "fp": fp,
        "tn": tn,
        "fn": fn,
        **values,
        "undefined": {name: reasons[name] for name, value in values.items() if value is None},
    }


def default_guarded_labels(decision_type: str, labels: tuple[str, ...]) -> tuple[str, ...]:
    """A yes/no decision guards its positive (first) label; others guard every label."""
    return labels[:1] if decision_type == "noul" else labels


def one_vs_rest(
    expected: np.ndarray,
    probs: np.ndarray,
    labels: tuple[str, ...],
    guarded: tuple[str, ...],
    threshold: float,
) -> dict[str, dict[str, Any]]:
    """:func:`binary_metrics` per guarded label: positive = expected is that label, score =
    the probability of that label. ``expected`` holds label indices, ``probs`` is (n, k)."""
    index = {label: i for i, label in enumerate(labels)}
    return {
        label: binary_metrics(expected == index[label], probs[:, index[label]], threshold)
        for label in guarded
    }


def guard_metrics(
    results: CaseResults,
    *,
    guarded: tuple[str, ...] | None = None,
    threshold: float = DEFAULT_THRESHOLD,
) -> dict[str, Any]:
    """The guard section for the labeled, decided cases of ``results``."""
    spec = results.spec
    if guarded is None:
        guarded = default_guarded_labels(spec.type, spec.labels)
    labeled = results.ok & (results.expected_index >= 0)
    return {
        "threshold": threshold,
        "n": int(labeled.sum()),
        "labels": one_vs_rest(
            results.expected_index[labeled], results.probs[labeled], spec.labels, guarded, threshold
        ),
    }
