"""Confidence intervals for a golden run's metrics (contract extension ``pipeline.statistics``):
Wilson intervals for accuracy, coverage and selective accuracy, seeded percentile bootstrap for
macro-F1, ECE, Brier and NLL (docs/statistics.md). DecGuard's report is unchanged; the section
goes to the sidecar, the warehouse and a text block after DecGuard's layout."""

from __future__ import annotations

from typing import Any

from decguard_pipeline.core.contract import Contract
from decguard_pipeline.core.contract.statistics import StatisticsSettings
from decguard_pipeline.core.formatting import num
from decguard_pipeline.core.results import CaseResults
from decguard_pipeline.core.stats import golden_intervals


def statistics_settings(contract: Contract) -> StatisticsSettings | None:
    pipeline = contract.pipeline
    return None if pipeline is None else pipeline.statistics


def golden_statistics(
    results: CaseResults, metrics: dict[str, Any], settings: StatisticsSettings
) -> dict[str, Any]:
    """The sidecar section ``statistics`` of a test report."""
    return {
        "confidence": settings.confidence,
        "bootstrap_resamples": settings.bootstrap_resamples,
        "seed": settings.seed,
        "intervals": golden_intervals(
            results,
            metrics,
            confidence=settings.confidence,
            n_resamples=settings.bootstrap_resamples,
            seed=settings.seed,
        ),
    }


def render_golden_statistics(section: dict[str, Any]) -> str:
    """``Intervals`` block: each metric, its interval and how it was computed."""
    level = f"{section['confidence']:.0%}"
    lines = [
        f"  Intervals    {level} · Wilson (rates) · bootstrap {section['bootstrap_resamples']}"
        f" resamples, seed {section['seed']}"
    ]
    for name, entry in section["intervals"].items():
        if entry["value"] is None:
            lines.append(f"    {name:<20} n/a")
            continue
        lines.append(
            f"    {name:<20} {num(entry['value'])}  [{num(entry['low'])}, {num(entry['high'])}]"
            f"  {entry['method']}"
        )
    return "\n".join(lines)
