"""Production metrics (spec §11.2) over record columns, for many groups at once.

The formulas are the golden ones (:mod:`core.golden.metrics`) applied to what production records
know: correctness for accuracy and ECE, the label outcome for Brier and NLL, the confidence
of every record, and the routing fields where present. Every population skips records that
do not know the field: a missing outcome is never counted as wrong, a missing action never
as accepted.

:func:`grouped_metrics` computes the ``metrics`` section of every group of a partition (the
segments of a metadata key, the model versions) in a few passes over the columns: counts
with ``np.bincount``, sums exactly (:mod:`exact_groups`, bit for bit ``math.fsum``), order
statistics with ``np.partition`` per group. Every number equals DecGuard's.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from decguard_pipeline.core.contract import Evaluation
from decguard_pipeline.core.production.columns import ABSTAIN, FALLBACK, HUMAN_REVIEW, Columns
from decguard_pipeline.core.production.exact_groups import ExactColumn, scaled

# per-record flags, counted per group with one bincount
_FLAGS = ("known", "hit", "labelled", "acted", "routed", "abstain", "review", "fell",
          "latency", "cost", "covered")  # fmt: skip
_BIT = {name: 1 << i for i, name in enumerate(_FLAGS)}
_SPAN = 1 << len(_FLAGS)
_HAS = {name: (np.arange(_SPAN) & bit) > 0 for name, bit in _BIT.items()}


def _flags(columns: Columns, threshold: float | None) -> np.ndarray:
    key = ("flags", threshold)
    if key not in columns.derived:
        correct, action, fallback = columns.correct, columns.action, columns.fallback
        acted = action >= 0
        routed = (fallback >= 0) | acted
        parts = {
            "known": correct >= 0,
            "hit": correct == 1,
            "labelled": columns.outcome >= 0,
            "acted": acted,
            "routed": routed,
            "abstain": action == ABSTAIN,
            "review": action == HUMAN_REVIEW,
            "fell": routed & ((fallback == 1) | (action == FALLBACK)),
            "latency": ~np.isnan(columns.latency_ms),
            "cost": ~np.isnan(columns.cost),
            "covered": (
                columns.confidence >= threshold
                if threshold is not None
                else np.zeros(len(columns), dtype=bool)
            ),
        }
        flags = np.zeros(len(columns), dtype=np.int32)
        for name, mask in parts.items():
            flags |= mask.astype(np.int32) << int(np.log2(_BIT[name]))
        columns.derived[key] = flags
    return columns.derived[key]


def _exact(columns: Columns, name: str) -> ExactColumn:
    # built per use and dropped after: five decomposed columns would double the memory
    values = getattr(columns, name)
    return ExactColumn(np.where(np.isnan(values), 0.0, values))


def _bins(columns: Columns, n_bins: int) -> np.ndarray:
    """Each record's calibration bin: (i/n, (i+1)/n], bin 0 also holding 0."""
    key = ("bins", n_bins)
    if key not in columns.derived:
        edges = (np.arange(n_bins) + 1) / n_bins
        which = np.searchsorted(edges, columns.confidence, side="left")
        columns.derived[key] = np.minimum(which, n_bins - 1).astype(np.int16)
    return columns.derived[key]


def _ratio(part: int, whole: int) -> float | None:
    """DecGuard's ``mean`` of a 0/1 column: count / n (exact), None when empty."""
    return part / whole if whole else None


def _mean(total: float, count: int) -> float | None:
    return total / count if count else None


def _percentiles(
    values: np.ndarray, groups: np.ndarray, n: int, rows: np.ndarray, qs: tuple[float, ...]
) -> list[list[float | None]]:
    """NumPy's linear percentiles per group, from the two order statistics around each
    position (DecGuard's formula), found by partial sorting within each group."""
    if n == 1:
        parts = [values if rows.all() else values[rows]]
    else:
        picked = np.flatnonzero(rows)
        # a stable sort of small integers is a radix sort
        keys = groups[picked].astype(np.int16 if n < 1 << 15 else np.int64)
        order = picked[np.argsort(keys, kind="stable")]
        bounds = np.concatenate(([0], np.cumsum(np.bincount(groups[picked], minlength=n))))
        parts = [values[order[bounds[g] : bounds[g + 1]]] for g in range(n)]
    out: list[list[float | None]] = []
    for part in parts:
        size = len(part)
        if not size:
            out.append([None] * len(qs))
            continue
        positions = [(size - 1) * q / 100.0 for q in qs]
        lows = [math.floor(p) for p in positions]
        highs = [min(low + 1, size - 1) for low in lows]
        ranked = np.partition(part, sorted(set(lows + highs)))
        answers: list[float | None] = []
        for position, low, high in zip(positions, lows, highs, strict=True):
            a, b = float(ranked[low]), float(ranked[high])
            answers.append(a + (b - a) * (position - low))
        out.append(answers)
    return out


