"""The regression diff document (``diff_version`` 0.1, spec §8) from two verified reports.

Settings: the contract's ``regression`` (defaults without a contract), its ``evaluation``
(else the candidate report's), segment keys from ``segment_by`` or ``regression.segment_by``.
Metrics are recomputed with the golden code on each run's matched cases.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from decguard_pipeline.core.calibration.extension import measures_settings
from decguard_pipeline.core.contract import Evaluation, LoadedContract, Regression, load_contract
from decguard_pipeline.core.diff.gates import gate_values, regression_checks
from decguard_pipeline.core.diff.model import Diff
from decguard_pipeline.core.diff.pairs import (
    changes_section,
    compare,
    counts_section,
    match_by_id,
    shift_section,
)
from decguard_pipeline.core.diff.segments import group_rows, segments_section
from decguard_pipeline.core.diff.segments import worst_segment as find_worst
from decguard_pipeline.core.errors import ReportError
from decguard_pipeline.core.gates import EXIT_CODES, overall_status
from decguard_pipeline.core.golden.metrics import gate_values as golden_values
from decguard_pipeline.core.product import PRODUCER_VERSION
from decguard_pipeline.core.report.golden import Report, metrics_for, now_iso
from decguard_pipeline.core.report.load_both import ChildLoad, load_both
from decguard_pipeline.core.report.reevaluate import ensure_same_decision
from decguard_pipeline.core.results import CaseResults

DIFF_VERSION = "0.1"
METRICS = (
    "accuracy", "macro_f1", "ordinal_mae", "ece", "brier", "nll", "coverage", "error_rate",
    "latency_p50_ms", "latency_p95_ms",
)  # fmt: skip


def _run_info(doc: dict[str, Any], path: str) -> dict[str, Any]:
    return {
        "path": path,
        "created_at": doc["created_at"],
        "mode": doc["mode"],
        "contract_hash": doc["contract"]["hash"],
        "dataset": doc["dataset"],
        "backend": doc["backend"],
    }


def _decision(doc: dict[str, Any]) -> tuple[str, str, list[str]]:
    c = doc["contract"]
    return c["name"], c["type"], list(c["labels"])


def ensure_comparable(baseline: dict[str, Any], candidate: dict[str, Any]) -> None:
    if _decision(baseline) != _decision(candidate):
        b, c = _decision(baseline), _decision(candidate)
        raise ReportError(f"cannot compare {b[0]!r} ({b[2]}) with {c[0]!r} ({c[2]})")


def _metric_values(metrics: dict[str, Any]) -> dict[str, float | None]:
    flat = golden_values(metrics)
    flat["latency_p50_ms"] = metrics["latency"]["p50_ms"]
    return {name: flat[name] for name in METRICS}


def _metrics(run: Report, rows: CaseResults, evaluation: Evaluation) -> dict[str, Any]:
    """``metrics_for(rows, evaluation)``: the run's stored metrics when ``rows`` are all of
    its results and the settings metrics depend on are its own (loading recomputed them and
    found them equal, bit for bit)."""
    stored = run.document["evaluation"]
    if rows is run.results and (
        evaluation.calibration_bins == stored["calibration_bins"]
        and evaluation.confidence_threshold == stored["confidence_threshold"]
    ):
        return run.document["metrics"]
    return metrics_for(rows, evaluation)


def _delta(base: float | None, cand: float | None) -> float | None:
    return None if base is None or cand is None else cand - base


def diff_reports(
    baseline: Report,
    candidate: Report,
    *,
    contract: LoadedContract | None = None,
    segment_by: Sequence[str] | None = None,
    baseline_path: str = "baseline",
    candidate_path: str = "candidate",
    created_at: str | None = None,
) -> Diff:
    """Compare two verified reports of the same decision; pure apart from the timestamp.

    With a contract whose ``pipeline.statistics`` is set, statistics are computed too
    (``Diff.statistics``) and its gate modes decide the checks; with its calibration measures
    on, both runs' CORP decompositions (``Diff.calibration``)."""
    b_doc, c_doc = baseline.document, candidate.document
    ensure_comparable(b_doc, c_doc)
    if contract is not None:
        ensure_same_decision(c_doc, contract)
        regression = contract.contract.regression
        evaluation = contract.contract.evaluation
    else:
        regression = Regression()
        evaluation = Evaluation.model_validate(c_doc["evaluation"])
    keys = tuple(segment_by) if segment_by else regression.segment_by

    pairs = match_by_id(baseline.results, candidate.results)
    comparison = compare(pairs)
    shift = shift_section(comparison)
    base_values = _metric_values(_metrics(baseline, pairs.base, evaluation))
    cand_values = _metric_values(_metrics(candidate, pairs.cand, evaluation))
    metrics = {
        name: {
            "baseline": base_values[name],
            "candidate": cand_values[name],
            "delta": _delta(base_values[name], cand_values[name]),
        }
        for name in METRICS
    }
    groups = group_rows(pairs.cand.metadata, keys)
    segments = segments_section(pairs, comparison, groups, regression.min_segment_size)
    worst = find_worst(segments)
    values = gate_values(metrics, shift, worst)

    diff = Diff(
        document={},
        pairs=pairs,
        comparison=comparison,
        groups=groups,
        evaluation=evaluation,
        regression=regression,
        values=values,
        worst_segment=worst,
    )
    settings = None
    if contract is not None and contract.contract.pipeline is not None:
        settings = contract.contract.pipeline.statistics
    if settings is not None:
        # imported here: a plain DecGuard diff never loads the statistics machinery
        from decguard_pipeline.core.diff.sidecar import diff_statistics

        stats = diff_statistics(diff, settings, metrics=metrics, shift=shift, segments=segments)
        diff.statistics = stats.document
        checks = stats.checks
    else:
        checks = regression_checks(regression, values, worst)
    measures = None if contract is None else measures_settings(contract.contract)
    if measures is not None:  # less honest, or less able to tell cases apart?
        from decguard_pipeline.core.diff.calibration import calibration_shift

        diff.calibration = calibration_shift(pairs.base, pairs.cand, measures)
    status = overall_status(checks)
    diff.document = {
        "diff_version": DIFF_VERSION,
        "decguard_version": PRODUCER_VERSION,
        "created_at": created_at or now_iso(),
        "status": status,
        "exit_code": EXIT_CODES[status],
        "contract": c_doc["contract"],
        "baseline": _run_info(b_doc, baseline_path),
        "candidate": _run_info(c_doc, candidate_path),
        "same_dataset": b_doc["dataset"]["hash"] == c_doc["dataset"]["hash"],
        "evaluation": evaluation.model_dump(),
        "counts": counts_section(pairs, comparison),
        "shift": shift,
        "metrics": metrics,
        "segments": segments,
        "checks": checks,
        "changes": changes_section(pairs, comparison),
    }
    return diff


def load_and_diff(
    baseline: str | Path,
    candidate: str | Path,
    *,
    contract: str | Path | None = None,
    segment_by: Sequence[str] | None = None,
    baseline_load: ChildLoad | None = None,
) -> Diff:
    """Load and verify both reports (side by side: core/report/load_both.py; a problem of
    the baseline's comes first), then the contract, and compare. ``baseline_load``: the
    baseline's load, when the caller started it already."""
    base_report, cand_report = load_both(baseline, candidate, first_load=baseline_load)
    loaded = load_contract(contract) if contract is not None else None
    return diff_reports(
        base_report,
        cand_report,
        contract=loaded,
        segment_by=segment_by,
        baseline_path=str(baseline),
        candidate_path=str(candidate),
    )
