"""Calibration measures: does the model's confidence match how often it is right?

``summary`` holds the binned section the guard extension reports today (gap, equal-width and
equal-mass ECE, metadata groups); its public names are re-exported here so existing imports
keep working.
"""

from decguard_pipeline.core.calibration.summary import (
    CALIBRATED,
    MISSING,
    OVER,
    UNDER,
    calibration_summary,
    confidence_gap,
    equal_mass_edges,
    equal_mass_reliability,
    gap_direction,
    mean_confidence,
    metadata_groups,
)

__all__ = [
    "CALIBRATED",
    "MISSING",
    "OVER",
    "UNDER",
    "calibration_summary",
    "confidence_gap",
    "equal_mass_edges",
    "equal_mass_reliability",
    "gap_direction",
    "mean_confidence",
    "metadata_groups",
]
