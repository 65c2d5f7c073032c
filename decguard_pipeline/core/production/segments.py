"""Segments (spec §11.4): the records grouped by each configured metadata key, each group
with its own metrics and segment gates.

Groups are ordered as DecGuard orders them, by the value's type name and then its repr (so
``False`` < ``1.5`` < ``2`` < ``'en'`` < ``None``: bool, float, int, NoneType, str); an absent
key and an explicit null form one group shown as ``<missing>``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from decguard_pipeline.core.contract import Evaluation, Production
from decguard_pipeline.core.errors import DatasetError
from decguard_pipeline.core.gates import overall_status
from decguard_pipeline.core.production.checks import section_checks
from decguard_pipeline.core.production.columns import Columns, identity
from decguard_pipeline.core.production.drift import compute_drift
from decguard_pipeline.core.production.metrics import grouped_metrics, partition_metrics


def shown(value: Any) -> str:
    return "<missing>" if value is None else str(value)


def partition(columns: Columns, key: str) -> tuple[list[Any], np.ndarray]:
    """The distinct values of ``metadata[key]`` in DecGuard's order, and each record's index
    into that list."""
    book = columns.segment_values[key]
    if book.invalid is not None:
        _, record_id, problem = book.invalid
        raise DatasetError(f"record {record_id!r}: metadata.{key} {problem}")
    codes = columns.segments[key]
    present = np.flatnonzero(np.bincount(codes, minlength=len(book.values))).tolist()
    ordered = sorted(present, key=lambda code: identity(book.values[code]))
    lookup = np.zeros(max(len(book.values), 1), dtype=np.int32)
    lookup[ordered] = np.arange(len(ordered))
    return [book.values[code] for code in ordered], lookup[codes]


def _segment_reports(
    key: str, values: list[Any], every: list[dict[str, Any]], config: Production
) -> list[dict[str, Any]]:
    no_drift = compute_drift({}, None)
    out = []
    for value, metrics in zip(values, every, strict=True):
        prefix = f"segment[{key}={shown(value)}]."
        checks = section_checks(
            config.segment_requirements, metrics, no_drift, level="requirement", prefix=prefix
        ) + section_checks(
            config.segment_warnings, metrics, no_drift, level="warning", prefix=prefix
        )  # fmt: skip
        out.append(
            {
                "key": key,
                "value": value,
                "metrics": metrics,
                "checks": checks,
                "status": overall_status(checks),
            }
        )
    return out


def build_segments(
    columns: Columns, config: Production, evaluation: Evaluation
) -> list[dict[str, Any]]:
    """The report's ``segments``: per key in contract order, per value in DecGuard's order."""
    out = []
    for key in config.segments:
        values, groups = partition(columns, key)
        every = grouped_metrics(columns, evaluation, groups, len(values))
        out += _segment_reports(key, values, every, config)
    return out


def measure(
    columns: Columns,
    config: Production,
    evaluation: Evaluation,
    extra: list[tuple[np.ndarray, int]] = (),  # type: ignore[assignment]
) -> tuple[dict[str, Any], Callable[[], list[dict[str, Any]]], list[list[dict[str, Any]]]]:
    """The metrics of all records, the segments (built when called, so that a bad segment
    value is reported where DecGuard reports it) and the metrics of ``extra`` partitions,
    all measured in one pass over the columns when the segment values are usable."""
    if any(columns.segment_values[key].invalid is not None for key in config.segments):
        metrics = grouped_metrics(columns, evaluation)[0]
        extras = [grouped_metrics(columns, evaluation, g, n) for g, n in extra]
        return metrics, lambda: build_segments(columns, config, evaluation), extras
    keyed = [(key, *partition(columns, key)) for key in config.segments]
    partitions = [(None, 1), *((g, len(v)) for _, v, g in keyed), *extra]
    results = partition_metrics(columns, evaluation, partitions)
    segments = []
    for (key, values, _), every in zip(keyed, results[1 : 1 + len(keyed)], strict=True):
        segments += _segment_reports(key, values, every, config)
    return results[0][0], lambda: segments, results[1 + len(keyed) :]
