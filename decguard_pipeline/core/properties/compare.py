"""Compare decisions before and after a transformation, and judge them (DecGuard §9.4).

Comparisons are computed for many pairs at once from two ``(m, k)`` probability matrices in
canonical label order. Sums are exact (``row_fsum``) and logarithms go through :mod:`math`,
so every number equals DecGuard's bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

import numpy as np

from decguard_pipeline.core.exact import row_fsum
from decguard_pipeline.core.properties.limits import PropertyRules, is_monotonic

Getter = Callable[..., Callable[[Any], Any]]  # itemgetter, or attrgetter for typed records

# per-case limit -> (name in comparisons and messages, comparison key, absolute value?)
LIMIT_VALUES: dict[str, tuple[str, bool]] = {
    "max_tv_distance": ("tv_distance", False),
    "max_js_divergence": ("js_divergence", False),
    "max_abs_delta": ("max_abs_delta", False),
    "max_confidence_delta": ("confidence_delta", True),
}


COMPARISON_FIELDS = (
    "tv_distance",
    "js_divergence",
    "max_abs_delta",
    "confidence_delta",
    "selected_before",
    "selected_after",
    "flipped",
    "rank_changed",
    "level_delta",
)


@dataclass
class Comparisons:
    """Column-wise comparisons of ``m`` pairs (indices into ``labels``)."""

    labels: tuple[str, ...]
    tv_distance: np.ndarray
    js_divergence: np.ndarray
    max_abs_delta: np.ndarray
    confidence_delta: np.ndarray
    selected_before: np.ndarray
    selected_after: np.ndarray
    flipped: np.ndarray
    rank_changed: np.ndarray
    level_delta: np.ndarray | None  # score decisions only

    def __len__(self) -> int:
        return len(self.tv_distance)

    def columns(self, rows: np.ndarray | None = None) -> list[list[Any]]:
        """The comparisons' values as lists, one per field (``COMPARISON_FIELDS``), of ``rows``
        only when given."""

        def pick(column: np.ndarray) -> list[Any]:
            return (column if rows is None else column[rows]).tolist()

        labels = self.labels
        n = len(self) if rows is None else len(rows)
        return [
            pick(self.tv_distance),
            pick(self.js_divergence),
            pick(self.max_abs_delta),
            pick(self.confidence_delta),
            [labels[b] for b in pick(self.selected_before)],
            [labels[a] for a in pick(self.selected_after)],
            pick(self.flipped),
            pick(self.rank_changed),
            [None] * n if self.level_delta is None else pick(self.level_delta),
        ]

    def values(self, rows: np.ndarray | None = None) -> list[tuple[Any, ...]]:
        """Each comparison's values in field order (``COMPARISON_FIELDS``), of ``rows`` only
        when given."""
        return list(zip(*self.columns(rows), strict=True))

    def records(self, rows: np.ndarray | None = None) -> list[dict[str, Any]]:
        """DecGuard's ``comparison`` objects, in field order (of ``rows`` only, when given)."""
        return [
            {
                "tv_distance": tv,
                "js_divergence": js,
                "max_abs_delta": mad,
                "confidence_delta": cd,
                "selected_before": b,
                "selected_after": a,
                "flipped": f,
                "rank_changed": rc,
                "level_delta": ld,
            }
            for tv, js, mad, cd, b, a, f, rc, ld in self.values(rows)
        ]


