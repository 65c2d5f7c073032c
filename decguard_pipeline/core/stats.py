"""Statistics for evaluations: Wilson intervals, exact binomial tests (McNemar), and a seeded,
vectorised bootstrap over per-case feature columns.

These numbers are decguard_pipeline extensions, not DecGuard's, so they need not be
bit-identical to anything; they must be deterministic for a seed. Methods, formulas and
references: docs/statistics.md.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any

import numpy as np

from decguard_pipeline.core.results import CaseResults

NLL_FLOOR = 1e-15  # as in the golden NLL
# counts per bootstrap block (float64): bounds memory (~64 MB) whatever the case count
BLOCK_ELEMENTS = 8_000_000
# from this many cases on, resamples are counted one by one (cache-friendly bincount)
ROW_BY_ROW_N = 4096
# below this many trials a p = 1/2 tail is summed in integers (correctly rounded)
EXACT_HALF_MAX_N = 5000


# --- intervals and tests on counts ------------------------------------------------------------


def z_value(confidence: float) -> float:
    """The standard normal quantile of a two-sided ``confidence`` interval (1.96 for 0.95)."""
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float] | None:
    """Wilson score interval for a binomial proportion; None when ``n`` is 0."""
    if n <= 0:
        return None
    if not 0 <= successes <= n:
        raise ValueError(f"successes {successes} outside 0..{n}")
    z = z_value(confidence)
    z2 = z * z
    p = successes / n
    denom = 1.0 + z2 / n
    center = (p + z2 / (2.0 * n)) / denom
    half = z * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n)) / denom
    # the bounds at 0 and n are exact; rounding must not move them inside
    low = 0.0 if successes == 0 else max(0.0, center - half)
    high = 1.0 if successes == n else min(1.0, center + half)
    return low, high


def _half_tail_exact(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2), summed in integers and rounded once."""
    term, total = 1, 1
    for i in range(k):
        term = term * (n - i) // (i + 1)
        total += term
    return total / (1 << n)


def _log_pmf(i: int, n: int, log_p: float, log_q: float) -> float:
    return (
        math.lgamma(n + 1)
        - math.lgamma(i + 1)
        - math.lgamma(n - i + 1)
        + (i * log_p if i else 0.0)
        + ((n - i) * log_q if n - i else 0.0)
    )


def _tail_sum(lo: int, hi: int, n: int, p: float) -> float:
    """P(lo <= X <= hi) for X ~ Binomial(n, p), by summing pmf terms in log space."""
    if lo > hi:
        return 0.0
    if p <= 0.0:
        return 1.0 if lo == 0 else 0.0
    if p >= 1.0:
        return 1.0 if hi == n else 0.0
    log_p, log_q = math.log(p), math.log1p(-p)
    logs = [_log_pmf(i, n, log_p, log_q) for i in range(lo, hi + 1)]
    top = max(logs)
    return min(1.0, math.exp(top) * math.fsum(math.exp(v - top) for v in logs))


def binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p)."""
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    if p == 0.5 and n <= EXACT_HALF_MAX_N:
        return _half_tail_exact(k, n)
    return _tail_sum(0, k, n, p)


def binomial_sf(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p)."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    if p == 0.5:
        return binomial_cdf(n - k, n, 0.5)  # symmetric
    return _tail_sum(k, n, n, p)


def mcnemar_exact(baseline_only: int, candidate_only: int) -> dict[str, Any]:
    """Exact McNemar test on paired correctness (a binomial test on the discordant pairs).

    ``baseline_only``: pairs only the baseline got right; ``candidate_only``: only the
    candidate. Returns the usual two-sided p-value and the one-sided p-value of "the candidate
    is worse" (H0: both discordant directions equally likely)."""
    b, c = baseline_only, candidate_only
    n = b + c
    if n == 0:
        two_sided = worse = 1.0
    else:
        two_sided = min(1.0, 2.0 * binomial_cdf(min(b, c), n, 0.5))
        worse = binomial_sf(b, n, 0.5)
    return {
        "baseline_only_correct": b,
        "candidate_only_correct": c,
        "p_value": two_sided,
        "p_value_candidate_worse": worse,
    }


# --- the bootstrap engine ---------------------------------------------------------------------


