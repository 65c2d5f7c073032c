"""What the UI shows of the calibration measures on ``golden_metrics``: the smoothed
reliability diagram, the headline numbers (numeric metadata, so Dagster plots them per
partition) and the calibration gates. Built from the sidecar section alone."""

from __future__ import annotations

from typing import Any

import dagster as dg

from decguard_pipeline.core.html.figures import data_uri, smooth_reliability_figure
from decguard_pipeline.defs.metadata.base import checks_table, metrics_table

# headline measures shown as numbers of their own (the whole headline is in the table)
NUMERIC = (
    "smece",
    "ece_classwise",
    "brier_miscalibration",
    "brier_discrimination",
    "temperature",
    "abstention_threshold",
    "abstention_coverage",
)


def calibration_metadata(section: dict[str, Any] | None, *, title: str = "") -> dict[str, Any]:
    """Metadata entries prefixed ``calibration``; none without the section."""
    if section is None:
        return {}
    headline = section["headline"]
    svg = smooth_reliability_figure(section, title=title)
    image = f"![smooth reliability]({data_uri(svg)})"
    meta: dict[str, Any] = {
        "calibration_diagram": dg.MetadataValue.md(image),
        "calibration": metrics_table(headline),
        "calibration_status": section["status"].upper(),
    }
    meta.update(
        {f"calibration/{k}": float(headline[k]) for k in NUMERIC if headline[k] is not None}
    )
    if section["checks"]:
        meta["calibration_gates"] = checks_table(section["checks"])
    return meta