def js_divergence_rows(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Jensen-Shannon divergence in bits per row, clamped to [0, 1].

    Per label the terms are ``½·a·log2(a/m)`` (a > 0) and ``½·b·log2(b/m)`` (b > 0) with
    m = (a+b)/2: the same IEEE operations as DecGuard's loop, logarithms from ``math``, and
    an exact row sum (a term left out and a term of 0.0 give the same exact sum)."""
    m = (p + q) / 2.0
    terms = np.zeros((len(p), 2 * p.shape[1]))
    for column, a in ((0, p), (1, q)):
        positive = a > 0.0
        ratios = (a[positive] / m[positive]).tolist()
        logs = np.fromiter(map(math.log2, ratios), dtype=np.float64, count=len(ratios))
        block = np.zeros_like(a)
        block[positive] = 0.5 * a[positive] * logs
        terms[:, column::2] = block
    return np.minimum(1.0, np.maximum(0.0, row_fsum(terms)))


def expected_levels(p: np.ndarray) -> np.ndarray:
    """Probability-weighted position on the scale (lowest level = 0), per row."""
    positions = np.arange(p.shape[1], dtype=np.float64)
    return row_fsum(p * positions)


def compare(
    before: np.ndarray,
    after: np.ndarray,
    selected_before: np.ndarray,
    labels: tuple[str, ...],
    *,
    relation: str,
    direction: str = "increasing",
    score: bool = False,
) -> Comparisons:
    """Compare ``after`` (transformed) with ``before`` (original), both ``(m, k)`` in canonical
    order. For the ``swapped`` relation (noul inversion) the two labels of ``after`` are
    exchanged first, so every distance measures how far the answer is from the expected one.
    """
    p = np.asarray(before, dtype=np.float64)
    q = np.asarray(after, dtype=np.float64)
    if relation == "swapped":
        q = q[:, ::-1]
    rows = np.arange(len(p))
    selected_before = np.asarray(selected_before, dtype=np.int64)
    selected_after = np.argmax(q, axis=1).astype(np.int64)
    diff = np.abs(p - q)
    tv = np.minimum(1.0, 0.5 * row_fsum(diff))
    confidence_delta = q[rows, selected_after] - p[rows, selected_before]
    rank_changed = (
        np.argsort(-p, axis=1, kind="stable") != np.argsort(-q, axis=1, kind="stable")
    ).any(axis=1)
    level_delta = expected_levels(q) - expected_levels(p) if score else None
    if relation == "monotonic":
        moved = selected_after - selected_before
        flipped = moved < 0 if direction == "increasing" else moved > 0
    else:
        flipped = selected_after != selected_before
    return Comparisons(
        labels=labels,
        tv_distance=tv,
        js_divergence=js_divergence_rows(p, q),
        max_abs_delta=diff.max(axis=1),
        confidence_delta=confidence_delta,
        selected_before=selected_before,
        selected_after=selected_after,
        flipped=np.asarray(flipped, dtype=bool),
        rank_changed=np.asarray(rank_changed, dtype=bool),
        level_delta=level_delta,
    )


def tolerance_violations(
    config: PropertyRules, comparison: Mapping[str, Any] | Any, *, get: Getter = itemgetter
) -> list[str]:
    """The per-case limits this comparison breaks (flips are judged separately). ``get``:
    how its fields are read (``attrgetter`` for a typed record)."""
    if is_monotonic(config):
        level_delta = get("level_delta")(comparison)
        sign = 1.0 if config.direction == "increasing" else -1.0
        if sign * level_delta < -config.max_level_decrease:
            return [
                f"expected level moved {level_delta:+.4g} against '{config.direction}' "
                f"(allowed {config.max_level_decrease:g})"
            ]
        return []
    broken = []
    for key, limit in config.tolerances().items():
        name, absolute = LIMIT_VALUES[key]
        value = get(name)(comparison)
        if absolute:
            value = abs(value)
        if value > limit:
            broken.append(f"{name} {value:.4g} > {limit:g}")
    return broken


def tolerance_mask(
    config: PropertyRules, column: Callable[[str], np.ndarray], m: int
) -> np.ndarray:
    """``bool(tolerance_violations(config, c))`` for ``m`` comparisons at once, with the same
    float operations; ``column(name)`` is the float64 column ``name`` of the comparisons (only
    the columns ``config`` limits are asked for)."""
    if is_monotonic(config):
        sign = 1.0 if config.direction == "increasing" else -1.0
        return np.asarray(sign * column("level_delta") < -config.max_level_decrease, dtype=bool)
    mask = np.zeros(m, dtype=bool)
    for key, limit in config.tolerances().items():
        name, absolute = LIMIT_VALUES[key]
        values = column(name)
        mask |= (np.abs(values) if absolute else values) > limit
    return mask


def limited_columns(config: PropertyRules) -> list[str]:
    """The comparison fields :func:`tolerance_violations` reads for ``config``."""
    if is_monotonic(config):
        return ["level_delta"]
    return [LIMIT_VALUES[key][0] for key in config.tolerances()]


def judged_mask(config: PropertyRules, comparisons: Comparisons) -> np.ndarray:
    """``bool(judge(config, c))`` for every comparison of ``comparisons`` (whose
    ``level_delta`` is set when ``config`` is monotonic)."""
    mask = tolerance_mask(config, lambda name: getattr(comparisons, name), len(comparisons))
    if config.max_flip_rate is not None:
        mask = mask | comparisons.flipped
    return mask


def judge_many(config: PropertyRules, comparisons: Comparisons) -> list[list[str]]:
    """``judge(config, c)`` for every comparison (a new list each), column-wise: each limit
    and the flips are checked for all rows at once, and only the rows that break them get
    a message, formatted from the same Python floats and labels ``judge`` formats."""
    found: list[list[str]] = [[] for _ in range(len(comparisons))]
    if is_monotonic(config):
        assert comparisons.level_delta is not None
        level_delta = comparisons.level_delta
        sign = 1.0 if config.direction == "increasing" else -1.0
        moved = np.flatnonzero(sign * level_delta < -config.max_level_decrease)
        allowed = f"against '{config.direction}' (allowed {config.max_level_decrease:g})"
        for row, value in zip(moved.tolist(), level_delta[moved].tolist(), strict=True):
            found[row].append(f"expected level moved {value:+.4g} {allowed}")
    else:
        for key, limit in config.tolerances().items():
            name, absolute = LIMIT_VALUES[key]
            values = getattr(comparisons, name)
            if absolute:
                values = np.abs(values)
            broken = np.flatnonzero(values > limit)
            for row, value in zip(broken.tolist(), values[broken].tolist(), strict=True):
                found[row].append(f"{name} {value:.4g} > {limit:g}")
    if config.max_flip_rate is not None:
        flipped = np.flatnonzero(comparisons.flipped)
        labels = comparisons.labels
        befores = comparisons.selected_before[flipped].tolist()
        afters = comparisons.selected_after[flipped].tolist()
        for row, before, after in zip(flipped.tolist(), befores, afters, strict=True):
            found[row].append(_flip_message(config, labels[before], labels[after]))
    return found


def flip_violation(config: PropertyRules, comparison: Mapping[str, Any]) -> str | None:
    """Set when the answer flipped and the property limits flips."""
    if config.max_flip_rate is None or not comparison["flipped"]:
        return None
    return _flip_message(config, comparison["selected_before"], comparison["selected_after"])


def _flip_message(config: PropertyRules, before: str, after: str) -> str:
    if is_monotonic(config):
        return f"selected level moved against '{config.direction}': {before} -> {after}"
    if config.relation == "swapped":
        return f"answer did not invert: {before!r} was selected before and after negation"
    return f"selected label changed: {before!r} -> {after!r}"


def judge(config: PropertyRules, comparison: Mapping[str, Any]) -> list[str]:
    """Every violation of one comparison, in DecGuard's order: limits, then the flip."""
    found = tolerance_violations(config, comparison)
    flip = flip_violation(config, comparison)
    if flip is not None:
        found.append(flip)
    return found


def direction_of(config: PropertyRules) -> str:
    return getattr(config, "direction", "increasing")
