"""The sidecar section ``calibrator`` (``core/calibration/fitting.py``) -> rows of the
``calibrators``, ``calibrator_metrics`` and ``escalation_sweep`` tables (schema:
``schema/calibrator.py``). The numbers are the section's own: nothing is computed again."""

from __future__ import annotations

from typing import Any

from decguard_pipeline.warehouse.rows.base import to_json

SIDES = ("calibrated", "raw")


def calibrator_row(
    section: dict[str, Any], base: dict[str, Any], path: str | None
) -> dict[str, Any]:
    """One row: what was fitted and its verdicts; ``base``: the keys, backend, model
    version; ``path``: where the calibrator file was written."""
    data, conformal, suggested = (
        section["data"],
        section["conformal"] or {},
        section["abstain_below"],
    )
    return {
        **base,
        "method": section["method"],
        "chosen_by": section["chosen_by"],
        "logits": section["logits"],
        "parameters_json": to_json(section["parameters"]),
        "n_calibration": data["n_calibration"],
        "n_held_out": data["n_held_out"],
        "data_hash": data["hash"],
        "split_json": to_json(data["split"]),
        "selection_json": None if section["selection"] is None else to_json(section["selection"]),
        "top_label_changes": section["top_label_changes"],
        "conformal_method": conformal.get("method"),
        "conformal_alpha": conformal.get("alpha"),
        "conformal_q_hat": conformal.get("q_hat"),
        "conformal_coverage": conformal.get("coverage"),
        "conformal_mean_set_size": conformal.get("mean_set_size"),
        "conformal_singleton_rate": conformal.get("singleton_rate"),
        "abstain_below": suggested["abstain_below"],
        "abstain_alpha": suggested["alpha"],
        "abstain_delta": suggested["delta"],
        "abstain_coverage": suggested["coverage"],
        "abstain_selective_risk": suggested["selective_risk"],
        "calibrator_path": path,
        "section_json": to_json(section),
    }


def metric_rows(section: dict[str, Any], base: dict[str, Any]) -> list[dict[str, Any]]:
    held = section["held_out"]
    return [
        {
            **base,
            "method": section["method"],
            "measure": row["measure"],
            "n_cases": held["n"],
            "before": row["before"],
            "after": row["after"],
            "change": row["change"],
            "low": row["low"],
            "high": row["high"],
            "confidence": held["confidence"] if row["low"] is not None else None,
        }
        for row in held["measures"]
    ]


def sweep_rows(section: dict[str, Any], base: dict[str, Any]) -> list[dict[str, Any]]:
    escalation = section["escalation"]
    n = section["held_out"]["n"]
    return [
        {
            **base,
            "method": section["method"],
            "probabilities": side,
            "threshold": row["threshold"],
            "n_cases": n,
            "answered": row["answered"],
            "handed_off": row["handed_off"],
            "coverage": row["coverage"],
            "hand_off_rate": row["hand_off_rate"],
            "accuracy_answered": row["accuracy_answered"],
            "escalation_cost": escalation["escalation_cost"],
            "escalation_cost_per_1000": row["escalation_cost_per_1000"],
            "backend_cost_per_1000": row["backend_cost_per_1000"],
            "total_cost_per_1000": row["total_cost_per_1000"],
        }
        for side in SIDES
        for row in escalation[side]
    ]
