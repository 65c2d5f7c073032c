"""Consistency measures over repeated asks of the same cases: arrays in, a number out.

``selected`` is an ``(n, r)`` integer matrix: the label index each of ``r`` asks selected for
each of ``n`` cases (column 0 is the report's own ask); ``probs`` is the ``(n, r, k)`` matrix
of the probabilities behind them. Every case in these arrays was decided by every ask: the
caller leaves out cases with an error in any repetition (``section.py``), so no value here is
-1 or NaN.

Edge cases, the same for every measure: no case (``n == 0``) gives NaN (nothing was measured;
the section shows it as null), and fewer than two asks (``r < 2``) is refused with a
``ValueError`` (one ask cannot disagree with itself: a number would only look reassuring).
"""

from __future__ import annotations

import numpy as np


def _check(selected: np.ndarray) -> None:
    if selected.ndim != 2:
        raise ValueError(f"selected must be (cases, asks), got shape {selected.shape}")
    if selected.shape[1] < 2:
        raise ValueError("consistency needs at least two asks per case")


def unanimous_share(selected: np.ndarray) -> float:
    """Share of cases whose selected label is the same in every ask (1 = never changes)."""
    _check(selected)
    if not selected.shape[0]:
        return float("nan")
    return float(np.mean(np.all(selected == selected[:, :1], axis=1)))


def pairwise_agreement(selected: np.ndarray) -> float:
    """Mean over cases of the share of pairs of asks (``r(r-1)/2`` per case) that selected
    the same label. Unlike :func:`unanimous_share` it tells one stray answer in twenty
    (0.9 for that case) from a coin toss (about 0.5)."""
    _check(selected)
    if not selected.shape[0]:
        return float("nan")
    first, second = np.triu_indices(selected.shape[1], k=1)
    return float(np.mean(selected[:, first] == selected[:, second]))


def agreement_with_report(selected: np.ndarray) -> float:
    """Share of the extra asks (columns 1..r-1) that selected the label of the report's own
    ask (column 0): how often asking again would have changed the reported answer."""
    _check(selected)
    if not selected.shape[0]:
        return float("nan")
    return float(np.mean(selected[:, 1:] == selected[:, :1]))


def mean_tv_distance(probs: np.ndarray) -> float:
    """Mean over cases and asks of the total-variation distance (half the L1 distance, 0..1)
    between an ask's probabilities and the mean of that case's asks: how far a single answer
    strays from the model's average answer, labels aside."""
    if probs.ndim != 3:
        raise ValueError(f"probs must be (cases, asks, labels), got shape {probs.shape}")
    _check(probs[:, :, 0])
    if not probs.shape[0]:
        return float("nan")
    # the mean as the first ask plus the mean offset from it: identical asks give exactly 0
    # (a plain mean of equal floats can be off by a rounding step)
    offsets = probs - probs[:, :1]
    return float(np.mean(0.5 * np.abs(offsets - offsets.mean(axis=1, keepdims=True)).sum(axis=2)))


def label_flips(selected: np.ndarray, k: int) -> np.ndarray:
    """Per label (``(k,)`` integers): the cases for which some asks selected the label and
    others did not. A case that wavers between two labels counts once for each; a consistent
    case counts for none. Zeros when there is no case (a count, not an average)."""
    _check(selected)
    hits = selected[:, :, None] == np.arange(k)[None, None, :]  # (n, r, k)
    some, every = hits.any(axis=1), hits.all(axis=1)
    return (some & ~every).sum(axis=0).astype(np.int64)
