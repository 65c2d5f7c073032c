"""Per-property summaries and the checks derived from them (DecGuard §9.6, §9.7)."""

from __future__ import annotations

import dataclasses
import math
from array import array
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from decguard_pipeline.core.gates import make_check
from decguard_pipeline.core.properties.compare import (
    Comparisons,
    Getter,
    limited_columns,
    tolerance_mask,
    tolerance_violations,
)
from decguard_pipeline.core.properties.limits import PropertyRules

if TYPE_CHECKING:
    from decguard_pipeline.core.contract.properties import AnyProperty, Properties

ORIGINAL_ERROR = "original_error"
NOT_RUN = "the property was not run"
NOTHING_TRANSFORMED = "no case could be transformed"


def is_failed(pair: dict[str, Any]) -> bool:
    """A failed pair: it violates the property, or errored for another reason than its
    original case."""
    error = pair["error"]
    return bool(pair["violations"]) or (error is not None and error["kind"] != ORIGINAL_ERROR)


def _max(values: list[float]) -> float | None:
    return max(values) if values else None


def count_violations(
    config: PropertyRules, compared: Sequence[Any], *, get: Getter = itemgetter
) -> int:
    """How many comparisons break a per-case limit of ``config`` (``tolerance_violations``),
    counted column-wise. ``get``: how a comparison's fields are read (``attrgetter`` for
    typed records)."""
    columns = {name: list(map(get(name), compared)) for name in limited_columns(config)}
    if any(None in values for values in columns.values()):  # a missing value: one at a time
        return sum(1 for c in compared if tolerance_violations(config, c, get=get))
    mask = tolerance_mask(
        config, lambda name: np.array(columns[name], dtype=np.float64), len(compared)
    )
    return int(np.count_nonzero(mask))


def summarize(
    name: str,
    config: AnyProperty,
    pairs: Sequence[Any],
    n_skipped: int,
    n_cases: int,
    *,
    get: Getter = itemgetter,
) -> dict[str, Any]:
    """The summary of one property over its pairs. Violations are re-judged from the stored
    comparisons with ``config`` (tolerance violations only: flips are counted apart).
    ``get``: how a pair's fields are read (``attrgetter`` for typed records)."""
    return summary_of(name, config, figures_of(config, pairs, get=get), n_skipped, n_cases)


def pair_counts(pairs: Sequence[Any], *, get: Getter = itemgetter) -> tuple[int, list[str], int]:
    """What a summary counts of a property's pairs: how many, their errors' kinds, and how
    many have a reduced example."""
    kind = get("kind")
    kinds = [kind(e) for e in map(get("error"), pairs) if e is not None]
    return len(pairs), kinds, sum(1 for r in map(get("reduced"), pairs) if r is not None)


@dataclass(frozen=True)
class Figures:
    """What a property's summary is made of, over some of its pairs: counts, and per
    compared pair (in pair order) its TV distance, JS divergence, largest probability
    change, absolute confidence change and level change. The figures of consecutive runs
    of pairs add up (``a + b``) to those of all of them, so the same summary follows."""

    n_transformed: int = 0
    error_kinds: list[str] = field(default_factory=list)
    n_reduced: int = 0
    n_violations: int = 0
    n_flips: int = 0
    tv: list[float] = field(default_factory=list)
    js: list[float] = field(default_factory=list)
    delta: list[float] = field(default_factory=list)
    confidence: list[float] = field(default_factory=list)
    levels: list[float | None] = field(default_factory=list)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # pickled with their floats as arrays of doubles: the verdict of a child
        # (``core.report.halves``) carries 100k+ of them
        floats = (array("d", v) for v in (self.tv, self.js, self.delta, self.confidence))
        counts = (self.n_transformed, self.error_kinds, self.n_reduced)
        return _figures, (*counts, self.n_violations, self.n_flips, *floats, self.levels)

    def __add__(self, other: Figures) -> Figures:
        return Figures(
            self.n_transformed + other.n_transformed,
            self.error_kinds + other.error_kinds,
            self.n_reduced + other.n_reduced,
            self.n_violations + other.n_violations,
            self.n_flips + other.n_flips,
            self.tv + other.tv,
            self.js + other.js,
            self.delta + other.delta,
            self.confidence + other.confidence,
            self.levels + other.levels,
        )


