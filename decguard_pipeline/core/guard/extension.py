"""The guard extension's metrics for one result set: run state, guard, calibration,
risk-coverage and the same again per metadata group.

Pure and columnar, shared by the CLI and the Dagster assets:
:func:`extension_metrics` builds the JSON-ready block, :func:`headline` flattens it to one
number per metric (summaries, tables) and :func:`metric_rows` to long-format rows (warehouse).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from decguard_pipeline.core.calibration import calibration_summary, metadata_groups
from decguard_pipeline.core.contract import Contract
from decguard_pipeline.core.contract.extension_gates import GuardGates
from decguard_pipeline.core.contract.guard_settings import (
    CalibrationSettings,
    GuardSettings,
    PartialRunSettings,
    RiskCoverageSettings,
    check_against_decision,
)
from decguard_pipeline.core.golden.metrics import gate_values, golden_metrics
from decguard_pipeline.core.guard.metrics import default_guarded_labels, guard_metrics
from decguard_pipeline.core.guard.partial_runs import run_summary
from decguard_pipeline.core.guard.risk_coverage import risk_coverage
from decguard_pipeline.core.guard.thresholds import threshold_section
from decguard_pipeline.core.results import CaseResults

GUARD_VALUES = ("auroc", "auprc", "precision", "recall", "f1", "fpr", "fnr")
# which way is better, for "worst label" and "worst suite"
HIGHER_IS_BETTER = frozenset(
    {"accuracy", "macro_f1", "auroc", "auprc", "precision", "recall", "f1", "coverage"}
)
LOWER_IS_BETTER = frozenset(
    {"ece", "brier", "nll", "error_rate", "drop_rate", "fpr", "fnr", "ece_equal_mass",
     "abs_confidence_gap", "aurc", "excess_aurc", "ordinal_mae"}
)  # fmt: skip


@dataclass(frozen=True)
class GuardConfig:
    """The extension's settings with every default resolved against the contract."""

    guard: GuardSettings
    guarded: tuple[str, ...]
    calibration: CalibrationSettings
    bins: int
    risk_coverage: RiskCoverageSettings
    partial_runs: PartialRunSettings
    requirements: GuardGates
    warnings: GuardGates
    suites: dict[str, str]
    # DecGuard's own settings, for the golden numbers of groups and suites
    calibration_bins: int
    confidence_threshold: float | None


def guard_enabled(contract: Contract) -> bool:
    """True when the contract uses any part of this extension (else DecGuard's behaviour)."""
    p = contract.pipeline
    if p is None:
        return False
    sections = (p.guard, p.suites, p.risk_coverage, p.partial_runs)
    calibration = p.calibration is not None and p.calibration.guard_keys
    return (
        calibration
        or any(s is not None for s in sections)
        or bool(p.requirements.owned(GuardGates) or p.warnings.owned(GuardGates))
    )


def guard_config(contract: Contract, *, source: str = "<contract>") -> GuardConfig:
    """Raises ``ContractError`` naming ``source`` (the contract file) and the field for
    settings that do not fit the decision."""
    p = contract.pipeline
    guard = (p.guard if p else None) or GuardSettings()
    calibration = (p.calibration if p else None) or CalibrationSettings()
    spec = contract.spec()
    check_against_decision(source, guard, spec.labels)
    return GuardConfig(
        guard=guard,
        guarded=guard.labels or default_guarded_labels(spec.type, spec.labels),
        calibration=calibration,
        bins=calibration.bins or contract.evaluation.calibration_bins,
        risk_coverage=(p.risk_coverage if p else None) or RiskCoverageSettings(),
        partial_runs=(p.partial_runs if p else None) or PartialRunSettings(),
        # the guard's own gates (pipeline.requirements holds other features' too)
        requirements=GuardGates(**p.requirements.owned(GuardGates)) if p else GuardGates(),
        warnings=GuardGates(**p.warnings.owned(GuardGates)) if p else GuardGates(),
        suites=dict((p.suites if p else None) or {}),
        calibration_bins=contract.evaluation.calibration_bins,
        confidence_threshold=contract.evaluation.confidence_threshold,
    )


