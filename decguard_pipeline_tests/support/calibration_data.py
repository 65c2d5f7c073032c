"""Generated result sets with known calibration, for the calibration-measure tests.

Binary (top-label) view: a confidence c and whether the decision was right, drawn with
P(right | c) = g(c): g(c) = c is perfectly calibrated, g(c) = c² over-confident (right less
often than claimed), g(c) = sqrt(c) under-confident.

Multiclass view: true label distributions q (Dirichlet), the label drawn from q, and the model
reporting q (calibrated), q sharpened or softened by a temperature (over- / under-confident), or
q while the labels come from a shifted prior (label shift: class 0 three times as frequent).
"""

from __future__ import annotations

import numpy as np

LINKS = {
    "calibrated": lambda c: c,
    "over": lambda c: c**2,
    "under": np.sqrt,
}


def binary_cases(
    rng: np.random.Generator, n: int, kind: str = "calibrated", low: float = 0.3
) -> tuple[np.ndarray, np.ndarray]:
    """``(confidence ~ U(low, 1), right ~ Bernoulli(g(confidence)))``."""
    c = rng.uniform(low, 1.0, n)
    return c, rng.uniform(size=n) < LINKS[kind](c)


def _draw(rng: np.random.Generator, q: np.ndarray) -> np.ndarray:
    """One label per row of q (rows sum to 1)."""
    u = rng.uniform(size=(len(q), 1))
    return np.minimum((u > np.cumsum(q, axis=1)).sum(axis=1), q.shape[1] - 1)


def sharpen(q: np.ndarray, temperature: float) -> np.ndarray:
    """Rows of q^(1/temperature), renormalised: < 1 sharper, > 1 softer."""
    z = np.log(q) / temperature
    z -= z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def multiclass_cases(
    rng: np.random.Generator, n: int, k: int = 3, kind: str = "calibrated"
) -> tuple[np.ndarray, np.ndarray]:
    """``(probabilities (n, k), expected label index (n,))`` of the given kind."""
    q = rng.dirichlet(np.full(k, 0.5), n)
    q = np.clip(q, 1e-12, None)
    q /= q.sum(axis=1, keepdims=True)
    if kind == "label_shift":
        shifted = q * np.array([3.0] + [1.0] * (k - 1))
        return q, _draw(rng, shifted / shifted.sum(axis=1, keepdims=True))
    expected = _draw(rng, q)
    shown = {"calibrated": q, "over": sharpen(q, 0.5), "under": sharpen(q, 2.0)}[kind]
    return shown, expected