def ece(bins: list[dict[str, Any]]) -> float | None:
    """Count-weighted mean |accuracy - mean confidence| over non-empty bins."""
    total = sum(b["count"] for b in bins)
    if not total:
        return None
    return math.fsum(
        b["count"] / total * abs(b["accuracy"] - b["mean_confidence"]) for b in bins if b["count"]
    )


Partition = tuple[np.ndarray | None, int]  # each record's group (None: one group), groups
MAX_CELLS = 4096  # joint partitions larger than this are measured one partition at a time


class _Cells:
    """Records split by every partition at once (the cells of their cross product). Counts
    and exact sums are taken once per cell and added up per group of each partition: exact
    integers add exactly, so every group's sum is still rounded once."""

    def __init__(self, columns: Columns, evaluation: Evaluation, partitions: list[Partition]):
        self.columns = columns
        self.n_bins = evaluation.calibration_bins
        codes = np.zeros(len(columns), dtype=np.int64)
        radix = 1
        self.maps = []
        for groups, n in partitions:
            if groups is not None and n > 1:
                codes += groups.astype(np.int64) * radix
            self.maps.append((radix, n))
            radix *= max(n, 1)
        self.codes, self.size = codes, radix

    def group_of(self, partition: int) -> np.ndarray:
        radix, n = self.maps[partition]
        return (np.arange(self.size) // radix) % max(n, 1)

    def counts(self, key: np.ndarray, width: int, rows: np.ndarray | None = None) -> np.ndarray:
        """(cells, width) counts of ``key`` (0..width-1 per record) over ``rows``."""
        full = self.codes * width + key
        if rows is not None:
            full = np.where(rows, full, self.size * width)
        found = np.bincount(full, minlength=self.size * width + 1)[: self.size * width]
        return found.reshape(self.size, width)

    def totals(
        self, name: str, uses: list[tuple[np.ndarray | None, np.ndarray | None, int]]
    ) -> list[tuple[list[int], int]]:
        """Exact integer sums of a column per (cell, key) over rows, for each ``(rows, key,
        width)`` use, with their power-of-two scale; the column is decomposed once."""
        column = _exact(self.columns, name)
        out = []
        for rows, key, width in uses:
            groups = self.codes if key is None else self.codes * width + key
            out.append((column.totals(groups, self.size * width, rows), column.base))
        return out


def _per_group(table: np.ndarray, owner: np.ndarray, n: int) -> np.ndarray:
    """(cells, width) counts summed to (groups, width)."""
    return np.array([table[owner == k].sum(axis=0) for k in range(n)]).astype(np.int64)


def _add_up(values: list[int], groups: np.ndarray, n: int, width: int = 1) -> list[int]:
    out = [0] * (n * width)
    for cell, group in enumerate(groups.tolist()):
        for k in range(width):
            out[group * width + k] += values[cell * width + k]
    return out


def partition_metrics(
    columns: Columns, evaluation: Evaluation, partitions: list[Partition]
) -> list[list[dict[str, Any]]]:
    """The ``metrics`` section of every group of every partition (in order)."""
    sizes = [max(n, 1) for _, n in partitions]
    if math.prod(sizes) > MAX_CELLS and len(partitions) > 1:
        return [partition_metrics(columns, evaluation, [p])[0] for p in partitions]
    cells = _Cells(columns, evaluation, partitions)
    n_bins = evaluation.calibration_bins
    threshold = evaluation.confidence_threshold
    flags = _flags(columns, threshold)
    known = (flags & _BIT["known"]) > 0
    labelled = (flags & _BIT["labelled"]) > 0
    has_latency = (flags & _BIT["latency"]) > 0
    has_cost = (flags & _BIT["cost"]) > 0
    bins = _bins(columns, n_bins)

    flag_table = cells.counts(flags, _SPAN)
    bin_counts = cells.counts(bins, n_bins, known)
    bin_hits = cells.counts(bins, n_bins, known & (columns.correct == 1))
    histogram = cells.counts(bins, n_bins)
    sums = dict(
        zip(
            ("bin_confidence", "confidence"),
            cells.totals("confidence", [(known, bins, n_bins), (None, None, 1)]),
            strict=True,
        )
    )
    for name, rows in (("brier", labelled), ("nll", labelled), ("latency_ms", has_latency),
                       ("cost", has_cost)):  # fmt: skip
        (sums[name],) = cells.totals(name, [(rows, None, 1)])

    results = []
    for index, (groups, n) in enumerate(partitions):
        n = max(n, 1)
        g = np.zeros(1, dtype=np.int64) if groups is None else groups  # unused for one group
        owner = cells.group_of(index)
        flag_counts = _per_group(flag_table, owner, n)
        count = {name: flag_counts[:, has].sum(axis=1).tolist() for name, has in _HAS.items()}
        count["total"] = flag_counts.sum(axis=1).tolist()
        rel_counts, rel_hits = (
            _per_group(bin_counts, owner, n).tolist(),
            _per_group(bin_hits, owner, n).tolist(),
        )
        hist = _per_group(histogram, owner, n).tolist()
        exact: dict[str, list[float]] = {}
        for name, (values, base) in sums.items():
            width = n_bins if name == "bin_confidence" else 1
            exact[name] = [scaled(t, base) for t in _add_up(values, owner, n, width)]
        everything = np.ones(len(columns), dtype=bool)
        confidence_q = _percentiles(columns.confidence, g, n, everything, (50, 95))
        latency_q = _percentiles(columns.latency_ms, g, n, has_latency, (95,))
        cost_q = _percentiles(columns.cost, g, n, has_cost, (95,))
        sections = []
        for i in range(n):
            quantiles = (confidence_q[i], latency_q[i][0], cost_q[i][0])
            pieces = (rel_counts[i], rel_hits[i], hist[i])
            sections.append(_section(i, count, pieces, exact, n_bins, threshold, quantiles))
        results.append(sections)
    return results


def _section(
    i: int,
    count: dict[str, list[int]],
    pieces: tuple[list[int], list[int], list[int]],
    exact: dict[str, list[float]],
    n_bins: int,
    threshold: float | None,
    quantiles: tuple[list[float | None], float | None, float | None],
) -> dict[str, Any]:
    """One group's ``metrics`` section, in DecGuard's field order."""
    rel_counts, rel_hits, hist = pieces
    confidence_q, latency_p95, cost_p95 = quantiles
    total, known, labelled = count["total"][i], count["known"][i], count["labelled"][i]
    acted, routed = count["acted"][i], count["routed"][i]
    n_latency, n_cost = count["latency"][i], count["cost"][i]
    accuracy = _ratio(count["hit"][i], known)
    reliability = [
        {
            "lower": b / n_bins,
            "upper": (b + 1) / n_bins,
            "count": rel_counts[b],
            "mean_confidence": _mean(exact["bin_confidence"][i * n_bins + b], rel_counts[b]),
            "accuracy": _ratio(rel_hits[b], rel_counts[b]),
        }
        for b in range(n_bins)
    ]
    threshold_section = None
    if threshold is not None:
        coverage = _ratio(count["covered"][i], total)
        threshold_section = {"threshold": threshold, "n": total, "coverage": coverage}
    return {
        "counts": {
            "total": total,
            "with_outcome": labelled,
            "with_correctness": known,
            "with_action": acted,
            "with_fallback": routed,
            "with_latency": n_latency,
            "with_cost": n_cost,
        },
        "outcomes": {
            "n": known,
            "accuracy": accuracy,
            "error_rate": None if accuracy is None else 1.0 - accuracy,
        },
        "calibration": {
            "n": known,
            "ece": ece(reliability),
            "n_label_outcomes": labelled,
            "brier": _mean(exact["brier"][i], labelled),
            "nll": _mean(exact["nll"][i], labelled),
            "bins": n_bins,
            "reliability": reliability,
        },
        "confidence": {
            "n": total,
            "mean": _mean(exact["confidence"][i], total),
            "p50": confidence_q[0],
            "p95": confidence_q[1],
            "histogram": hist,
        },
        "threshold": threshold_section,
        "routing": {
            "n_actions": acted,
            "abstention_rate": _ratio(count["abstain"][i], acted),
            "human_review_rate": _ratio(count["review"][i], acted),
            "n_fallback": routed,
            "fallback_rate": _ratio(count["fell"][i], routed),
        },
        "latency_ms": _optional(n_latency, exact["latency_ms"][i], latency_p95, total=False),
        "cost": _optional(n_cost, exact["cost"][i], cost_p95, total=True),
    }


def _optional(n: int, exact_sum: float, p95: float | None, *, total: bool) -> dict[str, Any]:
    """An optional field's aggregate over the records that give it (DecGuard states a total
    for cost only)."""
    return {
        "n": n,
        "mean": _mean(exact_sum, n),
        "p95": p95,
        "total": exact_sum if total and n else None,
    }


def grouped_metrics(
    columns: Columns, evaluation: Evaluation, groups: np.ndarray | None = None, n_groups: int = 1
) -> list[dict[str, Any]]:
    """The ``metrics`` section of each group of one partition (None: all records)."""
    return partition_metrics(columns, evaluation, [(groups, n_groups)])[0]


def production_metrics(columns: Columns, evaluation: Evaluation) -> dict[str, Any]:
    """The ``metrics`` section of all records."""
    return grouped_metrics(columns, evaluation)[0]


def gate_values(metrics: dict[str, Any]) -> dict[str, float | None]:
    """The metric values production gates address."""
    threshold = metrics["threshold"]
    return {
        "accuracy": metrics["outcomes"]["accuracy"],
        "error_rate": metrics["outcomes"]["error_rate"],
        "ece": metrics["calibration"]["ece"],
        "brier": metrics["calibration"]["brier"],
        "nll": metrics["calibration"]["nll"],
        "threshold_coverage": None if threshold is None else threshold["coverage"],
        "abstention_rate": metrics["routing"]["abstention_rate"],
        "fallback_rate": metrics["routing"]["fallback_rate"],
    }
