"""core.stats: Wilson intervals and binomial tails against SciPy and published values, the
exact McNemar test on hand-computed tables, and the vectorised bootstrap against an explicit
per-resample loop and the exact golden metrics."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats as sp

from decguard_pipeline.core.golden.metrics import golden_metrics
from decguard_pipeline.core.results import CaseResults
from decguard_pipeline.core.stats import (
    binomial_cdf,
    binomial_sf,
    bootstrap_p_value,
    bootstrap_sums,
    golden_intervals,
    mcnemar_exact,
    metric_features,
    metrics_from_sums,
    percentile_interval,
    resample_counts,
    wilson_interval,
)
from decguard_pipeline_tests.support.golden_results import make_results

# --- a columnar results builder shared by the diff statistics tests ---------------------------


def random_results(seed: int, n: int, *, k: int = 3, p_error: float = 0.1) -> CaseResults:
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.ones(k), size=n)
    expected = [None if rng.random() < 0.2 else int(rng.integers(0, k)) for _ in range(n)]
    labels = tuple("abcdefg"[:k])
    return make_results(probs, expected, errored=rng.random(n) < p_error, labels=labels)


# --- Wilson ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("k", "n", "low", "high"),
    # Newcombe (1998), Statistics in Medicine 17:857-872, table I, method 3 (score, no CC)
    [(81, 263, 0.2553, 0.3662), (15, 148, 0.0624, 0.1605), (0, 20, 0.0, 0.1611),
     (1, 29, 0.0061, 0.1718)],
)  # fmt: skip
def test_wilson_published_values(k, n, low, high):
    lo, hi = wilson_interval(k, n)
    assert (round(lo, 4), round(hi, 4)) == (low, high)


@pytest.mark.parametrize("confidence", [0.8, 0.9, 0.95, 0.99])
def test_wilson_matches_scipy(confidence):
    for n in (1, 2, 7, 50, 333, 10_000):
        for k in sorted({0, 1, n // 3, n // 2, n - 1, n}):
            ci = sp.binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
            lo, hi = wilson_interval(k, n, confidence)
            assert lo == pytest.approx(ci.low, abs=1e-12)
            assert hi == pytest.approx(ci.high, abs=1e-12)
            assert 0.0 <= lo <= k / n <= hi <= 1.0


def test_wilson_edges():
    assert wilson_interval(0, 0) is None
    assert wilson_interval(0, 5)[0] == 0.0 and wilson_interval(5, 5)[1] == 1.0
    with pytest.raises(ValueError):
        wilson_interval(6, 5)


# --- binomial tails and McNemar ------------------------------------------------------------------


def test_binomial_tails_match_scipy():
    for n, p in [(1, 0.5), (10, 0.5), (97, 0.5), (6001, 0.5), (40, 0.03), (500, 0.2),
                 (20_000, 0.5), (300, 0.999)]:  # fmt: skip
        for k in sorted({0, 1, n // 10, n // 2, n - 1, n}):
            assert binomial_cdf(k, n, p) == pytest.approx(
                sp.binom.cdf(k, n, p), rel=1e-9, abs=1e-300
            )
            assert binomial_sf(k, n, p) == pytest.approx(
                sp.binom.sf(k - 1, n, p), rel=1e-9, abs=1e-300
            )


def test_half_tail_is_exact_for_small_n():
    # P(X <= 3), X ~ Bin(10, 1/2) = (1 + 10 + 45 + 120) / 1024
    assert binomial_cdf(3, 10, 0.5) == 176 / 1024
    exact = Fraction(sum(math.comb(999, i) for i in range(400)), 2**999)
    assert binomial_cdf(399, 999, 0.5) == float(exact)


@pytest.mark.parametrize(
    ("b", "c", "two_sided", "worse"),
    [
        (1, 5, 14 / 64, 63 / 64),  # 2 * P(X <= 1 | 6); P(X >= 1 | 6)
        (5, 1, 14 / 64, 7 / 64),
        (10, 0, 2 / 1024, 1 / 1024),
        (3, 3, 1.0, 42 / 64),  # P(X >= 3 | 6) = (20 + 15 + 6 + 1) / 64
        (0, 0, 1.0, 1.0),
    ],
)
def test_mcnemar_hand_computed(b, c, two_sided, worse):
    result = mcnemar_exact(b, c)
    assert result["p_value"] == two_sided
    assert result["p_value_candidate_worse"] == worse


def test_mcnemar_matches_scipy_binomtest():
    rng = np.random.default_rng(0)
    for _ in range(40):
        b, c = (int(v) for v in rng.integers(0, 300, size=2))
        if b + c == 0:
            continue
        result = mcnemar_exact(b, c)
        assert result["p_value"] == pytest.approx(sp.binomtest(b, b + c).pvalue, rel=1e-9)
        greater = sp.binomtest(b, b + c, alternative="greater").pvalue
        assert result["p_value_candidate_worse"] == pytest.approx(greater, rel=1e-9)


# --- the bootstrap engine ------------------------------------------------------------------------


@pytest.mark.parametrize("n", [37, 5000])  # both ways of counting draws
def test_bootstrap_sums_equal_an_explicit_loop(n):
    rng = np.random.default_rng(1)
    features = rng.normal(size=(n, 5))
    sums = bootstrap_sums(features, 250, 99)
    draws = np.random.default_rng(99)
    expected = [features[draws.integers(0, n, size=n)].sum(axis=0) for _ in range(250)]
    np.testing.assert_allclose(sums, np.array(expected), rtol=1e-10, atol=1e-10)


def test_resample_counts_do_not_depend_on_blocks():
    whole = resample_counts(100, 12, np.random.default_rng(4))
    rng = np.random.default_rng(4)
    parts = np.vstack([resample_counts(100, 5, rng), resample_counts(100, 7, rng)])
    assert np.array_equal(whole, parts) and (whole.sum(axis=1) == 100).all()
    # the row-by-row way (large n) makes the same draws as one call for the whole block
    draws = np.random.default_rng(4).integers(0, 5000, size=(3, 5000))
    expected = np.stack([np.bincount(row, minlength=5000) for row in draws])
    assert np.array_equal(resample_counts(5000, 3, np.random.default_rng(4)), expected)


def test_bootstrap_is_deterministic_for_a_seed():
    features = np.random.default_rng(2).normal(size=(500, 3))
    a, b = bootstrap_sums(features, 300, [7, 0]), bootstrap_sums(features, 300, [7, 0])
    assert np.array_equal(a, b)
    assert not np.array_equal(a, bootstrap_sums(features, 300, [7, 1]))
    assert bootstrap_sums(np.zeros((0, 3)), 10, 0).shape == (10, 3)


def test_resampled_metrics_equal_golden_metrics_of_the_resample():
    """Metrics from column sums equal the exact golden metrics of the resampled cases."""
    results = random_results(3, 120, k=4)
    features, layout = metric_features(results, calibration_bins=7, confidence_threshold=0.4)
    rng = np.random.default_rng(5)
    for _ in range(20):
        idx = rng.integers(0, len(results), size=len(results))
        got = metrics_from_sums(features[idx].sum(axis=0, keepdims=True), layout,
                                len(idx), coverage=True)  # fmt: skip
        exact = golden_metrics(results.take(idx), calibration_bins=7, confidence_threshold=0.4)
        assert got["accuracy"][0] == pytest.approx(exact["classification"]["accuracy"], abs=1e-12)
        assert got["macro_f1"][0] == pytest.approx(exact["classification"]["macro_f1"], abs=1e-12)
        assert got["ece"][0] == pytest.approx(exact["calibration"]["ece"], abs=1e-12)
        assert got["brier"][0] == pytest.approx(exact["calibration"]["brier"], abs=1e-12)
        assert got["nll"][0] == pytest.approx(exact["calibration"]["nll"], abs=1e-12)
        assert got["coverage"][0] == pytest.approx(exact["selective"]["coverage"], abs=1e-12)
        assert got["error_rate"][0] == pytest.approx(exact["counts"]["error_rate"], abs=1e-12)


def test_undefined_resample_metrics_are_nan():
    results = make_results([[0.7, 0.2, 0.1]], [None])  # no labeled case
    features, layout = metric_features(results, calibration_bins=10, confidence_threshold=None)
    got = metrics_from_sums(features.sum(axis=0, keepdims=True), layout, 1, coverage=False)
    assert all(np.isnan(got[name][0]) for name in ("accuracy", "macro_f1", "ece", "coverage"))
    assert got["error_rate"][0] == 0.0


def test_percentile_interval_and_p_value():
    samples = np.array([np.nan, 4.0, 0.0, 1.0, 3.0, 2.0])
    assert percentile_interval(samples, 0.5) == (1.0, 3.0)  # quartiles of 0..4
    assert percentile_interval(np.array([np.nan]), 0.95) is None
    assert bootstrap_p_value(np.array([-1.0, 0.0, 1.0, 2.0])) == 3 / 5
    assert bootstrap_p_value(np.array([0.5, 0.6]), null=0.55) == 2 / 3
    assert bootstrap_p_value(np.array([np.nan])) is None


def test_golden_intervals():
    results = random_results(4, 400)
    metrics = golden_metrics(results, calibration_bins=10, confidence_threshold=0.5)
    out = golden_intervals(results, metrics, n_resamples=500, seed=3)
    assert list(out) == ["accuracy", "macro_f1", "ece", "brier", "nll", "coverage",
                         "selective_accuracy"]  # fmt: skip
    cls, sel = metrics["classification"], metrics["selective"]
    hits = round(cls["accuracy"] * cls["n"])
    assert (out["accuracy"]["low"], out["accuracy"]["high"]) == wilson_interval(hits, cls["n"])
    assert out["accuracy"]["value"] == cls["accuracy"]
    covered = round(sel["coverage"] * sel["n"])
    assert (out["coverage"]["low"], out["coverage"]["high"]) == wilson_interval(covered, sel["n"])
    for name in ("macro_f1", "ece", "brier", "nll"):
        entry = out[name]
        assert entry["method"] == "bootstrap"
        assert entry["low"] < entry["high"]
        assert entry["low"] <= entry["value"] * 1.2 and entry["value"] <= entry["high"] * 1.2
    assert out == golden_intervals(results, metrics, n_resamples=500, seed=3)
    assert out != golden_intervals(results, metrics, n_resamples=500, seed=4)
