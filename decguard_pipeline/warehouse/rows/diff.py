"""Rows of the regression diff (``warehouse/schema/diff.py``): the ``diffs`` row of a
candidate, its changes, segments and regression checks, and with ``pipeline.statistics`` its
intervals and exact tests. ``base`` holds each row's key columns."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from decguard_pipeline.core.contract import Regression
from decguard_pipeline.core.diff import BaselineChoice, Diff
from decguard_pipeline.core.diff.gates import REGRESSION_GATES, configured_gates
from decguard_pipeline.core.gates import PASS
from decguard_pipeline.core.report.render import preview
from decguard_pipeline.warehouse.rows.base import to_json
from decguard_pipeline.warehouse.schema.diff import COUNTS, DIFF_METRICS, SHIFT

SOURCE = "regression"  # ``regression_checks.source``
PREVIEW_WIDTH = 70  # DecGuard's preview of an input in the diff's changes


def _moment(value: Any) -> datetime | None:
    return value if isinstance(value, datetime) else None


def diffs_row(
    base: dict[str, Any],
    *,
    choice: BaselineChoice | None,
    reason: str,
    candidate_created_at: Any,
    status: str,
    run: dict[str, Any],
    base_run: dict[str, Any] | None,
    diff: Diff | None = None,
    diff_path: Path | None = None,
    sidecar: Path | None = None,
) -> dict[str, Any]:
    """The ``diffs`` row: the candidate run, the baseline run (None: no baseline) and how it
    was chosen, then the diff's counts, shift, metrics and worst segment when there is one."""
    row: dict[str, Any] = {
        **base,
        "candidate_run_id": run["run_id"],
        "baseline_backend": None if base_run is None else base_run["backend"],
        "baseline_model_version": None if base_run is None else base_run["model_version"],
        "baseline_run_id": None if base_run is None else base_run["run_id"],
        "baseline_rule": None if choice is None else choice.rule,
        "baseline_reason": reason,
        "baseline_created_at": None if choice is None else _moment(choice.target["created_at"]),
        "candidate_created_at": _moment(candidate_created_at),
        "status": status,
        "candidate_dataset_hash": run["dataset_hash"],
        "has_statistics": False,
        "diff_path": None if diff_path is None else str(diff_path),
        "sidecar_path": None if sidecar is None else str(sidecar),
    }
    if diff is None:
        return row
    doc = diff.document
    worst = diff.worst_segment
    row.update(
        {
            "exit_code": doc["exit_code"],
            "same_dataset": doc["same_dataset"],
            "baseline_dataset_hash": doc["baseline"]["dataset"]["hash"],
            "candidate_dataset_hash": doc["candidate"]["dataset"]["hash"],
            "segment_by": list(diff.regression.segment_by),
            **{name: doc["counts"][name] for name in COUNTS},
            **{name: doc["shift"][name] for name in SHIFT},
            **{
                f"{metric}_{side}": doc["metrics"][metric][side]
                for metric in DIFF_METRICS
                for side in ("baseline", "candidate", "delta")
            },
            "worst_segment_key": None if worst is None else worst["key"],
            "worst_segment_value": None if worst is None else worst["value"],
            "worst_segment_accuracy_drop": None if worst is None else worst["accuracy_drop"],
            "n_changes": len(doc["changes"]),
            "has_statistics": diff.statistics is not None,
        }
    )
    return row


def change_rows(base: dict[str, Any], diff: Diff) -> list[dict[str, Any]]:
    return [
        {
            **base,
            "position": i,
            "case_id": c["case_id"],
            "kind": c["kind"],
            "input_preview": preview(c["input"], PREVIEW_WIDTH),
            "input_json": to_json(c["input"]),
            "expected": c["expected"],
            "baseline_selected": c["baseline_selected"],
            "candidate_selected": c["candidate_selected"],
            "baseline_confidence": c["baseline_confidence"],
            "candidate_confidence": c["candidate_confidence"],
            "tv_distance": c["tv_distance"],
            "error": c["error"],
        }
        for i, c in enumerate(diff.document["changes"])
    ]


_SEGMENT_FIELDS = (
    "matched", "compared", "baseline_accuracy", "candidate_accuracy", "accuracy_drop",
    "answer_flip_rate", "gated",
)  # fmt: skip


