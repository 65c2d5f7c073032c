"""What the UI shows of a target's calibrator: the method and its parameters, the held-out
numbers before and after (with the paired bootstrap intervals), the conformal sets, the
suggested ``abstain_below``, the escalation sweep as a picture and a table, and the file.
Built from the section alone (``core/calibration/fitting.py``)."""

from __future__ import annotations

from typing import Any

import dagster as dg

from decguard_pipeline.core.html.escalation import escalation_figure
from decguard_pipeline.core.html.figures import data_uri
from decguard_pipeline.defs.metadata.base import markdown_image, number, numbers, table

HELD_OUT = [("measure", "string"), ("before", "float"), ("after", "float"),
            ("change", "float"), ("low", "float"), ("high", "float")]  # fmt: skip
SWEEP = [("threshold", "float"), ("coverage", "float"), ("accuracy_answered", "float"),
         ("hand_off_rate", "float"), ("total_cost_per_1000", "float")]  # fmt: skip


def materialisation_metadata(done: Any) -> dict[str, Any]:
    """``done``: ``steps.calibrator.FittedTarget``."""
    section = done.section
    held = section["held_out"]
    measures = {row["measure"]: row for row in held["measures"]}
    suggested = section["abstain_below"]
    conformal = section.get("conformal") or {}
    sweep = section["escalation"]["calibrated"]
    picture = markdown_image("escalation sweep", data_uri(escalation_figure(section)))
    meta: dict[str, Any] = {
        "method": section["method"],
        "chosen_by": section["chosen_by"],
        "target": section["target"],
        "logits": section["logits"],
        "parameters": dg.MetadataValue.json(section["parameters"]),
        "calibration_cases": section["data"]["n_calibration"],
        "held_out_cases": held["n"],
        "data_hash": section["data"]["hash"],
        "held_out": table(held["measures"], HELD_OUT),
        **numbers({f"{m}/after": row["after"] for m, row in measures.items()}),
        **numbers({f"{m}/before": row["before"] for m, row in measures.items()}),
        "escalation_sweep": dg.MetadataValue.md(picture),
        "escalation": table(sweep, SWEEP, limit=len(sweep)),
        "calibrator_file": dg.MetadataValue.path(str(done.path)),
    }
    if section["method"] == "temperature":
        meta["temperature"] = number(section["parameters"]["temperature"])
    if suggested["abstain_below"] is not None:
        meta["suggested_abstain_below"] = number(suggested["abstain_below"])
    if conformal:
        meta.update(
            numbers(
                {
                    "conformal/coverage": conformal["coverage"],
                    "conformal/mean_set_size": conformal["mean_set_size"],
                }
            )
        )
    return meta