def _figures(*fields: Any) -> Figures:
    """A :class:`Figures` from its pickled fields: the arrays as lists of floats again."""
    return Figures(*(f.tolist() if isinstance(f, array) else f for f in fields))


def figures_of(config: PropertyRules, pairs: Sequence[Any], *, get: Getter = itemgetter) -> Figures:
    """The :class:`Figures` of a property's ``pairs`` (their fields read with ``get``)."""
    compared = [c for c in map(get("comparison"), pairs) if c is not None]
    return compared_figures(config, compared, pair_counts(pairs, get=get), get=get)


def compared_figures(
    config: PropertyRules,
    compared: Sequence[Any],
    counts: tuple[int, list[str], int],
    *,
    get: Getter = itemgetter,
) -> Figures:
    """The :class:`Figures` of the stored comparisons of a property's pairs that hold one
    (``compared``, in pair order, their fields read with ``get``) and the ``pair_counts``
    of all its pairs."""
    n_transformed, error_kinds, n_reduced = counts
    levels: list[float | None] = []
    if getattr(config, "direction", None) is not None:
        levels = list(map(get("level_delta"), compared))
    return Figures(
        n_transformed, error_kinds, n_reduced,
        n_violations=count_violations(config, compared, get=get),
        n_flips=sum(map(bool, map(get("flipped"), compared))),
        tv=list(map(get("tv_distance"), compared)),
        js=list(map(get("js_divergence"), compared)),
        delta=list(map(get("max_abs_delta"), compared)),
        confidence=list(map(abs, map(get("confidence_delta"), compared))),
        levels=levels,
    )  # fmt: skip


def summary_of(
    name: str, config: AnyProperty, figures: Figures, n_skipped: int, n_cases: int
) -> dict[str, Any]:
    """DecGuard's summary of one property from the :class:`Figures` of all its pairs."""
    level_decrease = None
    direction = getattr(config, "direction", None)
    if direction is not None:
        sign = 1.0 if direction == "increasing" else -1.0
        level_decrease = _max([max(0.0, -sign * (level or 0.0)) for level in figures.levels])
    errors = Counter(figures.error_kinds)
    n, tv = len(figures.tv), figures.tv
    return {
        "property": name,
        "level": config.level,
        "relation": config.relation,
        "n_cases": n_cases,
        "n_transformed": figures.n_transformed,
        "n_skipped": n_skipped,
        "n_errors": sum(errors.values()),
        "errors_by_kind": dict(sorted(errors.items())),
        "n_evaluated": n,
        "n_violations": figures.n_violations,
        "violation_rate": figures.n_violations / n if n else None,
        "n_flips": figures.n_flips,
        "flip_rate": figures.n_flips / n if n else None,
        "mean_tv_distance": math.fsum(tv) / n if n else None,
        "max_tv_distance": _max(tv),
        "max_js_divergence": _max(figures.js),
        "max_abs_delta": _max(figures.delta),
        "max_abs_confidence_delta": _max(figures.confidence),
        "max_level_decrease": level_decrease,
        "n_reduced": figures.n_reduced,
    }


def summarize_columns(
    name: str,
    config: AnyProperty,
    comparisons: Comparisons | None,
    pairs: Sequence[dict[str, Any]],
    n_skipped: int,
    n_cases: int,
) -> dict[str, Any]:
    """``summarize`` for a run that has its pairs' comparisons as columns (``comparisons``:
    those of the pairs holding one, in pair order; None when none does)."""
    figures = column_figures(config, pair_counts(pairs), comparisons)
    return summary_of(name, config, figures, n_skipped, n_cases)


