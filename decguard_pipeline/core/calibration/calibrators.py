"""Calibrators: a fitted map from a decision's logits and probabilities to calibrated
probabilities, by one of four methods, and ``auto``, which picks among them by
cross-validated NLL on the calibration cases.

=============  ======================================  ==================================
method         parameters                              fitted on
=============  ======================================  ==================================
temperature    T                                       logits (scaling.py)
vector         a scale and a bias per label            logits (scaling.py)
isotonic       a nondecreasing map per label           probabilities (binning.py)
histogram      a value per label and equal-width bin   probabilities (binning.py)
=============  ======================================  ==================================

``auto`` splits the calibration cases into K seeded folds, fits every method on K − 1 folds
and scores the held-out fold with DecGuard's NLL (log 0 floored at 1e-15, so a binning map
that gives the expected label 0 pays ~34.5 for it); the lowest mean out-of-fold NLL wins, ties
going to the simpler method (the order above), and the winner is refitted on all the cases.

A :class:`Calibrator` is plain data (``to_dict`` / ``from_dict``: the ``calibrator.json``
artifact's ``method`` and ``parameters``); :meth:`Calibrator.apply` maps (logits,
probabilities) of any number of decisions at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from decguard_pipeline.core.calibration.binning import (
    apply_histogram,
    apply_isotonic,
    fit_histogram,
    fit_isotonic,
)
from decguard_pipeline.core.calibration.scaling import (
    T_MAX,
    T_MIN,
    apply_temperature,
    apply_vector,
    fit_temperature,
    fit_vector,
)
from decguard_pipeline.core.golden.metrics import nll

METHODS = ("temperature", "vector", "histogram", "isotonic")  # simplest first: auto's ties
AUTO = "auto"


@dataclass(frozen=True)
class Calibrator:
    method: str
    parameters: dict[str, Any] = field(default_factory=dict)

    def apply(self, logits: np.ndarray, probs: np.ndarray) -> np.ndarray:
        """Calibrated probabilities (n, k) of decisions with these logits and probabilities."""
        z = np.asarray(logits, dtype=np.float64)
        p = np.asarray(probs, dtype=np.float64)
        params = self.parameters
        if self.method == "temperature":
            return apply_temperature(z, params["temperature"])
        if self.method == "vector":
            return apply_vector(z, np.asarray(params["scale"]), np.asarray(params["bias"]))
        if self.method == "isotonic":
            tables = [
                (np.asarray(xs, dtype=np.float64), np.asarray(ys, dtype=np.float64))
                for xs, ys in zip(params["thresholds"], params["values"], strict=True)
            ]
            return apply_isotonic(p, tables)
        if self.method == "histogram":
            return apply_histogram(p, np.asarray(params["values"], dtype=np.float64))
        raise ValueError(f"unknown calibration method {self.method!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "parameters": self.parameters}


def fit(
    method: str, logits: np.ndarray, probs: np.ndarray, expected: np.ndarray, *, bins: int = 10
) -> Calibrator:
    """Fit ``method`` (one of :data:`METHODS`) on the calibration cases."""
    z = np.asarray(logits, dtype=np.float64)
    p = np.asarray(probs, dtype=np.float64)
    e = np.asarray(expected, dtype=np.int64)
    if method == "temperature":
        t = fit_temperature(z, e)
        return Calibrator(method, {"temperature": t, "at_bound": t in (T_MIN, T_MAX)})
    if method == "vector":
        scale, bias = fit_vector(z, e)
        return Calibrator(method, {"scale": scale.tolist(), "bias": bias.tolist()})
    if method == "isotonic":
        tables = fit_isotonic(p, e)
        return Calibrator(
            method,
            {
                "thresholds": [xs.tolist() for xs, _ in tables],
                "values": [ys.tolist() for _, ys in tables],
            },
        )
    if method == "histogram":
        values, counts = fit_histogram(p, e, bins)
        return Calibrator(
            method, {"bins": bins, "values": values.tolist(), "counts": counts.tolist()}
        )
    raise ValueError(f"unknown calibration method {method!r}; known: {', '.join(METHODS)}")


def expected_nll(probs: np.ndarray, expected: np.ndarray) -> float | None:
    """DecGuard's NLL of probabilities (log 0 floored at 1e-15)."""
    return nll(probs[np.arange(len(expected)), expected])


@dataclass(frozen=True)
class Selection:
    """``auto``'s choice and the out-of-fold NLL of every method it compared."""

    method: str
    folds: int
    nll: dict[str, float | None]


def cross_validated_nll(
    logits: np.ndarray,
    probs: np.ndarray,
    expected: np.ndarray,
    *,
    methods: tuple[str, ...] = METHODS,
    folds: int = 5,
    seed: int = 0,
    bins: int = 10,
) -> Selection:
    """Out-of-fold NLL of each method over ``min(folds, n)`` seeded folds, and the best one."""
    n = len(expected)
    if n < 2:
        raise ValueError("choosing a calibration method needs at least two calibration cases")
    k = min(folds, n)
    held_out = np.array_split(np.random.default_rng(seed).permutation(n), k)
    scores: dict[str, float | None] = {}
    for method in methods:
        calibrated = np.empty_like(probs, dtype=np.float64)
        for rows in held_out:
            train = np.ones(n, dtype=bool)
            train[rows] = False
            fitted = fit(method, logits[train], probs[train], expected[train], bins=bins)
            calibrated[rows] = fitted.apply(logits[rows], probs[rows])
        scores[method] = expected_nll(calibrated, expected)
    best = min(methods, key=lambda m: (scores[m], methods.index(m)))
    return Selection(best, k, scores)
