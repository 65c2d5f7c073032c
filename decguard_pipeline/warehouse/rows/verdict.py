"""The ``verdicts`` row of one evaluation (columns: ``warehouse/schema/verdict.py``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from decguard_pipeline.core.verdict import KINDS, Verdict
from decguard_pipeline.warehouse.schema.verdict import NUMBERS


def verdict_row(
    keys: Mapping[str, Any],
    run: Mapping[str, Any],
    verdict: Verdict,
    numbers: Mapping[str, float | None],
    *,
    regression: Mapping[str, Any] | None,
    report_path: str | None,
    report_html: str | None,
    diff_html: str | None = None,
) -> dict[str, Any]:
    """``run`` is the evaluation's ``runs`` row; ``regression`` its ``diffs`` row (None when
    the contract has no diff or it did not run)."""
    row: dict[str, Any] = {
        **keys,
        "backend": run["backend"],
        "model_version": run["model_version"],
        "evaluation_run_id": run["run_id"],
        "evaluated_at": run["recorded_at"],
        "status": verdict.status,
        "headline": verdict.headline(),
        "approved": verdict.approved,
        "failing": list(verdict.failing),
        "warned": list(verdict.warned),
        "gates": [gate.as_row() for gate in verdict.gates],
        **{f"{kind}_status": verdict.statuses.get(kind) for kind in KINDS},
        "baseline_target": None if regression is None else regression["baseline_target"],
        **{name: numbers.get(name) for name in NUMBERS},
        "report_path": report_path,
        "report_html": report_html,
        "diff_html": diff_html,
    }
    if regression is not None:  # "no_baseline" says more than the passing checks it gives
        row["regression_status"] = regression["status"]
    return row
