"""Guard extension results -> warehouse rows: the ``guard_*`` tables and
``suite_case_results`` (schema: ``schema/guard.py``), built from what ``core/guard`` measured."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from decguard_pipeline.core.gates import overall_status
from decguard_pipeline.core.guard.evaluation import GuardedRun, SuiteRun
from decguard_pipeline.core.guard.extension import metric_rows
from decguard_pipeline.core.results import served_version
from decguard_pipeline.warehouse.rows.base import to_json
from decguard_pipeline.warehouse.rows.golden import case_results_table


def suite_cases_table(runs: list[SuiteRun], where: dict[str, Any]) -> pa.Table:
    """The cases of the suites decided through the backend, as ``case_results`` rows plus
    their ``suite``; ``where``: contract, target, run_id, recorded_at."""
    parts = []
    for run in runs:
        results = run.report.results
        served = served_version(run.report.document["backend"], results)
        table = case_results_table(results, **where, model_version=served)
        suite = pa.array([run.suite] * len(results), pa.string())
        parts.append(table.append_column("suite", suite))
    return pa.concat_tables(parts)


def _parts(block: dict[str, Any]) -> list[tuple[str | None, str | None, dict[str, Any]]]:
    """``(split key, split value, block)``: the whole set, then every metadata group."""
    out: list[tuple[str | None, str | None, dict[str, Any]]] = [(None, None, block)]
    for key, groups in block.get("splits", {}).items():
        out += [(key, group["value"], group) for group in groups]
    return out


def threshold_rows(block: dict[str, Any]) -> list[dict[str, Any]]:
    """The threshold table of a block (whole set, then every metadata group), one row per
    guarded label and grid threshold (``kind`` ``grid``), then the point meeting each target
    (``target_recall``, ``target_fpr``)."""
    rows = []
    for split_key, split_value, part in _parts(block):
        where = {"split_key": split_key, "split_value": split_value}
        for label, table in part["thresholds"]["labels"].items():
            rows += [
                {**where, "label": label, "kind": "grid", "target_value": None, "reason": None,
                 **r}
                for r in table["grid"]
            ]  # fmt: skip
            for kind in ("target_recall", "target_fpr"):
                point = table[kind]
                if point is not None:
                    values = {k: v for k, v in point.items() if k != "target"}
                    rows.append({**where, "label": label, "kind": kind,
                                 "target_value": point["target"], **values})  # fmt: skip
    return rows


def guard_rows(guarded: GuardedRun, base: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The ``guard_*`` rows of a measured run; ``base``: the keys and ``backend``,
    ``model_version`` every row carries."""
    rows: dict[str, list[dict[str, Any]]] = {
        "guard_suites": [],
        "guard_metrics": [],
        "guard_reliability": [],
        "guard_risk_coverage": [],
        "guard_thresholds": [],
        "guard_checks": [],
        "guard_summary": [],
    }
    for index, run in enumerate(guarded.runs):
        label, block, doc = run.label, run.block, run.report.document
        state = block["run"]
        images = guarded.images.get(index, {})
        rows["guard_suites"].append(
            {
                **base,
                "suite": label,
                "position": index,
                "is_main": index == 0,
                "dataset_path": doc["dataset"]["path"],
                "dataset_hash": doc["dataset"]["hash"],
                "n_cases": state["total"],
                "n_labeled": doc["dataset"]["n_labeled"],
                "n_decided": state["decided"],
                "n_errored": state["errored"],
                "errors_by_kind_json": to_json(state["errors_by_kind"]),
                "drop_rate": state["drop_rate"],
                "run_state": state["state"],
                "decguard_status": run.report.status,
                "guard_status": overall_status(run.checks),
                "status": run.status,
                "reliability_png": str(images["reliability"]) if images else None,
                "risk_coverage_png": str(images["risk_coverage"]) if images else None,
                "sidecar_path": str(guarded.sidecar),
            }
        )
        rows["guard_metrics"] += [{**base, **r} for r in metric_rows(block, suite=label)]
        rows["guard_thresholds"] += [{**base, "suite": label, **r} for r in threshold_rows(block)]
        for split_key, split_value, part in _parts(block):
            where = {**base, "suite": label, "split_key": split_key, "split_value": split_value}
            cal = part["calibration"]
            for binning in ("equal_width", "equal_mass"):
                rows["guard_reliability"] += [
                    {**where, "binning": binning, "bin": i, **b}
                    for i, b in enumerate(cal[f"reliability_{binning}"])
                ]
            rows["guard_risk_coverage"] += [{**where, **r} for r in part["risk_coverage"]["sweep"]]
        rows["guard_checks"] += [
            {**base, "source": "guard", "suite": label, **c} for c in run.checks
        ]
        if index:  # the main evaluation's DecGuard gates are golden gate_results
            rows["guard_checks"] += [
                {**base, "source": "decguard", "suite": label, **c} for c in doc["checks"]
            ]
    summary = guarded.summary
    if summary is not None:
        for aggregate in ("pooled", "mean"):
            rows["guard_summary"] += [
                {**base, "aggregate": aggregate, "metric": m, "value": v, "suite": None}
                for m, v in summary[aggregate].items()
            ]
        rows["guard_summary"] += [
            {**base, "aggregate": "worst", "metric": m, "value": w["value"], "suite": w["suite"]}
            for m, w in summary["worst"].items()
            if w is not None
        ]
    return rows