def column_figures(
    config: PropertyRules, counts: tuple[int, list[str], int], comparisons: Comparisons | None
) -> Figures:
    """:func:`compared_figures` from the comparisons of a property's pairs that hold one as
    columns (in pair order; None when none does), read as the same Python floats the stored
    comparisons hold, and the ``pair_counts`` of all its pairs."""
    n_transformed, error_kinds, n_reduced = counts
    figures = Figures(n_transformed, error_kinds, n_reduced)
    n = 0 if comparisons is None else len(comparisons)
    if comparisons is not None and n:
        mask = tolerance_mask(config, lambda column: getattr(comparisons, column), n)
        figures = Figures(
            n_transformed, error_kinds, n_reduced,
            n_violations=int(np.count_nonzero(mask)),
            n_flips=int(np.count_nonzero(comparisons.flipped)),
            tv=comparisons.tv_distance.tolist(),
            js=comparisons.js_divergence.tolist(),
            delta=comparisons.max_abs_delta.tolist(),
            confidence=[abs(value) for value in comparisons.confidence_delta.tolist()],
        )  # fmt: skip
    if getattr(config, "direction", None) is not None:
        levels: list[float | None] = [None] * n
        if comparisons is not None and comparisons.level_delta is not None:
            levels = comparisons.level_delta.tolist()
        figures = dataclasses.replace(figures, levels=levels)
    return figures


def summarize_all(
    names: Sequence[str],
    enabled: dict[str, AnyProperty],
    pairs: Sequence[Any],
    skipped: Sequence[Any],
    n_cases: int,
    *,
    get: Getter = itemgetter,
) -> list[dict[str, Any]]:
    """:func:`summarize` of each property of ``names`` over its pairs and skips (their
    fields read with ``get``)."""
    figures = figures_by_property(names, enabled, pairs, get=get)
    return summaries_of(names, enabled, figures, skipped, n_cases, get=get)


def figures_by_property(
    names: Sequence[str],
    enabled: dict[str, PropertyRules],
    pairs: Sequence[Any],
    *,
    get: Getter = itemgetter,
) -> dict[str, Figures]:
    """The :class:`Figures` of each property of ``names`` over its pairs among ``pairs``."""
    by_property: dict[str, list[Any]] = {name: [] for name in names}
    for name, pair in zip(map(get("property"), pairs), pairs, strict=True):
        if name in by_property:
            by_property[name].append(pair)
    return {name: figures_of(enabled[name], by_property[name], get=get) for name in names}


def summaries_of(
    names: Sequence[str],
    enabled: dict[str, AnyProperty],
    figures: dict[str, Figures],
    skipped: Sequence[Any],
    n_cases: int,
    *,
    get: Getter = itemgetter,
) -> list[dict[str, Any]]:
    """The summary of each property of ``names`` from its ``figures`` and skips."""
    skips = Counter(map(get("property"), skipped))
    return [summary_of(name, enabled[name], figures[name], skips[name], n_cases) for name in names]


def _limits(config: PropertyRules) -> str:
    limits = config.tolerances().items()
    return "per case: " + ", ".join(f"{key} {value:g}" for key, value in limits)


def property_checks(
    summaries: Sequence[dict[str, Any]], config: Properties
) -> list[dict[str, Any]]:
    """Checks for every property ``config`` enables, in property order. A property that was
    not run, or could not evaluate a single case, fails: it was not demonstrated."""
    by_name = {s["property"]: s for s in summaries}
    checks = []
    for name, prop in config.enabled().items():
        summary = by_name.get(name)
        missing = NOT_RUN if summary is None else NOTHING_TRANSFORMED
        error_rate = violation_rate = flip_rate = None
        if summary is not None:
            n = summary["n_transformed"]
            error_rate = summary["n_errors"] / n if n else None
            violation_rate, flip_rate = summary["violation_rate"], summary["flip_rate"]
        checks.append(
            make_check(
                f"{name}.max_error_rate", f"{name}.error_rate", "<=", 0.0, error_rate,
                level="requirement", missing=missing,
            )
        )  # fmt: skip
        if prop.tolerances():
            checks.append(
                make_check(
                    f"{name}.max_violation_rate", f"{name}.violation_rate", "<=",
                    prop.max_violation_rate, violation_rate,
                    level=prop.level, missing=missing, detail=_limits(prop),
                )
            )  # fmt: skip
        if prop.max_flip_rate is not None:
            checks.append(
                make_check(
                    f"{name}.max_flip_rate", f"{name}.flip_rate", "<=", prop.max_flip_rate,
                    flip_rate, level=prop.level, missing=missing,
                )
            )  # fmt: skip
    return checks