def _block(
    results: CaseResults,
    config: GuardConfig,
    *,
    with_splits: bool,
    golden: dict[str, Any] | None = None,
) -> dict[str, Any]:
    labeled = results.ok & (results.expected_index >= 0)
    confidence = results.confidence[labeled]
    correct = results.selected[labeled] == results.expected_index[labeled]
    rc = config.risk_coverage
    if golden is None:
        golden = golden_metrics(
            results,
            calibration_bins=config.calibration_bins,
            confidence_threshold=config.confidence_threshold,
        )
    block: dict[str, Any] = {
        "run": run_summary(
            results,
            warn_from=config.partial_runs.warn_from,
            partial_above=config.partial_runs.partial_above,
        ),
        "golden": gate_values(golden),
        "guard": guard_metrics(results, guarded=config.guarded, threshold=config.guard.threshold),
        "thresholds": threshold_section(
            results,
            config.guarded,
            config.guard.threshold_grid,
            target_recall=config.guard.target_recall,
            target_fpr=config.guard.target_fpr,
        ),
        "calibration": calibration_summary(
            confidence,
            correct,
            n_bins=config.bins,
            gap_tolerance=config.calibration.gap_tolerance,
        ),
        "risk_coverage": risk_coverage(
            confidence,
            correct,
            rc.thresholds,
            escalation_cost=rc.escalation_cost,
            error_cost=rc.error_cost,
        ),
    }
    if with_splits:
        block["splits"] = {
            key: _groups(results, config, key) for key in config.calibration.split_by
        }
    return block


def _groups(results: CaseResults, config: GuardConfig, key: str) -> list[dict[str, Any]]:
    """The block (without splits) of every value of metadata ``key``, errored cases included."""
    return [
        {
            "value": value,
            "n_cases": len(rows),
            **_block(results.take(rows), config, with_splits=False),
        }
        for value, rows in metadata_groups(results.metadata, key)
    ]


def extension_metrics(
    results: CaseResults,
    contract: Contract | GuardConfig,
    *,
    golden: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The extension block of one evaluation: ``run``, ``golden`` (DecGuard's gate values,
    repeated so groups and suites can be compared), ``guard``, ``thresholds`` (the threshold
    table per guarded label), ``calibration``, ``risk_coverage`` and ``splits`` (the same,
    per value of each ``split_by`` key).

    ``golden``: DecGuard's metrics of ``results`` under the contract's evaluation settings
    when they are already computed (a report's ``metrics``); else they are computed here.
    Groups always compute their own."""
    config = contract if isinstance(contract, GuardConfig) else guard_config(contract)
    return _block(results, config, with_splits=True, golden=golden)


def worst_label(block: dict[str, Any], metric: str) -> tuple[float | None, str | None, str]:
    """``(value, label, reason)``: the worst guarded label's value; None (with the first
    label's reason) when any guarded label leaves it undefined."""
    labels = block["guard"]["labels"]
    worst: tuple[float, str] | None = None
    for label, m in labels.items():
        value = m[metric]
        if value is None:
            return None, label, f"label {label}: {m['undefined'][metric]}"
        if worst is None or (value < worst[0] if metric in HIGHER_IS_BETTER else value > worst[0]):
            worst = (value, label)
    if worst is None:
        return None, None, "no guarded labels"
    return worst[0], worst[1], ""


def headline(block: dict[str, Any]) -> dict[str, float | None]:
    """One number per metric: DecGuard's, the run's, the worst guarded label's, calibration
    and risk-coverage."""
    golden, cal, rc = block["golden"], block["calibration"], block["risk_coverage"]
    gap = cal["confidence_gap"]
    return {
        "accuracy": golden["accuracy"],
        "macro_f1": golden["macro_f1"],
        "ece": golden["ece"],
        "brier": golden["brier"],
        "nll": golden["nll"],
        "error_rate": golden["error_rate"],
        "drop_rate": block["run"]["drop_rate"],
        **{metric: worst_label(block, metric)[0] for metric in GUARD_VALUES},
        "mean_confidence": cal["mean_confidence"],
        "confidence_gap": gap,
        "abs_confidence_gap": None if gap is None else abs(gap),
        "ece_equal_mass": cal["ece_equal_mass"],
        "aurc": rc["aurc"],
        "excess_aurc": rc["excess_aurc"],
    }


def metric_rows(block: dict[str, Any], *, suite: str | None = None) -> list[dict[str, Any]]:
    """Long-format rows ``{suite, split_key, split_value, label, metric, value}``: the
    headline numbers, every guard metric per label, for the whole set and for each group
    (warehouse tables, one row per number)."""
    rows: list[dict[str, Any]] = []

    def add(part: dict[str, Any], key: str | None, value: str | None) -> None:
        base = {"suite": suite, "split_key": key, "split_value": value}
        for metric, number in headline(part).items():
            rows.append({**base, "label": None, "metric": metric, "value": number})
        for label, m in part["guard"]["labels"].items():
            for metric in ("tp", "fp", "tn", "fn", "accuracy", *GUARD_VALUES):
                rows.append({**base, "label": label, "metric": metric, "value": m[metric]})

    add(block, None, None)
    for key, groups in block.get("splits", {}).items():
        for group in groups:
            add(group, key, group["value"])
    return rows
