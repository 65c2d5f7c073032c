"""What the UI shows for the regression diff: the materialisation's summary (DecGuard's diff
layout and the statistics), the flip matrix, metrics, segments, changes and checks tables."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dagster as dg

from decguard_pipeline.core.diff import render_diff, render_statistics
from decguard_pipeline.core.diff.calibration import render_calibration_shift
from decguard_pipeline.core.label_fold import LabelMatrix
from decguard_pipeline.defs.metadata.base import checks_table, numbers, table
from decguard_pipeline.defs.report_links import file_links
from decguard_pipeline.steps.diff import DiffOutcome

CHANGES_SHOWN = 20
SHIFT = ("answer_flip_rate", "mean_tv_distance")


def _fmt(value: float | None, *, pct: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"{value * 100:g}%" if pct else f"{value:.4g}"


def check_metadata(row: Mapping[str, Any]) -> dict[str, Any]:
    """What a stored regression check shows beside the gate's own fields: the baseline, the
    gate's mode and, when that is not ``point``, the statistics verdict (p-value, interval,
    test, segment)."""
    meta: dict[str, Any] = {"baseline": row["baseline_target"] or "none"}
    if row["mode"] is not None:
        meta["mode"] = row["mode"]
    if row["mode"] not in (None, "point"):
        meta["statistics"] = (
            f"{row['mode']}: p={_fmt(row['p_value'])} (alpha {_fmt(row['alpha'])}), "
            f"{_fmt(row['confidence'], pct=True)} CI [{_fmt(row['ci_low'])}, "
            f"{_fmt(row['ci_high'])}] ({row['test'] or 'n/a'})"
            + (
                f", segment {row['segment_key']}={row['segment_value']}"
                if row["segment_key"] is not None
                else ""
            )
        )
        for key in ("p_value", "ci_low", "ci_high"):
            if row[key] is not None:
                meta[key] = dg.MetadataValue.float(row[key])
    return meta


def flip_matrix_markdown(matrix: LabelMatrix) -> str:
    """Compared cases by baseline label (rows) and candidate label (columns); the diagonal
    holds unchanged answers. With many labels, the pooled ones share the last row and column
    (core.label_fold): the table never has a cell per pair of labels."""
    labels = matrix.names
    lines = [
        "| baseline ↓ · candidate → | " + " | ".join(labels) + " | total |",
        "| --- | " + " | ".join("---:" for _ in labels) + " | ---: |",
    ]
    for i, (label, row) in enumerate(zip(labels, matrix.cells, strict=True)):
        cells = [f"**{n}**" if i == j else str(n) for j, n in enumerate(row)]
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {sum(row)} |")
    totals = [sum(col) for col in zip(*matrix.cells, strict=True)] if matrix.cells else []
    lines.append("| total | " + " | ".join(map(str, totals)) + f" | {sum(totals)} |")
    return "\n".join(lines)


def calibration_shift_metadata(section: dict[str, Any]) -> dict[str, Any]:
    """The diff's calibration comparison: its text, the verdict and the Brier score's change
    of miscalibration and discrimination as numbers."""
    meta: dict[str, Any] = {
        "calibration": dg.MetadataValue.md("```\n" + render_calibration_shift(section) + "\n```"),
        "calibration_honesty": section["verdict"]["honesty"],
        "calibration_discrimination": section["verdict"]["discrimination"],
    }
    delta = section["decomposition"]["brier"]["delta"]
    if delta is not None:
        for part in ("miscalibration", "discrimination"):
            meta[f"{part}_delta"] = dg.MetadataValue.float(delta[part])
    return meta


def materialisation_metadata(outcome: DiffOutcome) -> dict[str, Any]:
    choice = outcome.choice
    meta: dict[str, Any] = {
        "status": outcome.status.upper(),
        "baseline": outcome.baseline_target or "none",
        "baseline_rule": "none" if choice is None else choice.rule,
        "baseline_reason": outcome.resolved.reason,
    }
    diff = outcome.diff
    if diff is None:
        meta["summary"] = dg.MetadataValue.md(
            f"**Regression diff · NO BASELINE** for `{outcome.target}`\n\n"
            f"{outcome.resolved.reason}. Nothing to compare yet: every regression check "
            "passes with a *no baseline* description. The next evaluation of this contract "
            "that can use this target as its baseline will be compared against it."
        )
        meta["dagster/row_count"] = 0
        return meta
    doc = diff.document
    text = render_diff(doc)
    if diff.statistics is not None:
        text += "\n\n" + render_statistics(diff.statistics)
    meta["summary"] = dg.MetadataValue.md("```\n" + text + "\n```")
    counts = doc["counts"]
    meta["matched"] = counts["matched"]
    meta["answer_flips"] = counts["answer_flips"]
    meta["newly_errored"] = counts["newly_errored"]
    meta.update(numbers({name: doc["shift"][name] for name in SHIFT}))
    # each metric's change as a number, so the asset's per-partition plots compare versions
    meta.update(numbers({f"{k}_delta": v["delta"] for k, v in doc["metrics"].items()}))
    meta["same_dataset"] = doc["same_dataset"]
    meta["flip_matrix"] = dg.MetadataValue.md(flip_matrix_markdown(diff.flips()))
    shown = [  # as DecGuard's layout: metrics undefined for both runs are left out
        {"metric": k, **v}
        for k, v in doc["metrics"].items()
        if v["baseline"] is not None or v["candidate"] is not None
    ]
    meta["metrics"] = table(
        shown,
        [("metric", "string"), ("baseline", "float"), ("candidate", "float"), ("delta", "float")],
        limit=len(shown),
    )
    meta["segments"] = table(
        [{**s, "segment": f"{s['key']}={s['value']}"} for s in doc["segments"]],
        [
            ("segment", "string"),
            ("matched", "int"),
            ("compared", "int"),
            ("baseline_accuracy", "float"),
            ("candidate_accuracy", "float"),
            ("accuracy_drop", "float"),
            ("answer_flip_rate", "float"),
            ("gated", "bool"),
        ],
        limit=1000,
    )
    meta["changes"] = table(
        outcome.rows["diff_changes"],
        [
            ("case_id", "string"),
            ("kind", "string"),
            ("expected", "string"),
            ("baseline_selected", "string"),
            ("candidate_selected", "string"),
            ("baseline_confidence", "float"),
            ("candidate_confidence", "float"),
            ("tv_distance", "float"),
            ("error", "string"),
            ("input_preview", "string"),
        ],
        limit=CHANGES_SHOWN,
    )
    meta["checks"] = checks_table(doc["checks"])
    if diff.statistics is not None:
        overall = diff.statistics["overall"]
        meta["statistics"] = dg.MetadataValue.md(
            "```\n" + render_statistics(diff.statistics) + "\n```"
        )
        meta["delta_intervals"] = table(
            [
                r
                for r in outcome.rows["diff_intervals"]
                if r["side"] in ("delta", "shift") and r["segment_key"] is None
            ],
            [
                ("metric", "string"),
                ("value", "float"),
                ("low", "float"),
                ("high", "float"),
                ("p_value_candidate_worse", "float"),
                ("test", "string"),
            ],
            limit=1000,
        )
        meta["mcnemar_p_value"] = dg.MetadataValue.float(overall["mcnemar"]["p_value"])
    if diff.calibration is not None:  # less honest, or less able to tell cases apart?
        meta.update(calibration_shift_metadata(diff.calibration))
    if outcome.html is not None:
        meta.update(file_links("diff_html", outcome.html))
    meta["diff_path"] = dg.MetadataValue.path(str(outcome.diff_path))
    if outcome.sidecar is not None:
        meta["sidecar_path"] = dg.MetadataValue.path(str(outcome.sidecar))
    meta["dagster/row_count"] = len(doc["changes"])
    return meta
