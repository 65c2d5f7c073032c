"""The reliability and risk-coverage curves of any evaluation, guard extension or not.

``golden_metrics`` draws them for every contract (the guard extension adds gates, suites and
splits on top). The equal-width bins are DecGuard's (``evaluation.calibration_bins``), so the
equal-width ECE is the report's ECE; the equal-mass bins use the same count. The gap tolerance
and the risk-coverage sweep and costs are the contract's ``pipeline.calibration`` and
``pipeline.risk_coverage`` settings when it has them, else their defaults.

Both take the top-label ``confidence`` and ``correct`` columns of the labeled, decided cases.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from decguard_pipeline.core.calibration import calibration_summary
from decguard_pipeline.core.contract import Contract
from decguard_pipeline.core.contract.guard_settings import (
    CalibrationSettings,
    RiskCoverageSettings,
)
from decguard_pipeline.core.guard.risk_coverage import risk_coverage
from decguard_pipeline.core.results import CaseResults


def top_label(results: CaseResults) -> tuple[np.ndarray, np.ndarray]:
    """``(confidence, correct)`` of the labeled cases that got a decision."""
    labeled = results.ok & (results.expected_index >= 0)
    correct = results.selected[labeled] == results.expected_index[labeled]
    return results.confidence[labeled], correct


def calibration_of(results: CaseResults, contract: Contract) -> dict[str, Any]:
    """Gap, equal-width and equal-mass ECE and both reliability tables
    (``core.calibration.calibration_summary``) with DecGuard's bin count."""
    pipeline = contract.pipeline
    settings = (pipeline.calibration if pipeline else None) or CalibrationSettings()
    confidence, correct = top_label(results)
    return calibration_summary(
        confidence,
        correct,
        n_bins=contract.evaluation.calibration_bins,
        gap_tolerance=settings.gap_tolerance,
    )


def risk_coverage_of(results: CaseResults, contract: Contract) -> dict[str, Any]:
    """AURC and the threshold sweep (``core.guard.risk_coverage``)."""
    pipeline = contract.pipeline
    settings = (pipeline.risk_coverage if pipeline else None) or RiskCoverageSettings()
    confidence, correct = top_label(results)
    return risk_coverage(
        confidence,
        correct,
        settings.thresholds,
        escalation_cost=settings.escalation_cost,
        error_cost=settings.error_cost,
    )


def evaluation_curves(results: CaseResults, contract: Contract) -> dict[str, Any]:
    """``{"calibration": ..., "risk_coverage": ...}``: the two sections the pictures of
    ``core.report.plots`` are drawn from."""
    return {
        "calibration": calibration_of(results, contract),
        "risk_coverage": risk_coverage_of(results, contract),
    }
