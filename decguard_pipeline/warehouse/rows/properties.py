"""Rows of the metamorphic properties (``warehouse/schema/properties.py``): every pair, skip,
per-property summary (with the sidecar's Wilson intervals and backend calls) and property
check of a run. ``base`` holds each row's key columns."""

from __future__ import annotations

from typing import Any

from decguard_pipeline.core.gates import overall_status
from decguard_pipeline.core.properties.summary import is_failed
from decguard_pipeline.warehouse.rows.base import input_text, to_json

SOURCE = "properties"  # ``source`` of the rows in ``property_checks``


def _json(value: Any) -> str | None:
    return None if value is None else to_json(value)


def pair_row(pair: dict[str, Any], position: int) -> dict[str, Any]:
    """A pair of the section as a ``property_pairs`` row (without the key columns)."""
    result, comparison, error = pair["result"], pair["comparison"], pair["error"]
    presentation, reduced = pair["presentation"], pair["reduced"]
    comparison = comparison or {}
    probabilities = result["probabilities"] if result is not None else None
    return {
        "position": position,
        "pair_id": pair["id"],
        "property": pair["property"],
        "case_id": pair["case_id"],
        "sample": pair["sample"],
        "steps_json": to_json(pair["steps"]),
        "provenance_json": to_json(pair["provenance"]),
        "input_text": input_text(pair["input"]),
        "input_json": to_json(pair["input"]),
        "presentation_json": _json(presentation),
        "shown_labels": None if presentation is None else [s for s, _ in presentation],
        "labels": None if result is None else result["labels"],
        "probs_after": None if probabilities is None else list(probabilities.values()),
        "probabilities_after": None if probabilities is None else list(probabilities.items()),
        "selected_before": comparison.get("selected_before"),
        "selected_after": comparison.get("selected_after"),
        "confidence_after": None if result is None else result["confidence"],
        "latency_ms": None if result is None else result["latency_ms"],
        "result_model": None if result is None else result["model"],
        "result_model_version": None if result is None else result["model_version"],
        "result_metadata_json": None if result is None else to_json(result["metadata"]),
        "tv_distance": comparison.get("tv_distance"),
        "js_divergence": comparison.get("js_divergence"),
        "max_abs_delta": comparison.get("max_abs_delta"),
        "confidence_delta": comparison.get("confidence_delta"),
        "flipped": comparison.get("flipped"),
        "rank_changed": comparison.get("rank_changed"),
        "level_delta": comparison.get("level_delta"),
        "violations": list(pair["violations"]),
        "violated": bool(pair["violations"]),
        "failed": is_failed(pair),
        "error_kind": None if error is None else error["kind"],
        "error_message": None if error is None else error["message"],
        "reduced_json": _json(reduced),
        "reduced_input_text": None if reduced is None else input_text(reduced["input"]),
        "reduced_backend_calls": None if reduced is None else reduced["backend_calls"],
    }


def summary_row(
    summary: dict[str, Any], extension: dict[str, Any], confidence: float, status: str
) -> dict[str, Any]:
    """DecGuard's summary fields, the Wilson intervals and the calls of one property."""
    row = {k: v for k, v in summary.items() if k != "errors_by_kind"}
    violation = extension["violation_rate_interval"] or [None, None]
    flip = extension["flip_rate_interval"] or [None, None]
    calls = extension["backend_calls"]
    return {
        **row,
        "errors_by_kind_json": to_json(summary["errors_by_kind"]),
        "confidence": confidence,
        "violation_rate_low": violation[0],
        "violation_rate_high": violation[1],
        "flip_rate_low": flip[0],
        "flip_rate_high": flip[1],
        "calls_transformed": calls["transformed"],
        "calls_minimize": calls["minimize"],
        "calls_total": calls["total"],
        "status": status,
    }


def _property_of(gate: str) -> str:
    return gate.split(".", 1)[0]


def property_rows(
    section: dict[str, Any],
    checks: list[dict[str, Any]],
    pipeline: dict[str, Any],
    base: dict[str, Any],
) -> dict[str, list[dict[str, Any]]]:
    """Rows of ``property_pairs``, ``property_skips``, ``property_summaries`` and
    ``property_checks`` from DecGuard's section and checks and the sidecar section."""
    extensions = {e["property"]: e for e in pipeline["summaries"]}
    by_property: dict[str, list[dict[str, Any]]] = {}
    for check in checks:
        by_property.setdefault(_property_of(check["gate"]), []).append(check)
    return {
        "property_pairs": [
            {**base, **pair_row(pair, i)} for i, pair in enumerate(section["pairs"])
        ],
        "property_skips": [
            {**base, "position": i, **skip} for i, skip in enumerate(section["skipped"])
        ],
        "property_summaries": [
            {
                **base,
                "position": i,
                **summary_row(
                    s,
                    extensions[s["property"]],
                    pipeline["confidence"],
                    overall_status(by_property.get(s["property"], [])),
                ),
            }
            for i, s in enumerate(section["summaries"])
        ],
        "property_checks": [
            {**base, "source": SOURCE, **c, "property": _property_of(c["gate"])} for c in checks
        ],
    }
