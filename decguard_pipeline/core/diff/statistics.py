"""Statistics of a diff (``pipeline.statistics``): for the matched cases overall and for every
segment, intervals of each run's metrics, paired-bootstrap intervals of their deltas, the
exact McNemar test on paired correctness and an exact sign test on paired errors.

One bootstrap per block of cases resamples *pairs*, so baseline and candidate metrics of a
resample come from the same cases (a paired bootstrap). Point values of the whole diff are
DecGuard's exact numbers; per-segment points come from the same column sums as the resamples.
Methods: docs/statistics.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from decguard_pipeline.core.contract.statistics import StatisticsSettings
from decguard_pipeline.core.diff.segments import hits_and_labeled
from decguard_pipeline.core.stats import (
    bootstrap_p_value,
    bootstrap_sums,
    mcnemar_exact,
    metric_features,
    metrics_from_sums,
    percentile_interval,
    wilson_interval,
)

if TYPE_CHECKING:
    from decguard_pipeline.core.diff.model import Diff

# metric -> True when a higher value is better
DELTA_METRICS: dict[str, bool] = {
    "accuracy": True,
    "macro_f1": True,
    "ece": False,
    "brier": False,
    "nll": False,
    "coverage": True,
    "error_rate": False,
}
WILSON_METRICS = ("accuracy", "coverage", "error_rate")


@dataclass
class PairedColumns:
    """Per matched pair: both runs' metric features side by side, plus the shift columns."""

    features: np.ndarray
    base: dict[str, slice]
    cand: dict[str, slice]
    shift: dict[str, int]  # column of: compared, tv, abs_confidence_delta
    # counts for the exact tests (per pair, booleans)
    base_hit: np.ndarray
    base_labeled: np.ndarray
    cand_hit: np.ndarray
    cand_labeled: np.ndarray


def paired_columns(diff: Diff) -> PairedColumns:
    pairs, c, ev = diff.pairs, diff.comparison, diff.evaluation
    options = {
        "calibration_bins": ev.calibration_bins,
        "confidence_threshold": ev.confidence_threshold,
    }
    base, base_layout = metric_features(pairs.base, **options)
    cand, cand_layout = metric_features(pairs.cand, **options)
    width = base.shape[1]
    m = len(pairs.cand)
    shift = np.zeros((m, 3))
    rows = np.flatnonzero(c.compared)
    shift[rows, 0] = 1.0
    shift[rows, 1] = c.tv
    shift[rows, 2] = np.abs(c.confidence_delta)
    b_hit, b_lab = hits_and_labeled(pairs.base)
    c_hit, c_lab = hits_and_labeled(pairs.cand)
    return PairedColumns(
        features=np.hstack([base, cand, shift]),
        base=base_layout,
        cand={name: slice(s.start + width, s.stop + width) for name, s in cand_layout.items()},
        shift={"compared": 2 * width, "tv": 2 * width + 1, "abs_confidence_delta": 2 * width + 2},
        base_hit=b_hit,
        base_labeled=b_lab,
        cand_hit=c_hit,
        cand_labeled=c_lab,
    )


def _entry(value: float | None, interval: tuple[float, float] | None, method: str) -> dict:
    low, high = interval if interval is not None and value is not None else (None, None)
    return {"value": value, "low": low, "high": high, "method": method}


def _count(mask: np.ndarray) -> int:
    return int(np.count_nonzero(mask))


def _wilson(value: float | None, hits: int, n: int, confidence: float) -> dict:
    return _entry(value, wilson_interval(hits, n, confidence) if n else None, "wilson")


def _point(samples: np.ndarray) -> float | None:
    value = float(samples[0])
    return None if np.isnan(value) else value


@dataclass
class Block:
    """Statistics of one set of matched pairs (all of them, or one segment)."""

    document: dict[str, Any]
    shift_samples: dict[str, np.ndarray]  # resampled mean TV and mean |confidence shift|


