"""Smooth ECE with its interval and reliability curve (``smooth_calibration``): a seeded
bootstrap percentile interval over cases, re-selecting the bandwidth σ* in every resample, and
the smoothed accuracy Σ K y / Σ K at σ* with its bootstrap band and the smoothed density of
forecasts, on an even mesh (what the UI plots). The estimator itself is ``smooth.py``."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from decguard_pipeline.core.calibration.inputs import binary
from decguard_pipeline.core.calibration.smooth import (
    _CHUNK_CELLS,
    _ONES,
    _OUTCOME,
    _RESIDUAL,
    CURVE_POINTS,
    DENSITY_FLOOR,
    ReliabilityCurve,
    SmoothECE,
    _bisect,
    _Grid,
    _grid_size,
    _masses,
    _read,
    _Sample,
    _smooth_direct,
    _split,
)


def _sorted_parts(f: np.ndarray, y: np.ndarray, m: int) -> tuple[np.ndarray, ...]:
    """The cases in forecast order as grid contributions: the order, each case's share of
    (residual, ones, outcome) on its lower and upper grid point, where each cell's run of
    cases starts, and its cell."""
    order = np.argsort(f, kind="stable")
    f, y = f[order], y[order]
    lower, up = _split(f, m)
    values = np.stack([f - y, np.ones_like(f), y])
    runs = np.flatnonzero(np.concatenate(([True], lower[1:] != lower[:-1])))
    return order, (1.0 - up) * values, up * values, runs, lower[runs]


def _add_weighted(block: np.ndarray, times: np.ndarray, parts: tuple[np.ndarray, ...]) -> None:
    """Add the masses of samples that take each sorted case ``times`` (rows, n) times."""
    _, low_part, high_part, runs, cells = parts
    for q in range(3):
        block[q][:, cells] += np.add.reduceat(times * low_part[q], runs, axis=1)
        block[q][:, cells + 1] += np.add.reduceat(times * high_part[q], runs, axis=1)


def _resampled_masses(
    f: np.ndarray, y: np.ndarray, m: int, n_resamples: int, seed: int
) -> np.ndarray:
    """Grid masses (residual, ones, outcome) of the original sample (row 0) and of
    ``n_resamples`` bootstrap resamples (rows 1..), shape (3, 1 + n_resamples, m).

    With the cases sorted by forecast, each grid cell's cases are one contiguous run, so a
    resample's masses are run sums of (times drawn × the case's share). Resamples are drawn
    in chunks whose size depends only on n: a seed gives the same resamples everywhere."""
    n = len(f)
    parts = _sorted_parts(f, y, m)
    fs, ys = f[parts[0]], y[parts[0]]
    out = np.zeros((3, 1 + n_resamples, m))
    out[:, 0] = _masses(fs, np.stack([fs - ys, np.ones_like(fs), ys]), m)
    rng = np.random.default_rng(seed)
    per_chunk = max(1, _CHUNK_CELLS // n)
    for start in range(0, n_resamples, per_chunk):
        rows = min(per_chunk, n_resamples - start)
        drawn = rng.integers(0, n, size=(rows, n)) + (np.arange(rows) * n)[:, None]
        times = np.bincount(drawn.ravel(), minlength=rows * n).reshape(rows, n).astype(float)
        _add_weighted(out[:, 1 + start : 1 + start + rows], times, parts)
    return out


def smooth_ece_weighted(
    forecast: np.ndarray, outcome: np.ndarray, counts: np.ndarray
) -> np.ndarray:
    """smECE of every sample that takes case i ``counts[r, i]`` times (a bootstrap resample
    of the cases, given in their order), σ* re-selected in each; the same rows of counts
    for two sets of forecasts of the same cases give a paired bootstrap. As in
    :func:`smooth_calibration`, all samples share the grid of the full sample's σ* and are
    moved by the difference it makes on the full sample. Empty for no cases."""
    f, y = binary(forecast, outcome)
    counts = np.asarray(counts, dtype=np.float64)
    rows = counts.shape[0]
    if not f.size or not rows:
        return np.zeros(rows)
    sigma_star, estimate = _Sample(f, y).fixed_point()
    m = _grid_size(sigma_star)
    parts = _sorted_parts(f, y, m)
    masses = np.zeros((3, 1 + rows, m))
    masses[:, 0] = _masses(f, np.stack([f - y, np.ones_like(f), y]), m)
    per_chunk = max(1, _CHUNK_CELLS // f.size)
    for start in range(0, rows, per_chunk):
        stop = min(rows, start + per_chunk)
        _add_weighted(masses[:, 1 + start : 1 + stop], counts[start:stop][:, parts[0]], parts)
    _, values = _bisect(_grid_smece(_Grid(masses)), rows + 1)
    return values[1:] + (estimate - values[0])


def _grid_smece(grid: _Grid) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """smECE of many samples on one shared grid, read at the grid points; rows that share a
    bandwidth are smoothed together."""
    floor = grid.m * DENSITY_FLOOR

    def evaluate(sigmas: np.ndarray, rows: np.ndarray) -> np.ndarray:
        picked = np.flatnonzero(rows)
        out = np.empty(len(picked))
        wanted = sigmas[picked]
        for sigma in np.unique(wanted).tolist():
            at = np.flatnonzero(wanted == sigma)
            residual = grid.smooth(_RESIDUAL, sigma, picked[at])
            density = grid.totals(_ONES, sigma)[picked[at]]
            out[at] = np.abs(residual).sum(axis=-1) / (density + floor)
        return out

    return evaluate


def smooth_calibration(
    forecast: np.ndarray,
    outcome: np.ndarray,
    *,
    n_bootstrap: int = 200,
    level: float = 0.95,
    seed: int = 0,
    curve_points: int = CURVE_POINTS,
) -> SmoothECE | None:
    """Smooth ECE, its bandwidth, a bootstrap interval and the reliability curve; None for
    no cases.

    The interval is the bootstrap percentile interval of the resampled smECE values. On
    simulated miscalibrated models of 100–1,000 cases it covered the large-sample value in
    93–95 % of repetitions at level 0.95 (the *basic* interval, which relplot reports, in
    85–97 %). Near 0, for a well-calibrated model, the estimate is dominated by its own noise
    floor, of order 1/sqrt(n), and no bootstrap interval covers the true value 0: read the
    interval as the measure's sampling uncertainty, not as a test of perfect calibration.

    ``n_bootstrap`` resamples of the cases are drawn from ``seed`` (the same seed, the same
    interval) and σ* is re-selected in each. To stay fast all resamples share one grid, the one
    of the full sample's σ*, read at its grid points; the interval is moved by the difference
    that grid makes on the full sample itself (about 1e-6), so that discretisation never
    separates interval and estimate. With one case (or identical cases) every resample equals
    the sample and the interval is the point."""
    f, y = binary(forecast, outcome)
    n = f.size
    if not n:
        return None
    if not 0 < level < 1:
        raise ValueError("level must lie strictly between 0 and 1")
    if n_bootstrap < 0:
        raise ValueError("n_bootstrap must not be negative")
    sample = _Sample(f, y)
    sigma_star, estimate = sample.fixed_point()

    mesh = np.linspace(0.0, 1.0, curve_points)
    smoothed = _smooth_direct(sample.grid(sigma_star).masses[:, 0, :], sigma_star)
    density = _read(smoothed[_ONES], mesh)
    accuracy = _read(smoothed[_OUTCOME], mesh) / (density + DENSITY_FLOOR)
    low = high = None
    band: tuple[np.ndarray, np.ndarray] | None = None
    if n_bootstrap:
        grid = _Grid(_resampled_masses(f, y, _grid_size(sigma_star), n_bootstrap, seed))
        _, values = _bisect(_grid_smece(grid), n_bootstrap + 1)
        tail = (1 - level) / 2
        moved = values[1:] + (estimate - values[0])
        q_low, q_high = np.quantile(moved, [tail, 1 - tail])
        low, high = max(0.0, float(q_low)), float(q_high)
        band = _band(grid, sigma_star, mesh, tail)
    curve = ReliabilityCurve(
        mesh=tuple(mesh.tolist()),
        accuracy=tuple(accuracy.tolist()),
        density=tuple((density / n).tolist()),
        lower=None if band is None else tuple(band[0].tolist()),
        upper=None if band is None else tuple(band[1].tolist()),
    )
    return SmoothECE(estimate, sigma_star, low, high, level, n_bootstrap, curve)


def _band(grid: _Grid, sigma: float, mesh: np.ndarray, tail: float) -> tuple[np.ndarray, ...]:
    """Pointwise percentile band of the resamples' smoothed accuracy at σ on the mesh."""
    rows = np.arange(1, grid.masses.shape[1])
    outcome = _read(grid.smooth(_OUTCOME, sigma, rows, keep=False), mesh)
    density = _read(grid.smooth(_ONES, sigma, rows, keep=False), mesh)
    low, high = np.quantile(outcome / (density + DENSITY_FLOOR), [tail, 1 - tail], axis=0)
    return low, high
