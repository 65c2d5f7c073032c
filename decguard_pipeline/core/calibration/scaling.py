"""Scaling calibrators on logits: temperature (one parameter) and vector scaling (a scale and a
bias per label), both fitted by minimising the mean negative log-likelihood of the expected
labels (Guo et al. 2017, "On calibration of modern neural networks").

* **Temperature**: p_T = softmax(z / T). T > 1 softens an over-confident model, T < 1 sharpens
  an under-confident one; the order of the labels in every row, so the selected label and the
  accuracy, never changes. The NLL is convex in β = 1/T: a safeguarded Newton iteration on β
  within [1/T_MAX, 1/T_MIN] finds the minimum to machine precision in a few steps.
* **Vector**: p = softmax(w ⊙ z + b), w and b one number per label. The NLL is convex in
  (w, b) (a multinomial logistic regression on fixed features); a weak ridge penalty
  ``RIDGE / 2 · (‖w − 1‖² + ‖b‖²)`` toward the identity keeps the minimum unique (one bias is
  redundant under softmax) and finite when the calibration cases are separable. Damped Newton
  steps with a backtracking line search find it. It can change the selected label.

Logits may be −inf (a label given probability 0, or one the backend listed no number for):
such a label keeps probability 0 under both. A case whose *expected* label has logit −inf has
an infinite NLL whatever the parameters, so it cannot inform the fit and is left out of it.
"""

from __future__ import annotations

import numpy as np

T_MIN, T_MAX = 0.01, 100.0
RIDGE = 1e-3
_MAX_STEPS = 100


def softmax(a: np.ndarray) -> np.ndarray:
    """Row-wise softmax; −inf entries get probability 0 (rows need one finite entry)."""
    a = np.asarray(a, dtype=np.float64)
    top = a.max(axis=1, keepdims=True)
    e = np.exp(a - top)
    return e / e.sum(axis=1, keepdims=True)