def block_statistics(
    cols: PairedColumns,
    rows: np.ndarray,
    diff: Diff,
    settings: StatisticsSettings,
    stream: int,
    exact: dict[str, Any] | None = None,
) -> Block:
    """Intervals and tests for the pairs at ``rows``. ``exact`` (the diff's ``metrics`` and
    ``shift`` sections) supplies the point values of the whole diff."""
    conf = settings.confidence
    has_coverage = diff.evaluation.confidence_threshold is not None
    features = cols.features[rows]
    n = len(rows)
    sums = bootstrap_sums(features, settings.bootstrap_resamples, [settings.seed, stream])
    observed = features.sum(axis=0, keepdims=True)
    base_obs = metrics_from_sums(observed, cols.base, n, coverage=has_coverage)
    cand_obs = metrics_from_sums(observed, cols.cand, n, coverage=has_coverage)
    base_rs = metrics_from_sums(sums, cols.base, n, coverage=has_coverage)
    cand_rs = metrics_from_sums(sums, cols.cand, n, coverage=has_coverage)
    totals = observed[0]

    def total(layout: dict[str, slice], name: str) -> int:
        return round(totals[layout[name]][0])

    b_hit, b_lab = cols.base_hit[rows], cols.base_labeled[rows]
    c_hit, c_lab = cols.cand_hit[rows], cols.cand_labeled[rows]
    both = b_lab & c_lab
    mcnemar = mcnemar_exact(_count(both & b_hit & ~c_hit), _count(both & ~b_hit & c_hit))
    comparison = diff.comparison
    newly = _count(comparison.newly_errored[rows])
    recovered = _count(comparison.recovered[rows])
    # paired errors as a McNemar table: "only the baseline did well" = newly errored
    errors = mcnemar_exact(newly, recovered)

    metrics: dict[str, Any] = {}
    for name, higher_better in DELTA_METRICS.items():
        if name == "coverage" and not has_coverage:
            continue
        if exact is not None:
            b_val = exact["metrics"][name]["baseline"]
            c_val = exact["metrics"][name]["candidate"]
        else:
            b_val, c_val = _point(base_obs[name]), _point(cand_obs[name])
        delta_samples = cand_rs[name] - base_rs[name]
        worse = -delta_samples if higher_better else delta_samples
        if name in WILSON_METRICS:
            hits_name, pop_name = {
                "accuracy": ("correct", "labeled"),
                "coverage": ("covered", "decided"),
                "error_rate": ("errored", None),
            }[name]
            sides = {}
            for side, layout, value in (
                ("baseline", cols.base, b_val),
                ("candidate", cols.cand, c_val),
            ):
                pop = n if pop_name is None else total(layout, pop_name)
                sides[side] = _wilson(value, total(layout, hits_name), pop, conf)
        else:
            sides = {
                "baseline": _entry(b_val, percentile_interval(base_rs[name], conf), "bootstrap"),
                "candidate": _entry(c_val, percentile_interval(cand_rs[name], conf), "bootstrap"),
            }
        delta = None if b_val is None or c_val is None else c_val - b_val
        if name == "accuracy":
            p, test = mcnemar["p_value_candidate_worse"], "mcnemar_exact"
        elif name == "error_rate":
            p, test = errors["p_value_candidate_worse"], "sign_test_exact"
        else:
            p, test = bootstrap_p_value(worse), "bootstrap"
        metrics[name] = {
            **sides,
            "delta": {
                **_entry(delta, percentile_interval(delta_samples, conf), "paired_bootstrap"),
                "p_value_candidate_worse": p if delta is not None else None,
                "test": test,
            },
        }

    compared = _count(comparison.compared[rows])
    flips = _count(comparison.flip[rows])
    with np.errstate(divide="ignore", invalid="ignore"):
        k = sums[:, cols.shift["compared"]]
        shift_samples = {
            "mean_tv_distance": np.where(k > 0, sums[:, cols.shift["tv"]] / k, np.nan),
            "mean_abs_confidence_delta": np.where(
                k > 0, sums[:, cols.shift["abs_confidence_delta"]] / k, np.nan
            ),
        }
    shift_points = {
        name: (float(totals[cols.shift[col]]) / compared if compared else None)
        for name, col in (("mean_tv_distance", "tv"), ("mean_abs_confidence_delta",
                                                       "abs_confidence_delta"))
    }  # fmt: skip
    if exact is not None:
        shift_points = {name: exact["shift"][name] for name in shift_points}
    shift = {
        "answer_flip_rate": {
            **_wilson(flips / compared if compared else None, flips, compared, conf),
            "flips": flips,
            "compared": compared,
        },
        **{
            name: _entry(shift_points[name], percentile_interval(samples, conf), "bootstrap")
            for name, samples in shift_samples.items()
        },
    }
    document = {
        "matched": n,
        "compared": compared,
        "mcnemar": {
            "n_pairs": _count(both),
            **mcnemar,
        },
        "errors": {
            "newly_errored": newly,
            "recovered": recovered,
            "p_value": errors["p_value"],
            "p_value_candidate_worse": errors["p_value_candidate_worse"],
        },
        "metrics": metrics,
        "shift": shift,
    }
    return Block(document, shift_samples)
