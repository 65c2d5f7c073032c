"""What the UI shows for the golden assets: each materialisation's metadata, readable at a
glance (the verdict in one line, the headline numbers, the reliability diagram and the
risk-coverage curve, the terminal summary, the metrics, per-label scores, reliability bins,
failing cases, gates)."""

from __future__ import annotations

from typing import Any

import dagster as dg

from decguard_pipeline.core.consistency.section import MEASURES, render_consistency
from decguard_pipeline.core.engine_notes import engine_notes
from decguard_pipeline.core.html.figures import (
    data_uri,
    reliability_figure,
    risk_coverage_figure,
)
from decguard_pipeline.core.report.golden import Report
from decguard_pipeline.core.report.render import render_report
from decguard_pipeline.defs.metadata.base import (
    checks_table,
    failing_cases_table,
    intervals_table,
    markdown_image,
    metrics_table,
    numbers,
    results_table,
    table,
)
from decguard_pipeline.defs.metadata.calibration import calibration_metadata
from decguard_pipeline.defs.report_links import file_links
from decguard_pipeline.steps.base import Evaluated
from decguard_pipeline.steps.golden import GoldenReport, WrittenReport
from decguard_pipeline.warehouse.rows.golden import USAGE_METRICS, flat_metrics, usage_columns

PER_LABEL = [("label", "string"), ("precision", "float"), ("recall", "float"), ("f1", "float"),
             ("support", "int")]  # fmt: skip
RELIABILITY = [("lower", "float"), ("upper", "float"), ("count", "int"),
               ("mean_confidence", "float"), ("accuracy", "float")]  # fmt: skip
ALL_ROWS = 1000  # per-label and reliability tables are short; show them whole


# The UI renders a markdown value in place only below this many characters (else behind
# "[Show Markdown]"): the one-line verdict stays under it.
INLINE_MARKDOWN = 1000


def summary_markdown(report: Report) -> str:
    """The terminal summary, as the UI shows it."""
    return "```\n" + render_report(report.document) + "\n```"


def verdict_markdown(status: str, checks: list[dict[str, Any]]) -> str:
    """The verdict and the gates that do not hold, short enough to be shown in place."""
    held = sum(c["status"] == "pass" for c in checks)
    head = f"**{status.upper()}** · {held} of {len(checks)} gates hold"
    lines = [
        f"- {c['status'].upper()} `{c['gate']}` ({c['level']}): {c['message']}"
        for c in checks
        if c["status"] != "pass"
    ]
    text = "\n".join([head, *([""] if lines else []), *lines])
    if len(text) < INLINE_MARKDOWN:
        return text
    names = ", ".join(f"`{c['gate']}`" for c in checks if c["status"] != "pass")
    return f"{head}; not holding: {names}"[: INLINE_MARKDOWN - 1]


def image_markdown(title: str, svg: str) -> str:
    """An SVG document inline in markdown (the UI shows it behind "[Show Markdown]": one
    click; its markdown allows ``data:`` images)."""
    return markdown_image(title, data_uri(svg))


def headline_numbers(golden: GoldenReport) -> dict[str, float | None]:
    """The numbers the asset's per-partition plots compare across targets."""
    m = golden.metrics
    cls, cal, sel = m["classification"], m["calibration"], m["selective"] or {}
    out: dict[str, float | None] = {
        "accuracy": cls["accuracy"],
        "macro_f1": cls["macro_f1"],
        "ece": cal["ece"],
        "brier": cal["brier"],
        "nll": cal["nll"],
        "coverage": sel.get("coverage"),
        "error_rate": m["counts"]["error_rate"],
        "latency_p95_ms": m["latency"]["p95_ms"],
    }
    if golden.curves is not None:
        calibration, risk = golden.curves["calibration"], golden.curves["risk_coverage"]
        out["ece_equal_mass"] = calibration["ece_equal_mass"]
        out["confidence_gap"] = calibration["confidence_gap"]
        out["aurc"] = risk["aurc"]
    return out


def pictures(golden: GoldenReport, title: str) -> dict[str, Any]:
    """The reliability diagram (equal-width and equal-mass bins) and the risk-coverage curve
    as markdown images (SVG: drawn as text, no matplotlib; the CLI's PNG files are
    ``core.report.plots``)."""
    if golden.curves is None:
        return {}
    calibration, risk = golden.curves["calibration"], golden.curves["risk_coverage"]
    # with pipeline.calibration_measures, the smooth reliability curve over the bins
    smooth = (golden.calibration or {}).get("smooth")
    diagram = reliability_figure(calibration, title=title, smooth=smooth)
    return {
        "reliability_diagram": dg.MetadataValue.md(image_markdown(f"reliability {title}", diagram)),
        "risk_coverage": dg.MetadataValue.md(
            image_markdown(f"risk-coverage {title}", risk_coverage_figure(risk, title=title))
        ),
    }


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
    """The golden report's verdict, headline numbers, pictures, metrics, gates and failing
    cases."""
    report, m = golden.report, golden.metrics
    flat = flat_metrics(m)
    per_label = [{"label": k, **v} for k, v in m["classification"]["per_label"].items()]
    intervals = {} if golden.intervals is None else {"intervals": intervals_table(golden.intervals)}
    backend = report.document["backend"]
    title = f"{backend['name']} · {backend['model'] or '-'} {backend['model_version'] or ''}"
    usage = golden.usage or {}
    return {
        "status": report.status.upper(),
        "verdict": dg.MetadataValue.md(
            verdict_markdown(report.status, [*golden.checks, *usage.get("checks", [])])
        ),
        **numbers(headline_numbers(golden)),
        **pictures(golden, title.strip()),
        "summary": dg.MetadataValue.md(summary_markdown(report)),
        "metrics": metrics_table(flat),
        "per_label": table(per_label, PER_LABEL, limit=ALL_ROWS),
        "reliability": table(m["calibration"]["reliability"], RELIABILITY, limit=ALL_ROWS),
        "failing_cases": failing_cases_table(report.document["failures"]),
        "gates": checks_table([*golden.checks, *usage.get("checks", [])]),
        **intervals,
        **usage_metadata(golden.usage),
        **engine_metadata(backend.get("details")),
        **calibration_metadata(golden.calibration, title=report.document["backend"]["name"]),
        **consistency_metadata(golden.consistency),
        "dagster/row_count": len(flat),
    }


def engine_metadata(details: dict[str, Any] | None) -> dict[str, Any]:
    """A language-model backend's notes (fallbacks taken, a version that is only the name
    asked for), as a markdown list; nothing when it has none."""
    notes = engine_notes(details)
    if not notes:
        return {}
    return {"engine_notes": dg.MetadataValue.md("\n".join(f"- {note}" for note in notes))}


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
    values = {
        f"consistency/{name}": dg.MetadataValue.float(section[name])
        for name in MEASURES
        if section[name] is not None
    }
    text = "```\n" + render_consistency(section) + "\n```"
    return {**values, "consistency": dg.MetadataValue.md(text)}


def report_metadata(written: WrittenReport) -> dict[str, Any]:
    """A written report file: its verdict, the HTML page to open, where the files are, its
    summary."""
    report = written.report
    return {
        "status": report.status.upper(),
        "verdict": dg.MetadataValue.md(verdict_markdown(report.status, report.document["checks"])),
        **file_links("report_html", written.html),
        "path": dg.MetadataValue.path(str(written.path)),
        "summary": dg.MetadataValue.md(summary_markdown(report)),
        "dagster/row_count": len(report.results),
    }