def fit_rows(z: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Rows that can inform a fit: the expected label's logit is finite."""
    return np.isfinite(z[np.arange(len(expected)), expected])


# -- temperature --------------------------------------------------------------------------------


def apply_temperature(z: np.ndarray, temperature: float) -> np.ndarray:
    """softmax(z / T)."""
    if not temperature > 0:
        raise ValueError("the temperature must be positive")
    return softmax(np.asarray(z, dtype=np.float64) / temperature)


def _slope(beta: float, zt: np.ndarray, z_expected: np.ndarray) -> tuple[float, float]:
    """First and second derivative in β of the mean NLL of softmax(β z); ``zt`` holds the
    logits label by label (k, n), so every reduction runs along the long axis. The first is
    Σ_j p_j (z_j − z_expected), which stays accurate when p_expected rounds to 1; −inf
    logits carry probability 0 and add nothing."""
    finite = np.isfinite(zt)
    a = beta * zt
    a -= a.max(axis=0)
    e = np.exp(a)
    total = e.sum(axis=0)
    gap = np.where(finite, zt - z_expected, 0.0)
    mean_gap = (e * gap).sum(axis=0) / total
    variance = (e * (gap - mean_gap) ** 2).sum(axis=0) / total
    return float(np.mean(mean_gap)), float(np.mean(variance))


def fit_beta(z: np.ndarray, z_expected: np.ndarray, start: float = 1.0) -> float:
    """β = 1/T minimising the mean NLL within [1/T_MAX, 1/T_MIN] (rows with a finite
    expected logit only).

    The NLL is convex in β, so its slope is increasing: one look at the bound the slope points
    to settles whether the minimum lies beyond it; otherwise Newton steps, kept inside a
    bracket that every evaluation narrows (bisection when a step leaves it), find the root.
    1 when the likelihood does not depend on β (no rows, or every row uniform over its finite
    logits)."""
    if not len(z):
        return 1.0
    finite = np.isfinite(z)
    spread = np.where(finite, z, -np.inf).max(axis=1) - np.where(finite, z, np.inf).min(axis=1)
    if not (spread > 0).any():
        return 1.0
    zt = np.ascontiguousarray(z.T)
    low, high = 1 / T_MAX, 1 / T_MIN
    beta = min(max(start, low), high)
    g, h = _slope(beta, zt, z_expected)
    if g < 0:
        if beta == high or _slope(high, zt, z_expected)[0] <= 0:
            return high
        low = beta
    elif g > 0:
        if beta == low or _slope(low, zt, z_expected)[0] >= 0:
            return low
        high = beta
    for _ in range(_MAX_STEPS):
        if g == 0:
            return beta
        newton = beta - g / h if h > 0 else np.nan
        if abs(newton - beta) <= 1e-13 * beta:
            return beta  # converged: the next step is below the slope's rounding noise
        beta = newton if low < newton < high else (low + high) / 2
        g, h = _slope(beta, zt, z_expected)
        if g > 0:
            high = beta
        elif g < 0:
            low = beta
    return beta


def fit_temperature(z: np.ndarray, expected: np.ndarray) -> float:
    """The NLL-minimising temperature within [T_MIN, T_MAX] of logits ``z`` (n, k)."""
    z = np.asarray(z, dtype=np.float64)
    rows = fit_rows(z, expected)
    z, e = z[rows], expected[rows]
    return 1.0 / fit_beta(z, z[np.arange(len(e)), e])


# -- vector scaling -----------------------------------------------------------------------------


def apply_vector(z: np.ndarray, scale: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """softmax(w ⊙ z + b); a −inf logit stays −inf."""
    z = np.asarray(z, dtype=np.float64)
    finite = np.isfinite(z)
    a = np.where(finite, np.where(finite, z, 0.0) * scale + bias, -np.inf)
    return softmax(a)


def _vector_objective(
    theta: np.ndarray, zf: np.ndarray, finite: np.ndarray, expected: np.ndarray, ridge: float
) -> tuple[float, np.ndarray, np.ndarray]:
    """Mean NLL plus the ridge term, its gradient and Hessian in θ = (w, b)."""
    n, k = zf.shape
    w, b = theta[:k], theta[k:]
    a = np.where(finite, zf * w + b, -np.inf)
    top = a.max(axis=1, keepdims=True)
    shifted = a - top
    e = np.exp(shifted)
    total = e.sum(axis=1, keepdims=True)
    p = e / total
    rows = np.arange(n)
    nll = float(np.mean(np.log(total[:, 0]) - shifted[rows, expected]))
    penalty = 0.5 * ridge * float(np.sum((w - 1.0) ** 2) + np.sum(b**2))
    d = p.copy()
    d[rows, expected] -= 1.0
    grad = np.concatenate(((d * zf).mean(axis=0) + ridge * (w - 1.0), d.mean(axis=0) + ridge * b))
    pz = p * zf
    hww = np.diag((pz * zf).mean(axis=0)) - pz.T @ pz / n
    hwb = np.diag(pz.mean(axis=0)) - pz.T @ p / n
    hbb = np.diag(p.mean(axis=0)) - p.T @ p / n
    hess = np.block([[hww, hwb], [hwb.T, hbb]]) + ridge * np.eye(2 * k)
    return nll + penalty, grad, hess


def fit_vector(
    z: np.ndarray, expected: np.ndarray, *, ridge: float = RIDGE
) -> tuple[np.ndarray, np.ndarray]:
    """``(scale, bias)`` minimising the penalised mean NLL (damped Newton, Armijo
    backtracking); the identity (1, 0) for no usable rows."""
    z = np.asarray(z, dtype=np.float64)
    k = z.shape[1]
    rows = fit_rows(z, expected)
    z, expected = z[rows], np.asarray(expected)[rows]
    theta = np.concatenate((np.ones(k), np.zeros(k)))
    if not len(z):
        return theta[:k], theta[k:]
    finite = np.isfinite(z)
    zf = np.where(finite, z, 0.0)
    value, grad, hess = _vector_objective(theta, zf, finite, expected, ridge)
    for _ in range(_MAX_STEPS):
        if np.max(np.abs(grad)) <= 1e-12:
            break
        step = np.linalg.solve(hess, -grad)
        slope = float(grad @ step)
        t = 1.0
        while True:
            candidate = theta + t * step
            new = _vector_objective(candidate, zf, finite, expected, ridge)
            if new[0] <= value + 1e-4 * t * slope or t < 1e-10:
                break
            t /= 2
        if t < 1e-10:
            break  # no descent left at rounding level
        converged = value - new[0] <= 1e-15 * max(1.0, abs(value))
        theta, (value, grad, hess) = candidate, new
        if converged:
            break
    return theta[:k], theta[k:]
