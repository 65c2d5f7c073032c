"""Segments (spec §11.4): the records grouped by each configured metadata key, each group
with its own metrics and segment gates.

Groups are ordered as DecGuard orders them, by the value's type name and then its repr (so
``False`` < ``1.5`` < ``2`` < ``'en'`` < ``None``: bool, float, int, NoneType, str); an absent
key and an explicit null form one group shown as ``<missing>``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from decguard_pipeline.core.contract import Evaluation, Production
from decguard_pipeline.core.errors import DatasetError
from decguard_pipeline.core.gates import overall_status
from decguard_pipeline.core.production.checks import section_checks
from decguard_pipeline.core.production.columns import Columns, identity
from decguard_pipeline.core.production.drift import compute_drift
from decguard_pipeline.core.production.metrics import production_metrics


def shown(value: Any) -> str:
    return "<missing>" if value is None else str(value)


def groups(columns: Columns, key: str) -> list[tuple[Any, np.ndarray]]:
    """(value, rows in dataset order) per distinct value of ``metadata[key]``, in order."""
    book = columns.segment_values[key]
    if book.invalid is not None:
        _, record_id, problem = book.invalid
        raise DatasetError(f"record {record_id!r}: metadata.{key} {problem}")
    codes = columns.segments[key]
    order = np.argsort(codes, kind="stable")
    present, starts = np.unique(codes[order], return_index=True)
    bounds = np.append(starts, len(order))
    found = [
        (book.values[int(code)], order[bounds[i] : bounds[i + 1]])
        for i, code in enumerate(present.tolist())
    ]
    found.sort(key=lambda group: identity(group[0]))
    return found


def build_segments(
    columns: Columns, config: Production, evaluation: Evaluation
) -> list[dict[str, Any]]:
    """The report's ``segments``: per key in contract order, per value in DecGuard's order."""
    no_drift = compute_drift({}, None)
    out = []
    for key in config.segments:
        for value, rows in groups(columns, key):
            metrics = production_metrics(columns, evaluation, rows)
            prefix = f"segment[{key}={shown(value)}]."
            checks = section_checks(
                config.segment_requirements, metrics, no_drift, level="requirement",
                prefix=prefix,
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
