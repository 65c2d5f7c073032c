"""What the UI shows for the guard feature: the ``guard_metrics`` materialisation's metadata
(suites at a glance, pictures, tables, the text sections) over ``base``'s table builders."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dagster as dg

from decguard_pipeline.core.guard.extension import headline
from decguard_pipeline.core.guard.render import render_guard
from decguard_pipeline.defs.metadata import base as md
from decguard_pipeline.steps.guard import GuardMeasured

HEADLINE = (
    "accuracy",
    "auroc",
    "auprc",
    "precision",
    "recall",
    "f1",
    "fpr",
    "fnr",
    "ece",
    "ece_equal_mass",
    "mean_confidence",
    "confidence_gap",
    "aurc",
    "drop_rate",
)


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def suite_rows(measured: GuardMeasured) -> list[dict[str, Any]]:
    """One row per suite: headline metrics, run state and status."""
    rows = []
    for label, run in zip(measured.labels, measured.runs, strict=True):
        numbers = headline(run.block)
        rows.append(
            {
                "suite": label,
                "cases": run.block["run"]["total"],
                "errored": run.block["run"]["errored"],
                "run_state": run.block["run"]["state"],
                **{m: numbers[m] for m in HEADLINE},
                "direction": run.block["calibration"]["direction"],
                "status": run.status,
            }
        )
    return rows


def all_checks(measured: GuardMeasured) -> list[dict[str, Any]]:
    """Every suite's guard checks, then DecGuard's gates on the suites besides the main one
    (the main one's are the golden checks)."""
    rows = measured.rows["guard_checks"]
    return sorted(rows, key=lambda r: r["source"] != "guard")


def summary_markdown(measured: GuardMeasured) -> str:
    """The guard at a glance: a table of suites, partial-run flags and failing checks."""
    rows = suite_rows(measured)
    lines = [
        f"**Guard · {measured.status.upper()}** · "
        f"guarded {', '.join(measured.guarded.config.guarded)} "
        f"at threshold {measured.guarded.config.guard.threshold:g}",
        "",
        "| suite | cases | drop rate | run | accuracy | AUROC | FNR | FPR | ECE equal-mass "
        "| gap | AURC | status |",
        "| --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- |",
    ]
    for r in rows:
        gap = f"{_fmt(r['confidence_gap'])} ({r['direction'] or 'n/a'})"
        lines.append(
            f"| {r['suite']} | {r['cases']} | {r['drop_rate']:.1%} | {r['run_state']} "
            f"| {_fmt(r['accuracy'])} | {_fmt(r['auroc'])} | {_fmt(r['fnr'])} "
            f"| {_fmt(r['fpr'])} | {_fmt(r['ece_equal_mass'])} | {gap} | {_fmt(r['aurc'])} "
            f"| {r['status'].upper()} |"
        )
    flags = [
        f"- **{r['run_state']} run** on `{r['suite']}`: {r['errored']} of {r['cases']} cases "
        f"errored (drop rate {r['drop_rate']:.1%}); its metrics describe the rest only"
        for r in rows
        if r["run_state"] != "normal"
    ]
    failing = [
        f"- {c['status'].upper()} `{c['suite']}` {c['gate']}: {c['message']}"
        for c in all_checks(measured)
        if c["status"] != "pass"
    ]
    if flags:
        lines += ["", "Partial runs:", *flags]
    if failing:
        lines += ["", "Checks not passing:", *failing]
    return "\n".join(lines)


def _pictures(measured: GuardMeasured, kind: str) -> str:
    parts = []
    for index, label in enumerate(measured.labels):
        path = measured.guarded.images[index][kind]
        parts += [f"**{label}**", "", md.markdown_image(f"{kind} {label}", path.read_bytes()), ""]
    return "\n".join(parts)


HEADLINE_COLUMNS = [(m, "float") for m in HEADLINE]


def per_suite_table(measured: GuardMeasured) -> dg.MetadataValue:
    columns = [("suite", "string"), ("cases", "int"), ("errored", "int"), ("run_state", "string")]
    return md.table(
        suite_rows(measured),
        [*columns, *HEADLINE_COLUMNS, ("direction", "string"), ("status", "string")],
        limit=1000,
    )


def suite_summary_table(summary: dict[str, Any]) -> dg.MetadataValue:
    """Per metric: pooled over the suites, their mean, and the worst suite."""
    rows = []
    for metric in summary["pooled"]:
        worst = summary["worst"].get(metric) or {}
        rows.append(
            {
                "metric": metric,
                "pooled": summary["pooled"][metric],
                "mean": summary["mean"][metric],
                "worst": worst.get("value"),
                "worst_suite": worst.get("suite"),
            }
        )
    columns = [("metric", "string"), ("pooled", "float"), ("mean", "float"), ("worst", "float")]
    return md.table(rows, [*columns, ("worst_suite", "string")], limit=1000)


def split_rows(measured: GuardMeasured) -> list[dict[str, Any]]:
    """One row per suite and metadata group: its size, run state and headline metrics."""
    return [
        {
            "suite": run.label,
            "split_key": key,
            "split_value": group["value"],
            "cases": group["n_cases"],
            "run_state": group["run"]["state"],
            **{m: headline(group)[m] for m in HEADLINE},
        }
        for run in measured.runs
        for key, groups in run.block.get("splits", {}).items()
        for group in groups
    ]


def splits_table(rows: list[dict[str, Any]]) -> dg.MetadataValue:
    columns = [("suite", "string"), ("split_key", "string"), ("split_value", "string")]
    columns += [("cases", "int"), ("run_state", "string")]
    return md.table(rows, [*columns, *HEADLINE_COLUMNS], limit=1000)


def sweep_table(sweep: list[dict[str, Any]]) -> dg.MetadataValue:
    """The risk-coverage sweep: one row per confidence threshold."""
    columns = [("threshold", "float"), ("kept", "int"), ("handed_off", "int")]
    columns += [("coverage", "float"), ("selective_accuracy", "float")]
    columns += [("selective_risk", "float"), ("cost_per_1000", "float")]
    return md.table(sweep, columns, limit=1000)


def thresholds_table(measured: GuardMeasured) -> dg.MetadataValue:
    """The threshold table of every suite and guarded label (the ``guard_thresholds`` rows of
    the whole datasets)."""
    rows = [r for r in measured.rows["guard_thresholds"] if r["split_key"] is None]
    columns = [("suite", "string"), ("label", "string"), ("kind", "string")]
    columns += [("target_value", "float"), ("threshold", "float")]
    columns += [(c, "int") for c in ("tp", "fp", "tn", "fn")]
    columns += [(c, "float") for c in ("precision", "recall", "f1", "fpr", "fnr")]
    return md.table(rows, [*columns, ("reason", "string")], limit=1000)


def materialisation_metadata(measured: GuardMeasured) -> dict[str, Any]:
    main = measured.runs[0].block
    meta: dict[str, Any] = {
        "status": measured.status.upper(),
        "run_state": main["run"]["state"],
        "drop_rate": dg.MetadataValue.float(main["run"]["drop_rate"]),
        "suites": ", ".join(measured.labels),
        "summary": dg.MetadataValue.md(summary_markdown(measured)),
        "reliability": dg.MetadataValue.md(_pictures(measured, "reliability")),
        "risk_coverage": dg.MetadataValue.md(_pictures(measured, "risk_coverage")),
        "per_suite": per_suite_table(measured),
        "headline": md.metrics_table(headline(main)),
    }
    if measured.guarded.summary is not None:
        meta["suite_summary"] = suite_summary_table(measured.guarded.summary)
    splits = split_rows(measured)
    if splits:
        meta["splits"] = splits_table(splits)
    meta["risk_coverage_sweep"] = sweep_table(main["risk_coverage"]["sweep"])
    meta["thresholds"] = thresholds_table(measured)
    meta["checks"] = md.checks_table(
        all_checks(measured), leading=[("suite", "string"), ("source", "string")], limit=1000
    )
    meta["report_text"] = dg.MetadataValue.md(
        "```\n" + render_guard(measured.guarded.document()) + "\n```"
    )
    for index, label in enumerate(measured.labels):
        suffix = "" if index == 0 else f" ({label})"
        for kind, path in measured.guarded.images[index].items():
            meta[f"{kind}_png{suffix}"] = dg.MetadataValue.path(str(path))
    meta["sidecar"] = dg.MetadataValue.path(str(measured.sidecar))
    if measured.run_dir is not None:
        meta["geh_run_dir"] = dg.MetadataValue.path(measured.run_dir)
    meta["dagster/row_count"] = len(measured.rows["guard_metrics"])
    return meta


def check_metadata(outcome: Mapping[str, Any]) -> dict[str, Any]:
    """What an aggregated guard check shows beside its value: the worst suite and every
    suite's outcome."""
    return {"suite": outcome["suite"], "suites": md.outcomes_table(outcome["suites"], "suite")}
