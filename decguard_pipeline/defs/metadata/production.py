"""What the UI shows for the production feature: the metadata of a ``production_records``
and a ``production_check`` materialisation."""

from typing import Any

import dagster as dg

from decguard_pipeline.core.formatting import num
from decguard_pipeline.core.production.render import render_check, render_extensions
from decguard_pipeline.core.report.render import preview
from decguard_pipeline.defs.metadata import base as md
from decguard_pipeline.steps.production.check import Checked
from decguard_pipeline.steps.production.ingest import Ingested
from decguard_pipeline.steps.production.sources import FILE
from decguard_pipeline.warehouse.rows.production import flat_metrics

RECORDS_SHOWN = 20


def records_metadata(done: Ingested) -> dict[str, Any]:
    table = done.table
    shown_rows = table.slice(0, RECORDS_SHOWN).to_pylist()
    for row in shown_rows:
        row["input"] = preview(row["input_text"], 60) if row["input_text"] is not None else None
    return {
        "dagster/row_count": done.n,
        "source": done.source,
        "path": dg.MetadataValue.path(done.path) if done.source == FILE else done.path,
        "hash": done.hash,
        "with_outcome": done.n_outcomes,
        "with_correctness": done.n_correctness,
        "records_lacking_outcome": done.n - done.n_correctness,
        "selected_labels": dg.MetadataValue.json(done.label_counts),
        "records": md.table(
            shown_rows,
            [
                ("id", "string"),
                ("timestamp", "string"),
                ("selected", "string"),
                ("confidence", "float"),
                ("outcome", "string"),
                ("outcome_correct", "bool"),
                ("action", "string"),
                ("model_version", "string"),
                ("metadata_json", "string"),
                ("input", "string"),
            ],
            limit=RECORDS_SHOWN,
        ),
    }


def summary_markdown(checked: Checked) -> str:
    """DecGuard's check text, then the extension sections, as the terminal shows them."""
    head = (
        f"**Production check {checked.day} · {checked.status.upper()}** · baseline "
        f"`{checked.chosen.ref or 'none'}` ({checked.chosen.rule}: {checked.chosen.reason})"
    )
    text = render_check(checked.document) + "\n\n" + render_extensions(checked.extensions)
    return head + "\n\n```\n" + text + "\n```"


def _float(value: float | None) -> Any:
    return dg.MetadataValue.float(value) if value is not None else "n/a"


def check_metadata(checked: Checked) -> dict[str, Any]:
    doc, ext, rows = checked.document, checked.extensions, checked.rows
    m, drift = doc["metrics"], doc["drift"]
    outcomes = ext["outcomes"]
    interval = ext["accuracy_interval"]
    label = ext["label_drift"]
    drift_row = rows["production_drift"][0]
    return {
        "status": checked.status.upper(),
        "summary": dg.MetadataValue.md(summary_markdown(checked)),
        "accuracy": _float(m["outcomes"]["accuracy"]),
        "ece": _float(m["calibration"]["ece"]),
        "confidence_tv_distance": _float(drift["confidence_tv_distance"]),
        "label_tv_distance": _float(label["tv_distance"]),
        "records_lacking_outcome": outcomes["pending"],
        "records_lacking_label_outcome": outcomes["pending_label"],
        "accuracy_interval": (
            f"{num(interval['accuracy'])} · {interval['confidence'] * 100:g}% Wilson "
            f"[{num(interval['low'])}, {num(interval['high'])}] over {interval['n']} records"
        ),
        "baseline": checked.chosen.ref or "none",
        "baseline_rule": checked.chosen.rule,
        "baseline_reason": checked.chosen.reason,
        "metrics": md.metrics_table(flat_metrics(m)),
        "drift": md.table(
            [drift_row],
            [
                ("baseline", "string"),
                ("baseline_rule", "string"),
                ("baseline_n_records", "int"),
                ("confidence_tv_distance", "float"),
                ("confidence_mean_delta", "float"),
                ("accuracy_drop", "float"),
                ("ece_increase", "float"),
                ("label_tv_distance", "float"),
                ("label_psi", "float"),
            ],
        ),
        "segments": md.table(
            rows["production_segments"],
            [
                ("segment_key", "string"),
                ("segment_value", "string"),
                ("status", "string"),
                ("n_records", "int"),
                ("accuracy", "float"),
                ("accuracy_low", "float"),
                ("accuracy_high", "float"),
                ("ece", "float"),
                ("pending", "int"),
            ],
            limit=1000,
        ),
        "label_drift": md.table(
            [
                {
                    "label": name,
                    "current": label["current"][i],
                    "baseline": None if label["baseline"] is None else label["baseline"][i],
                }
                for i, name in enumerate(label["labels"])
            ],
            [("label", "string"), ("current", "float"), ("baseline", "float")],
            limit=1000,
        ),
        "calibration_by_model_version": md.table(
            [
                {
                    **e,
                    "model_version": e["model_version"],
                    "baseline_ece": None if e["baseline"] is None else e["baseline"]["ece"],
                }
                for e in ext["calibration_by_model_version"]
            ],
            [
                ("model_version", "string"),
                ("n", "int"),
                ("accuracy", "float"),
                ("mean_confidence", "float"),
                ("ece", "float"),
                ("baseline_ece", "float"),
                ("ece_increase", "float"),
            ],
            limit=1000,
        ),
        "checks": md.checks_table(doc["checks"]),
        "report_path": dg.MetadataValue.path(str(checked.report_path)),
        "sidecar_path": dg.MetadataValue.path(str(checked.sidecar)),
        "dagster/row_count": doc["dataset"]["n_records"],
    }
