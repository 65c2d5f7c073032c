"""Smooth ECE: a calibration error that does not depend on bins (Błasiok & Nakkiran 2023).

For forecasts f_i in [0, 1] (top-label: the confidence) and outcomes y_i in {0, 1} (whether the
selected label was right), smooth the residuals r_i = f_i - y_i over the forecasts with a
Gaussian kernel of bandwidth σ reflected at 0 and 1:

    R_σ(t) = Σ_i K_σ(t, f_i) r_i        D_σ(t) = Σ_i K_σ(t, f_i)
    smECE_σ = ∫ |R_σ(t)| dt / ∫ D_σ(t) dt

(the mean absolute smoothed residual under the smoothed density of forecasts). The bandwidth is
the paper's fixed point σ* = smECE_σ*: smECE_σ shrinks as σ grows, so a miscalibrated model
earns a wide kernel and a well-calibrated one a narrow kernel, and the measure needs no tuning.
Unlike binned ECE it is continuous in the forecasts, so a tiny change of one confidence cannot
move a case across a bin edge and jump the number.

Discretisation, chosen to agree with the reference implementation (Apple's ``relplot``,
``smECE``) to 1e-9: σ* is found by 10 bisection halvings of [0, 1], keeping the upper end of the
bracket, where σ >= smECE_σ (bandwidths below 0.001 count as below the fixed point); each case's
mass is split linearly onto the two nearest of m = max(2000, round(20/σ)) // 2 + 1 grid points
k/(m-1); the masses, reflected about both ends, are convolved with the kernel sampled on the grid
over ±1/2; R and D are read by linear interpolation at max(round(10/σ), 200) evenly spaced
points and summed, D plus 1e-4 so that an empty region adds nothing.

The interval and the reliability curve (``smooth_calibration``) are in ``smooth_bootstrap.py``.
See docs/metrics.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from decguard_pipeline.core.calibration.inputs import binary

EPS_BANDWIDTH = 0.001  # a bandwidth below this counts as below the fixed point
REFINE_STEPS = 10  # bisection halvings of [0, 1]: the bandwidth is a multiple of 2**-10
DENSITY_FLOOR = 1e-4  # added to the smoothed density so an empty region gives 0, not 0/0
CURVE_POINTS = 200  # mesh of the reliability curve
_CHUNK_CELLS = 1 << 21  # resampled cases gridded at once (bounds the bootstrap's memory)
_RESIDUAL, _ONES, _OUTCOME = 0, 1, 2


@dataclass(frozen=True)
class ReliabilityCurve:
    """The smoothed reliability diagram on an even mesh of forecasts: ``accuracy[j]`` is the
    smoothed share of right decisions at forecast ``mesh[j]`` (the diagonal is perfect
    calibration), ``density[j]`` the smoothed density of forecasts there (integrates to ~1),
    ``lower``/``upper`` the pointwise bootstrap band of the accuracy (None without resamples)."""

    mesh: tuple[float, ...]
    accuracy: tuple[float, ...]
    density: tuple[float, ...]
    lower: tuple[float, ...] | None
    upper: tuple[float, ...] | None


@dataclass(frozen=True)
class SmoothECE:
    """Smooth ECE with its bandwidth, bootstrap interval and reliability curve."""

    value: float
    bandwidth: float
    low: float | None  # bootstrap percentile interval at ``level`` (None without resamples)
    high: float | None
    level: float
    n_bootstrap: int
    curve: ReliabilityCurve


# --- discretisation -------------------------------------------------------------------------


def _grid_size(sigma: float) -> int:
    """Grid points for bandwidth σ: at least 10 per σ and at least 1001."""
    return max(2000, round(20 / sigma)) // 2 + 1


def _eval_size(sigma: float) -> int:
    """Points at which the smoothed sums are read and added up."""
    return max(round(10 / sigma), 200)


def _split(x: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Linear split of points x in [0, 1] onto the grid k/(m-1): lower index, upper share."""
    pos = x * (m - 1)
    lower = np.minimum(pos.astype(np.int64), m - 2)
    return lower, pos - lower


