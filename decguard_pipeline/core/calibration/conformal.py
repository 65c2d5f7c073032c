"""Split-conformal prediction sets: for a new case, a set of labels that contains the right one
with probability at least 1 − α, whatever the model (Vovk et al. 2005; Angelopoulos & Bates
2021, "A gentle introduction to conformal prediction").

On n calibration cases compute a nonconformity score s(x, y) of each expected label; take
q̂, the ⌈(n + 1)(1 − α)⌉-th smallest score (+∞ when that exceeds n: too few cases for α); a
new case's set is every label whose score is at most q̂. If the calibration cases and the new
case are exchangeable, P(y ∈ set) ≥ 1 − α (and < 1 − α + 1/(n + 1) without ties). Two scores:

* **LAC** (least ambiguous set-valued classifier; Sadinle, Lei & Wasserman 2019):
  s = 1 − p_y. The set is {y : p_y ≥ 1 − q̂}: the smallest sets on average; it can be empty
  when no label is probable enough.
* **APS** (adaptive prediction sets; Romano, Sesia & Candès 2020): s = the total probability
  of the labels at least as probable as y (y's own included). The set takes labels from the
  most probable down until their total reaches q̂ (the label that crosses q̂ included, so it
  is never empty): larger sets where the model hesitates, singletons where it is sure. Here
  without APS's randomisation (MAPIE's ``include_last_label=True``), so coverage can exceed
  1 − α a little; labels of equal probability are taken together.

The scores are computed on the model's own (raw) probabilities: the calibrator is fitted on
the same calibration cases, and a score function fitted on them would void the guarantee.
A case whose set holds more than one label is one the model cannot settle at level α: the
policy can hand it off (``pipeline.calibration.conformal.route``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

METHODS = ("lac", "aps")


def _masses(probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per entry (i, j): the total probability of the labels with p_il ≥ p_ij, and of those
    with p_il > p_ij (ties counted together)."""
    n, k = probs.shape
    order = np.argsort(-probs, axis=1, kind="stable")
    ranked = np.take_along_axis(probs, order, axis=1)
    cumulative = np.cumsum(ranked, axis=1)
    before = np.concatenate((np.zeros((n, 1)), cumulative[:, :-1]), axis=1)
    # each run of equal probabilities: its total through its last position, and before its
    # first
    last = np.empty_like(order)
    first = np.empty_like(order)
    last[:, k - 1] = k - 1
    for j in range(k - 2, -1, -1):
        last[:, j] = np.where(ranked[:, j] == ranked[:, j + 1], last[:, j + 1], j)
    first[:, 0] = 0
    for j in range(1, k):
        first[:, j] = np.where(ranked[:, j] == ranked[:, j - 1], first[:, j - 1], j)
    at_least, above = np.empty_like(probs), np.empty_like(probs)
    np.put_along_axis(at_least, order, np.take_along_axis(cumulative, last, axis=1), axis=1)
    np.put_along_axis(above, order, np.take_along_axis(before, first, axis=1), axis=1)
    return at_least, above


def scores(method: str, probs: np.ndarray) -> np.ndarray:
    """The nonconformity score of every label of every case (n, k)."""
    p = np.asarray(probs, dtype=np.float64)
    if method == "lac":
        return 1.0 - p
    if method == "aps":
        return _masses(p)[0]
    raise ValueError(f"unknown conformal method {method!r}; known: {', '.join(METHODS)}")


def quantile(calibration_scores: np.ndarray, alpha: float) -> float:
    """q̂: the ⌈(n + 1)(1 − α)⌉-th smallest score; +inf when that rank exceeds n."""
    if not 0.0 < alpha < 1.0:
        raise ValueError("alpha must lie strictly between 0 and 1")
    s = np.sort(np.asarray(calibration_scores, dtype=np.float64))
    n = len(s)
    rank = math.ceil((n + 1) * (1.0 - alpha))
    return math.inf if rank > n else float(s[rank - 1])


def prediction_sets(method: str, probs: np.ndarray, q_hat: float) -> np.ndarray:
    """A boolean (n, k) matrix: label j is in case i's set."""
    p = np.asarray(probs, dtype=np.float64)
    if method == "lac":
        return scores(method, p) <= q_hat
    if method == "aps":  # the label that crosses q̂ too: the mass above it is below q̂
        at_least, above = _masses(p)
        return (at_least <= q_hat) | (above < q_hat)
    raise ValueError(f"unknown conformal method {method!r}; known: {', '.join(METHODS)}")


@dataclass(frozen=True)
class Conformal:
    """What a split-conformal calibration found, and its sets on the held-out cases."""

    method: str
    alpha: float
    n_calibration: int
    q_hat: float  # +inf: too few calibration cases for alpha (every label in every set)
    n_held_out: int
    coverage: float | None  # share of held-out cases whose set holds the expected label
    mean_set_size: float | None
    singleton_rate: float | None  # sets of exactly one label: decided at level alpha
    empty_rate: float | None  # LAC only: no label probable enough
    size_counts: tuple[int, ...]  # held-out sets of size 0, 1, …, k

    def to_dict(self) -> dict[str, object]:
        return {
            "method": self.method,
            "alpha": self.alpha,
            "n_calibration": self.n_calibration,
            "q_hat": None if math.isinf(self.q_hat) else self.q_hat,
            "n_held_out": self.n_held_out,
            "coverage": self.coverage,
            "target_coverage": 1.0 - self.alpha,
            "mean_set_size": self.mean_set_size,
            "singleton_rate": self.singleton_rate,
            "empty_rate": self.empty_rate,
            "size_counts": list(self.size_counts),
        }


def conformalize(
    method: str,
    alpha: float,
    calibration_probs: np.ndarray,
    calibration_expected: np.ndarray,
    held_out_probs: np.ndarray,
    held_out_expected: np.ndarray,
) -> Conformal:
    """q̂ from the calibration cases; coverage and set sizes on the held-out ones."""
    cal = np.asarray(calibration_probs, dtype=np.float64)
    e = np.asarray(calibration_expected, dtype=np.int64)
    q_hat = quantile(scores(method, cal)[np.arange(len(e)), e], alpha)
    held = np.asarray(held_out_probs, dtype=np.float64)
    he = np.asarray(held_out_expected, dtype=np.int64)
    m, k = held.shape
    sets = prediction_sets(method, held, q_hat)
    sizes = sets.sum(axis=1)
    covered = sets[np.arange(m), he] if m else np.zeros(0, dtype=bool)
    return Conformal(
        method=method,
        alpha=alpha,
        n_calibration=len(e),
        q_hat=q_hat,
        n_held_out=m,
        coverage=float(covered.mean()) if m else None,
        mean_set_size=float(sizes.mean()) if m else None,
        singleton_rate=float((sizes == 1).mean()) if m else None,
        empty_rate=float((sizes == 0).mean()) if m else None,
        size_counts=tuple(np.bincount(sizes, minlength=k + 1).tolist()),
    )