def resample_counts(n: int, rows: int, rng: np.random.Generator) -> np.ndarray:
    """How often each of ``n`` cases is drawn in each of ``rows`` resamples, shape (rows, n).

    Each resample draws ``n`` indices with one ``rng.integers`` call per resample, so the
    counts depend only on the seed, never on how resamples are grouped into blocks."""
    if n >= ROW_BY_ROW_N:
        # one resample at a time keeps the bincount target (n counts) in cache
        counts = np.empty((rows, n))
        for r in range(rows):
            counts[r] = np.bincount(rng.integers(0, n, size=n), minlength=n)
        return counts
    # same draws as the loop above (the generator's stream does not depend on the call shape)
    idx = rng.integers(0, n, size=(rows, n))
    idx += (np.arange(rows, dtype=np.int64) * n)[:, None]
    return np.bincount(idx.ravel(), minlength=rows * n).reshape(rows, n).astype(np.float64)


def bootstrap_sums(features: np.ndarray, n_resamples: int, seed: Any) -> np.ndarray:
    """Column sums of ``features`` (n, f) over ``n_resamples`` bootstrap resamples of its rows
    (drawn with replacement, ``n`` each): one count matrix per block of resamples, and one
    matrix product gives every column sum of every resample in the block."""
    n, f = features.shape
    out = np.zeros((n_resamples, f))
    if n == 0:
        return out
    rng = np.random.default_rng(seed)
    features = np.ascontiguousarray(features, dtype=np.float64)
    block = max(1, min(n_resamples, BLOCK_ELEMENTS // n))
    for start in range(0, n_resamples, block):
        rows = min(block, n_resamples - start)
        out[start : start + rows] = resample_counts(n, rows, rng) @ features
    return out


def percentile_interval(samples: np.ndarray, confidence: float) -> tuple[float, float] | None:
    """Percentile bootstrap interval; resamples where the statistic is undefined (NaN) are
    left out. None when no resample defines it."""
    valid = samples[~np.isnan(samples)]
    if not len(valid):
        return None
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(valid, [tail, 1.0 - tail])
    return float(low), float(high)


def bootstrap_p_value(samples: np.ndarray, null: float = 0.0) -> float | None:
    """One-sided bootstrap p-value that the statistic exceeds ``null``:
    (1 + #{resamples <= null}) / (1 + #valid resamples)."""
    valid = samples[~np.isnan(samples)]
    if not len(valid):
        return None
    return (1 + int(np.count_nonzero(valid <= null))) / (1 + len(valid))


# --- golden metrics from resampled sums -------------------------------------------------------


def _bins(confidence: np.ndarray, n_bins: int) -> np.ndarray:
    """The reliability bin of each confidence, as the golden ECE assigns it."""
    edges = (np.arange(n_bins) + 1) / n_bins
    return np.minimum(np.searchsorted(edges, confidence, side="left"), n_bins - 1)


def metric_features(
    results: CaseResults, *, calibration_bins: int, confidence_threshold: float | None
) -> tuple[np.ndarray, dict[str, slice]]:
    """Per-case columns whose sums give every golden metric (see :func:`metrics_from_sums`),
    and where each group of columns sits."""
    n, k = len(results), len(results.labels)
    ok = results.ok
    exp = results.expected_index
    labeled = ok & (exp >= 0)
    sel = np.where(ok, results.selected, 0)
    correct = labeled & (sel == exp)
    conf = np.where(ok, results.confidence, 0.0)
    rows = np.flatnonzero(labeled)
    p_exp = np.ones(n)
    p_exp[rows] = results.probs[rows, exp[rows]]
    onehot = np.zeros((len(rows), k))
    onehot[np.arange(len(rows)), exp[rows]] = 1.0
    brier = np.zeros(n)
    brier[rows] = ((results.probs[rows] - onehot) ** 2).sum(axis=1)
    nll = np.where(labeled, -np.log(np.maximum(p_exp, NLL_FLOOR)), 0.0)
    covered = ok & (conf >= confidence_threshold) if confidence_threshold is not None else ok

    def onehot_of(index: np.ndarray, mask: np.ndarray) -> np.ndarray:
        out = np.zeros((n, k))
        out[np.flatnonzero(mask), index[mask]] = 1.0
        return out

    residual = np.zeros((n, calibration_bins))
    residual[rows, _bins(conf[rows], calibration_bins)] = correct[rows] - conf[rows]
    columns = [
        ("decided", ok[:, None]),
        ("errored", ~ok[:, None]),
        ("covered", covered[:, None]),
        ("labeled", labeled[:, None]),
        ("correct", correct[:, None]),
        ("brier", brier[:, None]),
        ("nll", nll[:, None]),
        ("support", onehot_of(exp, labeled)),
        ("predicted", onehot_of(sel, labeled)),
        ("tp", onehot_of(sel, correct)),
        ("bin_residual", residual),
    ]
    layout, start = {}, 0
    for name, block in columns:
        layout[name] = slice(start, start + block.shape[1])
        start += block.shape[1]
    return np.hstack([block.astype(np.float64) for _, block in columns]), layout


def metrics_from_sums(
    sums: np.ndarray, layout: dict[str, slice], n: int, *, coverage: bool
) -> dict[str, np.ndarray]:
    """Golden metrics per resample from column sums (NaN where undefined in a resample)."""

    def col(name: str) -> np.ndarray:
        return sums[:, layout[name]]

    def one(name: str) -> np.ndarray:
        return col(name)[:, 0]

    with np.errstate(divide="ignore", invalid="ignore"):
        labeled = one("labeled")
        none_labeled = labeled == 0
        tp, predicted, support = col("tp"), col("predicted"), col("support")
        # F1 = 2PR/(P+R) = 2tp/(predicted+support), 0 when tp is 0
        seen = (predicted + support) > 0
        f1 = np.where(seen, 2.0 * tp / np.where(seen, predicted + support, 1.0), 0.0)
        n_seen = seen.sum(axis=1)
        out = {
            "accuracy": np.where(none_labeled, np.nan, one("correct") / labeled),
            "macro_f1": np.where(n_seen > 0, f1.sum(axis=1) / n_seen, np.nan),
            "ece": np.where(none_labeled, np.nan, np.abs(col("bin_residual")).sum(1) / labeled),
            "brier": np.where(none_labeled, np.nan, one("brier") / labeled),
            "nll": np.where(none_labeled, np.nan, one("nll") / labeled),
            "error_rate": one("errored") / n if n else np.full(len(sums), np.nan),
        }
        decided = one("decided")
        out["coverage"] = (
            np.where(decided > 0, one("covered") / decided, np.nan)
            if coverage
            else np.full(len(sums), np.nan)
        )
    return out


def golden_intervals(
    results: CaseResults,
    metrics: dict[str, Any],
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """Intervals for a report's golden metrics (``metrics`` = its ``metrics`` section):
    Wilson for accuracy, coverage and selective accuracy; percentile bootstrap for macro-F1,
    ECE, Brier and NLL. Each entry is ``{value, low, high, method}``."""
    cls, cal, sel = metrics["classification"], metrics["calibration"], metrics["selective"]
    features, layout = metric_features(
        results,
        calibration_bins=cal["bins"],
        confidence_threshold=None if sel is None else sel["threshold"],
    )
    sums = bootstrap_sums(features, n_resamples, [seed, 0])
    resampled = metrics_from_sums(sums, layout, len(results), coverage=sel is not None)
    ok = results.ok
    exp = results.expected_index
    labeled = ok & (exp >= 0)
    correct = labeled & (results.selected == exp)
    out: dict[str, Any] = {"accuracy": _wilson_entry(cls["accuracy"], correct, labeled, confidence)}
    for name, value in (
        ("macro_f1", cls["macro_f1"]),
        ("ece", cal["ece"]),
        ("brier", cal["brier"]),
        ("nll", cal["nll"]),
    ):
        out[name] = bootstrap_entry(value, resampled[name], confidence)
    if sel is not None:
        covered = ok & (np.where(ok, results.confidence, 0.0) >= sel["threshold"])
        out["coverage"] = _wilson_entry(sel["coverage"], covered, ok, confidence)
        out["selective_accuracy"] = _wilson_entry(
            sel["selective_accuracy"], correct & covered, labeled & covered, confidence
        )
    return out


def _wilson_entry(
    value: float | None, hits: np.ndarray, population: np.ndarray, confidence: float
) -> dict[str, Any]:
    n = int(np.count_nonzero(population))
    interval = wilson_interval(int(np.count_nonzero(hits)), n, confidence) if n else None
    return interval_entry(value, interval, "wilson")


def bootstrap_entry(value: float | None, samples: np.ndarray, confidence: float) -> dict:
    interval = percentile_interval(samples, confidence) if value is not None else None
    return interval_entry(value, interval, "bootstrap")


def interval_entry(
    value: float | None, interval: tuple[float, float] | None, method: str
) -> dict[str, Any]:
    low, high = interval if interval is not None else (None, None)
    return {"value": value, "low": low, "high": high, "method": method}