def _read(smoothed: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Linear interpolation of grid values (last axis) at points t."""
    lower, up = _split(t, smoothed.shape[-1])
    return smoothed[..., lower] * (1.0 - up) + smoothed[..., lower + 1] * up


def _fast_size(n: int) -> int:
    """The smallest 2^a 3^b 5^c >= n (FFT lengths that pocketfft handles fastest)."""
    best = 1 << (n - 1).bit_length()
    p5 = 1
    while p5 < best:
        p35 = p5
        while p35 < best:
            size = p35
            while size < n:
                size *= 2
            best = min(best, size)
            p35 *= 3
        p5 *= 5
    return best


def _kernel(sigma: float, m: int) -> np.ndarray:
    """The Gaussian density of σ sampled at the m grid points of [-1/2, 1/2]."""
    t = np.linspace(0.0, 1.0, m)
    return np.exp(-((t - 0.5) ** 2) / (2 * sigma * sigma)) / (math.sqrt(2 * math.pi) * sigma)


def _extend(masses: np.ndarray) -> np.ndarray:
    """Masses mirrored about both end points (which are not repeated): 3m - 2 values."""
    return np.concatenate([masses[..., :0:-1], masses, masses[..., -2::-1]], axis=-1)


def _smooth_direct(masses: np.ndarray, sigma: float) -> np.ndarray:
    """Reflected-Gaussian smoothing of one sample's grid masses (rows of a 2-D array) by direct
    convolution: the reference's own arithmetic, accurate even where the density is ~0."""
    m = masses.shape[-1]
    kernel = _kernel(sigma, m)
    return np.stack(
        [np.convolve(row, kernel, "valid")[m // 2 : m // 2 + m] for row in _extend(masses)]
    )


class _Grid:
    """Grid masses of many samples on one grid of m points, smoothed at any bandwidth by FFT.

    A sample's smoothed values at grid point g are sum_j ext[g + m//2 + m - 1 - j] kernel[j]:
    the full linear convolution of the extended masses with the kernel, read in the window
    aligned with the grid. A circular convolution of length >= 3m - 2 leaves that window free
    of wrap-around, and the masses' spectra are computed once for all bandwidths."""

    _ROWS_AT_ONCE = 128  # bounds the memory of one inverse transform

    def __init__(self, masses: np.ndarray) -> None:
        self.masses = masses  # (quantities, samples, m)
        self.m = masses.shape[-1]
        self.size = _fast_size(3 * self.m - 2)
        self.start = self.m // 2 + self.m - 1
        self._spectra: dict[int, np.ndarray] = {}

    def _spectrum_of(self, quantity: int) -> np.ndarray:
        return np.fft.rfft(_extend(self.masses[quantity]), self.size, axis=-1)

    def _spectrum(self, quantity: int) -> np.ndarray:
        if quantity not in self._spectra:
            self._spectra[quantity] = self._spectrum_of(quantity)
        return self._spectra[quantity]

    def smooth(
        self, quantity: int, sigma: float, rows: np.ndarray, *, keep: bool = True
    ) -> np.ndarray:
        """Smoothed values (len(rows), m) of one quantity at bandwidth σ; ``keep=False`` for
        a quantity smoothed only once (its spectra are not kept)."""
        kernel = np.fft.rfft(_kernel(sigma, self.m), self.size)
        spectra = self._spectrum(quantity) if keep else self._spectrum_of(quantity)
        out = np.empty((len(rows), self.m))
        for at in range(0, len(rows), self._ROWS_AT_ONCE):
            block = rows[at : at + self._ROWS_AT_ONCE]
            full = np.fft.irfft(spectra[block] * kernel, self.size, axis=-1)
            out[at : at + len(block)] = full[:, self.start : self.start + self.m]
        return out

    def totals(self, quantity: int, sigma: float) -> np.ndarray:
        """Per sample, the sum over the grid of the smoothed values (linear in the masses, so
        one dot product per sample with the smoothing's column sums, no transform)."""
        m, kernel = self.m, _kernel(sigma, self.m)
        # column sums of "crop(conv(extend(.), kernel))": the kernel mass falling inside the
        # window, per extended position, folded back onto the grid
        cumulative = np.concatenate(([0.0], np.cumsum(kernel)))
        e = np.arange(3 * m - 2)
        inside = (
            cumulative[np.clip(self.start + m - e, 0, m)]
            - cumulative[np.clip(self.start - e, 0, m)]
        )
        source = np.concatenate((np.arange(m - 1, 0, -1), np.arange(m), np.arange(m - 2, -1, -1)))
        column_sums = np.bincount(source, inside, minlength=m)
        return self.masses[quantity] @ column_sums


def _masses(f: np.ndarray, values: np.ndarray, m: int) -> np.ndarray:
    """Grid masses (rows of ``values``, each spread at the forecasts f) on m grid points."""
    lower, up = _split(f, m)
    rows = values.shape[0]
    keys = (np.arange(rows)[:, None] * m + lower).ravel()
    size = rows * m
    out = np.bincount(keys, ((1.0 - up) * values).ravel(), minlength=size)
    out += np.bincount(keys + 1, (up * values).ravel(), minlength=size)
    return out.reshape(rows, m)


# --- one sample -----------------------------------------------------------------------------


class _Sample:
    """One sample's grid masses (per grid size, cached) and smoothed sums."""

    _ONE = np.zeros(1, dtype=np.int64)

    def __init__(self, f: np.ndarray, y: np.ndarray) -> None:
        self.f = f
        self.values = np.stack([f - y, np.ones_like(f), y])
        self._grids: dict[int, _Grid] = {}

    def grid(self, sigma: float) -> _Grid:
        m = _grid_size(sigma)
        if m not in self._grids:
            self._grids[m] = _Grid(_masses(self.f, self.values, m)[:, None, :])
        return self._grids[m]

    def smece(self, sigma: float) -> float:
        grid = self.grid(sigma)
        t = np.linspace(0.0, 1.0, _eval_size(sigma))
        residual = _read(grid.smooth(_RESIDUAL, sigma, self._ONE)[0], t)
        density = _read(grid.smooth(_ONES, sigma, self._ONE)[0], t)
        return float(np.abs(residual).sum() / (density + DENSITY_FLOOR).sum())

    def fixed_point(self) -> tuple[float, float]:
        """``(σ*, smECE_σ*)``."""
        sigma, value = _bisect(lambda s, rows: np.array([self.smece(float(s[0]))]), 1)
        return float(sigma[0]), float(value[0])


def _bisect(
    evaluate: Callable[[np.ndarray, np.ndarray], np.ndarray], count: int
) -> tuple[np.ndarray, np.ndarray]:
    """Fixed points σ = smECE_σ of ``count`` samples at once: ``(bandwidths, smECE there)``.

    ``evaluate(sigmas, rows)`` returns smECE at ``sigmas[rows]`` for the selected rows. The
    search keeps the upper end of the bracket (σ >= smECE_σ), as the reference does."""
    high = np.ones(count)
    value = evaluate(high, np.ones(count, dtype=bool))
    done = high < value  # σ = 1 is still below smECE: keep it
    low = np.zeros(count)
    for _ in range(REFINE_STEPS):
        mid = (high + low) / 2
        tiny = mid < EPS_BANDWIDTH
        need = ~done & ~tiny
        v = np.full(count, np.nan)
        if need.any():
            v[need] = evaluate(mid, need)
        below = ~done & (tiny | (need & (mid < v)))
        above = ~done & ~below
        low = np.where(below, mid, low)
        high = np.where(above, mid, high)
        value = np.where(above, v, value)
    return high, value


def smooth_ece_at(forecast: np.ndarray, outcome: np.ndarray, sigma: float) -> float | None:
    """smECE at a fixed bandwidth σ (no fixed-point search); None for no cases."""
    f, y = binary(forecast, outcome)
    if not (sigma > 0):
        raise ValueError("the bandwidth must be positive")
    return _Sample(f, y).smece(sigma) if f.size else None


def smooth_ece(forecast: np.ndarray, outcome: np.ndarray) -> float | None:
    """Smooth ECE at the fixed-point bandwidth; None for no cases.

    0 means perfectly calibrated, 1 is the maximum (certain and always wrong). Forecasts of
    exactly 0 or 1 are fine (they sit on the grid's end points); ties need no treatment (the
    measure is continuous). One case gives a well-defined value (its |f - y|, smoothed)."""
    fitted = smooth_ece_bandwidth(forecast, outcome)
    return None if fitted is None else fitted[1]


def smooth_ece_bandwidth(forecast: np.ndarray, outcome: np.ndarray) -> tuple[float, float] | None:
    """``(σ*, smECE_σ*)``; None for no cases."""
    f, y = binary(forecast, outcome)
    if not f.size:
        return None
    return _Sample(f, y).fixed_point()
