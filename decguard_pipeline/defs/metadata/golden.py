"""What the UI shows for the golden assets: each materialisation's metadata, readable at a
glance (the terminal summary, the metrics, per-label scores, reliability bins, failing cases,
gates)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg

from decguard_pipeline.core.consistency.section import MEASURES, render_consistency
from decguard_pipeline.core.report.golden import Report
from decguard_pipeline.core.report.render import render_report
from decguard_pipeline.defs.metadata.base import (
    checks_table,
    failing_cases_table,
    intervals_table,
    metrics_table,
    results_table,
    table,
)
from decguard_pipeline.defs.metadata.calibration import calibration_metadata
from decguard_pipeline.steps.base import Evaluated
from decguard_pipeline.steps.golden import GoldenReport
from decguard_pipeline.warehouse.rows.golden import USAGE_METRICS, flat_metrics, usage_columns

PER_LABEL = [("label", "string"), ("precision", "float"), ("recall", "float"), ("f1", "float"),
             ("support", "int")]  # fmt: skip
RELIABILITY = [("lower", "float"), ("upper", "float"), ("count", "int"),
               ("mean_confidence", "float"), ("accuracy", "float")]  # fmt: skip
ALL_ROWS = 1000  # per-label and reliability tables are short; show them whole


def summary_markdown(report: Report) -> str:
    """The terminal summary, as the UI shows it."""
    return "```\n" + render_report(report.document) + "\n```"


def contract_metadata(row: dict[str, Any]) -> dict[str, Any]:
    """A recorded contract (its ``contracts`` row)."""
    return {
        "hash": row["contract_hash"],
        "path": dg.MetadataValue.path(row["path"]),
        "labels": ", ".join(row["labels"]),
        "backends": ", ".join(row["backends"]),
    }


def dataset_metadata(row: dict[str, Any]) -> dict[str, Any]:
    """A recorded golden dataset (its ``datasets`` row)."""
    return {
        "dagster/row_count": row["n_cases"],
        "labeled": row["n_labeled"],
        "hash": row["dataset_hash"],
        "path": dg.MetadataValue.path(row["path"]),
    }


def case_results_metadata(evaluated: Evaluated) -> dict[str, Any]:
    """One evaluation: how many cases, what failed, who answered, the first results."""
    run, results = evaluated.run, evaluated.results
    return {
        "dagster/row_count": run["n_cases"],
        "errored": run["n_errored"],
        "errors_by_kind": dg.MetadataValue.json(results.errors_by_kind()),
        "model": run["model"] or "-",
        "model_version": run["model_version"] or "-",
        "health": f"{run['health_status']}: {run['health_detail']}",
        "wall_s": run["wall_s"],
        "results": results_table(results),
    }


def golden_metrics_metadata(golden: GoldenReport) -> dict[str, Any]:
    """The golden report's verdict, metrics, gates and failing cases."""
    report, m = golden.report, golden.metrics
    flat = flat_metrics(m)
    per_label = [{"label": k, **v} for k, v in m["classification"]["per_label"].items()]
    intervals = {} if golden.intervals is None else {"intervals": intervals_table(golden.intervals)}
    usage = golden.usage or {}
    return {
        "summary": dg.MetadataValue.md(summary_markdown(report)),
        "status": report.status.upper(),
        "metrics": metrics_table(flat),
        "per_label": table(per_label, PER_LABEL, limit=ALL_ROWS),
        "reliability": table(m["calibration"]["reliability"], RELIABILITY, limit=ALL_ROWS),
        "failing_cases": failing_cases_table(report.document["failures"]),
        "gates": checks_table([*golden.checks, *usage.get("checks", [])]),
        **intervals,
        **usage_metadata(golden.usage),
        **calibration_metadata(golden.calibration, title=report.document["backend"]["name"]),
        **consistency_metadata(golden.consistency),
        "dagster/row_count": len(flat),
    }


def usage_metadata(usage: dict[str, Any] | None) -> dict[str, Any]:
    """Tokens and cost of the run as numbers (the UI plots numeric metadata over time); only
    those known: tokens when the backend reported usage, costs when it has pricing."""
    if usage is None or "cases" not in usage:
        return {}
    columns = usage_columns(usage)
    return {
        name: (dg.MetadataValue.int if name.endswith("tokens") else dg.MetadataValue.float)(
            columns[name]
        )
        for name in USAGE_METRICS
        if columns[name] is not None
    }


def consistency_metadata(section: dict[str, Any] | None) -> dict[str, Any]:
    """With pipeline.repeats: the consistency measures as numbers (plotted over time; a
    measure over no case is left out) and the text block."""
    if section is None:
        return {}
    numbers = {
        f"consistency/{name}": dg.MetadataValue.float(section[name])
        for name in MEASURES
        if section[name] is not None
    }
    text = "```\n" + render_consistency(section) + "\n```"
    return {**numbers, "consistency": dg.MetadataValue.md(text)}


def report_metadata(written: tuple[Path, Report]) -> dict[str, Any]:
    """A written report file: where, its verdict and its summary."""
    path, report = written
    return {
        "path": dg.MetadataValue.path(str(path)),
        "status": report.status.upper(),
        "summary": dg.MetadataValue.md(summary_markdown(report)),
        "dagster/row_count": len(report.results),
    }