def segment_rows(base: dict[str, Any], diff: Diff) -> list[dict[str, Any]]:
    worst = diff.worst_segment
    return [
        {
            **base,
            "position": i,
            "segment_key": s["key"],
            "segment_value": s["value"],
            **{k: s[k] for k in _SEGMENT_FIELDS},
            "is_worst": s is worst,
        }
        for i, s in enumerate(diff.document["segments"])
    ]


def regression_check_rows(base: dict[str, Any], diff: Diff) -> list[dict[str, Any]]:
    """The diff's checks (as the gate modes decided them), with how each was judged."""
    records = diff.statistics["gates"] if diff.statistics is not None else None
    rows = []
    for i, check in enumerate(diff.document["checks"]):
        rec = records[i] if records is not None else None
        segment = rec.get("segment") if rec is not None else None
        rows.append(
            {
                **base,
                "source": SOURCE,
                **check,
                "mode": "point" if rec is None else rec["mode"],
                "p_value": None if rec is None else rec["p_value"],
                "alpha": None if rec is None else rec["alpha"],
                "ci_low": None if rec is None else rec["low"],
                "ci_high": None if rec is None else rec["high"],
                "confidence": None if rec is None else rec["confidence"],
                "test": None if rec is None else rec["test"],
                "segment_key": None if segment is None else segment["key"],
                "segment_value": None if segment is None else segment["value"],
            }
        )
    return rows


def no_baseline_message(reason: str) -> str:
    return f"no baseline: {reason}; nothing to compare, the gate holds"


def no_baseline_check_rows(
    base: dict[str, Any], regression: Regression, reason: str
) -> list[dict[str, Any]]:
    """Every regression gate passes when there is nothing to compare against."""
    return [
        {
            **base,
            "source": SOURCE,
            "gate": gate,
            "level": level,
            "metric": REGRESSION_GATES[gate],
            "comparison": "<=",
            "threshold": limit,
            "value": None,
            "status": PASS,
            "message": no_baseline_message(reason),
            "mode": None,
        }
        for gate, limit, level in configured_gates(regression)
    ]


def _blocks(statistics: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """``(segment columns, block)``: the whole diff, then every segment."""
    out = [({"segment_key": None, "segment_value": None, "gated": None}, statistics["overall"])]
    out += [
        ({"segment_key": s["key"], "segment_value": s["value"], "gated": s["gated"]}, s)
        for s in statistics["segments"]
    ]
    return out


def interval_rows(base: dict[str, Any], statistics: dict[str, Any]) -> list[dict[str, Any]]:
    confidence = statistics["settings"]["confidence"]
    rows = []
    for where, block in _blocks(statistics):
        common = {**base, **where, "matched": block["matched"], "confidence": confidence}
        for metric, sides in block["metrics"].items():
            for side in ("baseline", "candidate", "delta"):
                entry = sides[side]
                rows.append(
                    {
                        **common,
                        "metric": metric,
                        "side": side,
                        "value": entry["value"],
                        "low": entry["low"],
                        "high": entry["high"],
                        "method": entry["method"],
                        "p_value_candidate_worse": entry.get("p_value_candidate_worse"),
                        "test": entry.get("test"),
                    }
                )
        for metric, entry in block["shift"].items():
            rows.append(
                {
                    **common,
                    "metric": metric,
                    "side": "shift",
                    "value": entry["value"],
                    "low": entry["low"],
                    "high": entry["high"],
                    "method": entry["method"],
                    "p_value_candidate_worse": None,
                    "test": None,
                }
            )
    return rows


def statistical_test_rows(base: dict[str, Any], statistics: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for where, block in _blocks(statistics):
        common = {**base, **where, "matched": block["matched"], "compared": block["compared"]}
        mc, err = block["mcnemar"], block["errors"]
        rows.append(
            {
                **common,
                "test": "mcnemar_exact",
                "n_pairs": mc["n_pairs"],
                "baseline_only": mc["baseline_only_correct"],
                "candidate_only": mc["candidate_only_correct"],
                "p_value": mc["p_value"],
                "p_value_candidate_worse": mc["p_value_candidate_worse"],
            }
        )
        rows.append(
            {
                **common,
                "test": "sign_test_exact",
                "n_pairs": err["newly_errored"] + err["recovered"],
                "baseline_only": err["newly_errored"],
                "candidate_only": err["recovered"],
                "p_value": err["p_value"],
                "p_value_candidate_worse": err["p_value_candidate_worse"],
            }
        )
    return rows
