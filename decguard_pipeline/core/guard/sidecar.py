"""The guard extension's sidecar document, ``<report stem>.pipeline.json``.

DecGuard's report file stays DecGuard's (the reference verifies it); everything this extension
adds lives here, as a plain JSON-ready dict: the resolved settings, one entry per evaluated
dataset (the main one first, then the other suites) and the suite summary. Its ``status`` is
the worst over every evaluation, DecGuard's gates included, which is what the command exits
with.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from decguard_pipeline.core.contract import LoadedContract
from decguard_pipeline.core.gates import EXIT_CODES, Check, overall_status
from decguard_pipeline.core.guard.extension import GuardConfig
from decguard_pipeline.core.product import PRODUCER_VERSION
from decguard_pipeline.core.report.sidecar import SIDECAR_VERSION


def worst_status(*statuses: str) -> str:
    return overall_status([{"status": s} for s in statuses])


def evaluation_entry(
    suite: str | None, report: dict[str, Any], block: dict[str, Any], checks: list[Check]
) -> dict[str, Any]:
    """One evaluated dataset: DecGuard's verdict on it, the extension block and checks."""
    status = worst_status(report["status"], overall_status(checks))
    return {
        "suite": suite,
        "dataset": report["dataset"],
        "status": status,
        "decguard": {"status": report["status"], "checks": report["checks"]},
        "checks": checks,
        "metrics": block,
        "images": {},
    }


def settings_document(config: GuardConfig) -> dict[str, Any]:
    """The settings as applied (defaults resolved), for reproducing the numbers."""
    return {
        "guard": {
            "threshold": config.guard.threshold,
            "labels": list(config.guarded),
            "threshold_grid": list(config.guard.threshold_grid),
            "target_recall": config.guard.target_recall,
            "target_fpr": config.guard.target_fpr,
        },
        "calibration": {
            "bins": config.bins,
            "gap_tolerance": config.calibration.gap_tolerance,
            "split_by": list(config.calibration.split_by),
        },
        "risk_coverage": config.risk_coverage.model_dump(mode="json"),
        "partial_runs": config.partial_runs.model_dump(mode="json"),
        "requirements": config.requirements.configured(),
        "warnings": config.warnings.configured(),
        "suites": config.suites,
    }


def build_sidecar(
    loaded: LoadedContract,
    config: GuardConfig,
    evaluations: list[dict[str, Any]],
    summary: dict[str, Any] | None,
    *,
    created_at: str,
    report_path: str | Path | None = None,
) -> dict[str, Any]:
    status = worst_status(*(e["status"] for e in evaluations))
    spec = loaded.contract.spec()
    return {
        "sidecar_version": SIDECAR_VERSION,
        "decguard_version": PRODUCER_VERSION,
        "created_at": created_at,
        "report": None if report_path is None else str(report_path),
        "contract": {
            "name": spec.name,
            "type": spec.type,
            "labels": list(spec.labels),
            "hash": loaded.hash,
            "path": str(loaded.path),
        },
        "status": status,
        "exit_code": EXIT_CODES[status],
        "settings": settings_document(config),
        "evaluations": evaluations,
        "summary": summary,
    }
