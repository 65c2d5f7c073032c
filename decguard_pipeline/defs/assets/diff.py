"""Dagster assets and checks of the diff feature (the interface: features.py).

Every contract's group gains ``regression_diff``, partitioned by target like ``case_results``
and downstream of it only: a candidate whose golden requirements fail is exactly the one whose
diff matters, so the diff never waits for the golden checks. The baseline is chosen by the
contract's ``pipeline.baseline`` rule (``core.diff.choose_baseline``) from what the warehouse
knows and recorded with the diff. One multi-asset check on it has a check per regression gate
in DecGuard's order (requirements, the implicit ``max_error_rate_increase``, warnings):
requirements are blocking ERROR checks, warnings WARN. A candidate without a baseline
materialises with status ``no_baseline`` and its checks pass, saying so.

(No ``from __future__ import annotations``: Dagster reads the context annotations.)
"""

from collections.abc import Mapping
from typing import Any

import dagster as dg

from decguard_pipeline.core.diff import render_diff, render_statistics
from decguard_pipeline.defs.assets.base import asset_key, target_asset
from decguard_pipeline.defs.gate_checks import Gate, check_name, gate_checks
from decguard_pipeline.defs.gate_checks import check_result as gate_result
from decguard_pipeline.defs.metadata import base as md
from decguard_pipeline.steps import diff as diff_steps
from decguard_pipeline.steps.contracts import ContractEntry

NAME = "regression_diff"
CHANGES_SHOWN = 20


def assets(entry: ContractEntry) -> list[dg.AssetsDefinition]:
    return [_regression_diff(entry)] if entry.ok else []


def checks(entry: ContractEntry) -> list[dg.AssetChecksDefinition]:
    return [_regression_checks(entry)] if entry.ok else []


def report_inputs(entry: ContractEntry) -> list[dg.AssetKey]:
    return []  # the DecGuard report of a target does not depend on any other target


def extras(entries: list[ContractEntry], jobs: dict[str, Any]) -> dict[str, list[Any]]:
    return {}  # the contract's evaluate job selects its whole group, the diff included


def _regression_diff(entry: ContractEntry) -> dg.AssetsDefinition:
    return target_asset(
        entry,
        NAME,
        run=diff_steps.diff_target,
        metadata=materialisation_metadata,
        kinds=frozenset({"python", "parquet", "json"}),
        description=(
            "DecGuard's regression diff of the target's newest evaluation against its baseline "
            "(pipeline.baseline: pinned target, a backend's newest passing target, or by "
            "default the previous passing version of the same backend, else the default "
            "backend's); the diff JSON next to the report files."
        ),
    )


def _regression_checks(entry: ContractEntry) -> dg.AssetChecksDefinition:
    gates = [
        Gate(
            check_name(gate, level),
            level,
            (gate, level),
            f"regression {level} {gate} (against the chosen baseline)",
        )
        for gate, level in diff_steps.regression_gates(entry.require())
    ]
    return gate_checks(
        entry,
        asset_key(entry, NAME),
        gates,
        name=f"{entry.key}_regression_gates",
        description="DecGuard's regression gates: requirements block (ERROR), warnings warn.",
        load=diff_steps.check_rows,
        result=check_result,
    )


def check_result(row: Mapping[str, Any], asset: dg.AssetKey, name: str) -> dg.AssetCheckResult:
    """A stored regression check: value, threshold, DecGuard's message (with the statistics
    verdict when the gate's mode is not ``point``), the baseline and how it was judged."""
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
    return gate_result(row, asset, name, meta)


def _fmt(value: float | None, *, pct: bool = False) -> str:
    if value is None:
        return "n/a"
    return f"{value * 100:g}%" if pct else f"{value:.4g}"


# -- what the UI shows -------------------------------------------------------------------


def flip_matrix_markdown(labels: list[str], matrix: list[list[int]]) -> str:
    """Compared cases by baseline label (rows) and candidate label (columns); the diagonal
    holds unchanged answers."""
    lines = [
        "| baseline ↓ · candidate → | " + " | ".join(labels) + " | total |",
        "| --- | " + " | ".join("---:" for _ in labels) + " | ---: |",
    ]
    for i, (label, row) in enumerate(zip(labels, matrix, strict=True)):
        cells = [f"**{n}**" if i == j else str(n) for j, n in enumerate(row)]
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {sum(row)} |")
    totals = [sum(col) for col in zip(*matrix, strict=True)] if matrix else []
    lines.append("| total | " + " | ".join(map(str, totals)) + f" | {sum(totals)} |")
    return "\n".join(lines)


def materialisation_metadata(outcome: diff_steps.DiffOutcome) -> dict[str, Any]:
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
    for name in ("answer_flip_rate", "mean_tv_distance"):
        if doc["shift"][name] is not None:
            meta[name] = dg.MetadataValue.float(doc["shift"][name])
    meta["same_dataset"] = doc["same_dataset"]
    labels = list(doc["contract"]["labels"])
    meta["flip_matrix"] = dg.MetadataValue.md(flip_matrix_markdown(labels, diff.flip_matrix()))
    shown = [  # as DecGuard's layout: metrics undefined for both runs are left out
        {"metric": k, **v}
        for k, v in doc["metrics"].items()
        if v["baseline"] is not None or v["candidate"] is not None
    ]
    meta["metrics"] = md.table(
        shown,
        [("metric", "string"), ("baseline", "float"), ("candidate", "float"), ("delta", "float")],
        limit=len(shown),
    )
    meta["segments"] = md.table(
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
    meta["changes"] = md.table(
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
    meta["checks"] = md.checks_table(doc["checks"])
    if diff.statistics is not None:
        overall = diff.statistics["overall"]
        meta["statistics"] = dg.MetadataValue.md(
            "```\n" + render_statistics(diff.statistics) + "\n```"
        )
        meta["delta_intervals"] = md.table(
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
    meta["diff_path"] = dg.MetadataValue.path(str(outcome.diff_path))
    if outcome.sidecar is not None:
        meta["sidecar_path"] = dg.MetadataValue.path(str(outcome.sidecar))
    meta["dagster/row_count"] = len(doc["changes"])
    return meta
