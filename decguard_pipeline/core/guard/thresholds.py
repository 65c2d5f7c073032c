"""The guard's threshold table: its numbers at several thresholds, and the thresholds that meet
a target recall or false-positive rate.

Choosing a guard is two steps: pick the model by a threshold-free number (AUROC), then pick
the threshold for the deployment (low: catch more, flag more; high: flag less, miss more). The
table puts the second step in front of the reader: per threshold of
``pipeline.guard.threshold_grid`` (default 0.1, ..., 0.9) the confusion counts, precision,
recall, F1, FPR and FNR (``core.guard.metrics``'s definitions, score >= threshold predicted
positive), and, when ``target_recall`` / ``target_fpr`` is set, the operating point meeting it:

* ``target_recall`` r: the *highest* threshold whose recall is at least r (the fewest false
  alarms that still catch that share of positives);
* ``target_fpr`` f: the *lowest* threshold whose FPR is at most f (the most positives caught
  while flagging at most that share of negatives).

Both search every distinct score of the cases (the thresholds at which anything changes), not
just the grid, so the point is exact. A target no score threshold meets has no threshold and
says why. See docs/metrics.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from decguard_pipeline.core.guard.metrics import (
    NO_NEGATIVES,
    NO_POSITIVES,
    f1,
    false_negative_rate,
    false_positive_rate,
    precision,
    ranking_points,
    recall,
)
from decguard_pipeline.core.results import CaseResults

COUNTS = ("tp", "fp", "tn", "fn")
RATES = ("precision", "recall", "f1", "fpr", "fnr")
# a target FPR below the FPR of the highest score: only flagging nothing meets it
FPR_UNREACHABLE = "the highest-scored cases include a negative: only flagging nothing meets it"


def counts_at(
    y_true: np.ndarray, y_score: np.ndarray, thresholds: Sequence[float]
) -> list[tuple[int, int, int, int]]:
    """``(tp, fp, tn, fn)`` at each threshold (score >= threshold is predicted positive)."""
    y_true = np.asarray(y_true, dtype=bool)
    y_score = np.asarray(y_score, dtype=np.float64)
    n = len(y_score)
    positives = int(np.count_nonzero(y_true))
    order = np.argsort(y_score, kind="stable")
    # positives at or above each sorted position: suffix sums of the sorted truth
    positives_from = np.concatenate((np.cumsum(y_true[order][::-1])[::-1], [0]))
    starts = np.searchsorted(y_score[order], np.asarray(thresholds, dtype=np.float64), "left")
    out = []
    for start in starts.tolist():
        tp = int(positives_from[start])
        fp = n - start - tp
        fn = positives - tp
        out.append((tp, fp, n - positives - fp, fn))
    return out


def row(threshold: float, tp: int, fp: int, tn: int, fn: int) -> dict[str, Any]:
    """One row of the table: the threshold, the counts and the rates (None when undefined)."""
    return {
        "threshold": float(threshold),
        "tp": tp,
        "fp": fp,
        "tn": tn,
        "fn": fn,
        "precision": precision(tp, fp),
        "recall": recall(tp, fn),
        "f1": f1(tp, fp, fn),
        "fpr": false_positive_rate(fp, tn),
        "fnr": false_negative_rate(fn, tp),
    }


def grid_rows(
    y_true: np.ndarray, y_score: np.ndarray, thresholds: Sequence[float]
) -> list[dict[str, Any]]:
    return [
        row(t, *counts)
        for t, counts in zip(thresholds, counts_at(y_true, y_score, thresholds), strict=True)
    ]


def _unmet(target: float, reason: str) -> dict[str, Any]:
    return {
        "target": target,
        "threshold": None,
        **dict.fromkeys(COUNTS + RATES),
        "reason": reason,
    }


def _met(y_true: np.ndarray, y_score: np.ndarray, target: float, threshold: float) -> dict:
    (counts,) = counts_at(y_true, y_score, [threshold])
    return {"target": target, **row(threshold, *counts), "reason": None}


def meeting_recall(y_true: np.ndarray, y_score: np.ndarray, target: float) -> dict[str, Any]:
    """The highest threshold (a case's score) whose recall is at least ``target``."""
    scores, tps, _ = ranking_points(y_true, y_score)
    if not len(tps) or not tps[-1]:
        return _unmet(target, NO_POSITIVES)
    positives = int(tps[-1])
    # recall grows as the threshold falls; the lowest score reaches recall 1
    meets = np.flatnonzero(tps / positives >= target)
    return _met(y_true, y_score, target, float(scores[meets[0]]))


def meeting_fpr(y_true: np.ndarray, y_score: np.ndarray, target: float) -> dict[str, Any]:
    """The lowest threshold (a case's score) whose FPR is at most ``target``."""
    scores, _, fps = ranking_points(y_true, y_score)
    if not len(fps) or not fps[-1]:
        return _unmet(target, NO_NEGATIVES)
    meets = np.flatnonzero(fps / int(fps[-1]) <= target)  # FPR grows as the threshold falls
    if not len(meets):
        return _unmet(target, FPR_UNREACHABLE)
    return _met(y_true, y_score, target, float(scores[meets[-1]]))


def threshold_table(
    y_true: np.ndarray,
    y_score: np.ndarray,
    grid: Sequence[float],
    *,
    target_recall: float | None = None,
    target_fpr: float | None = None,
) -> dict[str, Any]:
    """``{"grid": rows, "target_recall": point | None, "target_fpr": point | None}``; a
    point is a row with its ``target`` and, when no threshold meets it, ``threshold`` None
    and the ``reason``."""
    y_true = np.asarray(y_true, dtype=bool)
    y_score = np.asarray(y_score, dtype=np.float64)
    return {
        "grid": grid_rows(y_true, y_score, grid),
        "target_recall": (
            None if target_recall is None else meeting_recall(y_true, y_score, target_recall)
        ),
        "target_fpr": None if target_fpr is None else meeting_fpr(y_true, y_score, target_fpr),
    }


def threshold_section(
    results: CaseResults,
    guarded: Sequence[str],
    grid: Sequence[float],
    *,
    target_recall: float | None = None,
    target_fpr: float | None = None,
) -> dict[str, Any]:
    """The ``thresholds`` section of an extension block: the settings and, per guarded label,
    its :func:`threshold_table` over the labeled, decided cases (one-vs-rest, as the guard
    metrics)."""
    labeled = results.ok & (results.expected_index >= 0)
    expected = results.expected_index[labeled]
    probs = results.probs[labeled]
    index = {label: i for i, label in enumerate(results.spec.labels)}
    return {
        "grid": [float(t) for t in grid],
        "target_recall": target_recall,
        "target_fpr": target_fpr,
        "labels": {
            label: threshold_table(
                expected == index[label],
                probs[:, index[label]],
                grid,
                target_recall=target_recall,
                target_fpr=target_fpr,
            )
            for label in guarded
        },
    }
