"""Per-property summaries and the checks derived from them (DecGuard §9.6, §9.7)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from operator import itemgetter
from typing import Any

import numpy as np

from decguard_pipeline.core.contract.properties import AnyProperty, Properties
from decguard_pipeline.core.gates import make_check
from decguard_pipeline.core.properties.compare import (
    Comparisons,
    Getter,
    limited_columns,
    tolerance_mask,
    tolerance_violations,
)

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
    config: AnyProperty, compared: Sequence[Any], *, get: Getter = itemgetter
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
    compared = [c for c in map(get("comparison"), pairs) if c is not None]
    counts = pair_counts(pairs, get=get)
    return summarize_compared(name, config, compared, counts, n_skipped, n_cases, get=get)


def pair_counts(pairs: Sequence[Any], *, get: Getter = itemgetter) -> tuple[int, list[str], int]:
    """What a summary counts of a property's pairs: how many, their errors' kinds, and how
    many have a reduced example."""
    kind = get("kind")
    kinds = [kind(e) for e in map(get("error"), pairs) if e is not None]
    return len(pairs), kinds, sum(1 for r in map(get("reduced"), pairs) if r is not None)


def summarize_compared(
    name: str,
    config: AnyProperty,
    compared: Sequence[Any],
    counts: tuple[int, list[str], int],
    n_skipped: int,
    n_cases: int,
    *,
    get: Getter = itemgetter,
) -> dict[str, Any]:
    """``summarize`` from the stored comparisons of the property's pairs that hold one
    (``compared``, in pair order, their fields read with ``get``) and the ``pair_counts``
    of all its pairs."""
    level_decrease = None
    direction = getattr(config, "direction", None)
    if direction is not None:
        sign = 1.0 if direction == "increasing" else -1.0
        levels = map(get("level_delta"), compared)
        level_decrease = _max([max(0.0, -sign * (level or 0.0)) for level in levels])
    return _summary(
        name, config, counts, n_skipped, n_cases,
        n_violations=count_violations(config, compared, get=get),
        n_flips=sum(map(bool, map(get("flipped"), compared))),
        tv=list(map(get("tv_distance"), compared)),
        js=list(map(get("js_divergence"), compared)),
        delta=list(map(get("max_abs_delta"), compared)),
        confidence=list(map(abs, map(get("confidence_delta"), compared))),
        level_decrease=level_decrease,
    )  # fmt: skip


def summarize_columns(
    name: str,
    config: AnyProperty,
    comparisons: Comparisons | None,
    pairs: Sequence[dict[str, Any]],
    n_skipped: int,
    n_cases: int,
) -> dict[str, Any]:
    """``summarize`` for a run that has its pairs' comparisons as columns (``comparisons``:
    those of the pairs holding one, in pair order; None when none does): the figures come
    from the columns, read as the same Python floats the stored comparisons hold."""
    n = 0 if comparisons is None else len(comparisons)
    n_violations = n_flips = 0
    tv: list[float] = []
    js: list[float] = []
    delta: list[float] = []
    confidence: list[float] = []
    level_decrease = None
    if comparisons is not None and n:
        mask = tolerance_mask(config, lambda column: getattr(comparisons, column), n)
        n_violations = int(np.count_nonzero(mask))
        n_flips = int(np.count_nonzero(comparisons.flipped))
        tv = comparisons.tv_distance.tolist()
        js = comparisons.js_divergence.tolist()
        delta = comparisons.max_abs_delta.tolist()
        confidence = [abs(value) for value in comparisons.confidence_delta.tolist()]
    direction = getattr(config, "direction", None)
    if direction is not None:
        sign = 1.0 if direction == "increasing" else -1.0
        levels: list[float | None] = [None] * n
        if comparisons is not None and comparisons.level_delta is not None:
            levels = comparisons.level_delta.tolist()
        level_decrease = _max([max(0.0, -sign * (value or 0.0)) for value in levels])
    return _summary(
        name, config, pair_counts(pairs), n_skipped, n_cases,
        n_violations=n_violations, n_flips=n_flips, tv=tv, js=js, delta=delta,
        confidence=confidence, level_decrease=level_decrease,
    )  # fmt: skip


def _summary(
    name: str,
    config: AnyProperty,
    counts: tuple[int, list[str], int],
    n_skipped: int,
    n_cases: int,
    *,
    n_violations: int,
    n_flips: int,
    tv: list[float],
    js: list[float],
    delta: list[float],
    confidence: list[float],
    level_decrease: float | None,
) -> dict[str, Any]:
    """DecGuard's summary fields from the figures of the compared pairs (``tv``, ``js``,
    ``delta``, ``confidence``: per compared pair, the TV distance, JS divergence, largest
    probability change and absolute confidence change); ``counts``: see ``pair_counts``."""
    n_transformed, error_kinds, n_reduced = counts
    errors = Counter(error_kinds)
    n = len(tv)
    return {
        "property": name,
        "level": config.level,
        "relation": config.relation,
        "n_cases": n_cases,
        "n_transformed": n_transformed,
        "n_skipped": n_skipped,
        "n_errors": sum(errors.values()),
        "errors_by_kind": dict(sorted(errors.items())),
        "n_evaluated": n,
        "n_violations": n_violations,
        "violation_rate": n_violations / n if n else None,
        "n_flips": n_flips,
        "flip_rate": n_flips / n if n else None,
        "mean_tv_distance": math.fsum(tv) / n if n else None,
        "max_tv_distance": _max(tv),
        "max_js_divergence": _max(js),
        "max_abs_delta": _max(delta),
        "max_abs_confidence_delta": _max(confidence),
        "max_level_decrease": level_decrease,
        "n_reduced": n_reduced,
    }


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
    by_property: dict[str, list[Any]] = {name: [] for name in names}
    for name, pair in zip(map(get("property"), pairs), pairs, strict=True):
        if name in by_property:
            by_property[name].append(pair)
    skips = Counter(map(get("property"), skipped))
    return [
        summarize(name, enabled[name], by_property[name], skips[name], n_cases, get=get)
        for name in names
    ]


def _limits(config: AnyProperty) -> str:
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
