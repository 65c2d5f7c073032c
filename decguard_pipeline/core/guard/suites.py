"""Suites: several named golden datasets per contract (say ``clear`` and ``adversarial``),
each with its own metrics, and a summary across them.

The summary gives, per headline metric, the value on all suites' cases pooled (metrics of the
union, so calibration is judged on everything at once), the unweighted mean over suites (each
suite counts the same however large) and the worst suite, because a guard that is excellent
on clear cases and poor on adversarial ones is not half good.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from decguard_pipeline.core.exact import fsum
from decguard_pipeline.core.gates import overall_status
from decguard_pipeline.core.guard.extension import (
    HIGHER_IS_BETTER,
    LOWER_IS_BETTER,
    GuardConfig,
    extension_metrics,
    headline,
)
from decguard_pipeline.core.results import CaseResults


def concat_results(parts: list[CaseResults]) -> CaseResults:
    """The rows of every part, in order, as one result set (same decision in all parts)."""
    if not parts:
        raise ValueError("no result sets to join")
    first = parts[0]

    def joined(name: str) -> list[Any]:
        return [v for part in parts for v in getattr(part, name)]

    return CaseResults(
        spec=first.spec,
        backend=first.backend,
        provider=first.provider,
        case_ids=joined("case_ids"),
        inputs=joined("inputs"),
        expected=joined("expected"),
        metadata=joined("metadata"),
        probs=np.concatenate([p.probs for p in parts]),
        selected=np.concatenate([p.selected for p in parts]),
        confidence=np.concatenate([p.confidence for p in parts]),
        latency_ms=np.concatenate([p.latency_ms for p in parts]),
        model=joined("model"),
        model_version=joined("model_version"),
        result_metadata=joined("result_metadata"),
        error_kind=joined("error_kind"),
        error_message=joined("error_message"),
        result_ids=None,
    )


def _worse(metric: str, a: float, b: float) -> bool:
    """Whether ``a`` is worse than ``b``."""
    return a > b if metric in LOWER_IS_BETTER else a < b


def suite_summary(
    suites: list[tuple[str, CaseResults, dict[str, Any], str]], config: GuardConfig
) -> dict[str, Any]:
    """Summary of ``(name, results, extension block, status)`` per suite."""
    pooled = extension_metrics(concat_results([r for _, r, _, _ in suites]), config)
    per_suite = {name: headline(block) for name, _, block, _ in suites}
    metrics = list(headline(pooled))
    mean: dict[str, float | None] = {}
    worst: dict[str, dict[str, Any] | None] = {}
    for metric in metrics:
        defined = [(name, v[metric]) for name, v in per_suite.items() if v[metric] is not None]
        mean[metric] = fsum([v for _, v in defined]) / len(defined) if defined else None
        if metric in HIGHER_IS_BETTER | LOWER_IS_BETTER and defined:
            name, value = defined[0]
            for other, v in defined[1:]:
                if _worse(metric, v, value):
                    name, value = other, v
            worst[metric] = {"suite": name, "value": value}
    run = pooled["run"]
    return {
        "suites": [name for name, _, _, _ in suites],
        "cases": run["total"],
        "errored": run["errored"],
        "status": overall_status([{"status": status} for _, _, _, status in suites]),
        "pooled": headline(pooled),
        "mean": mean,
        "worst": worst,
    }
