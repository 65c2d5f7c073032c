"""Calibration measures: does the model's confidence match how often it is right?

One module per job:

* ``summary``: the binned section the guard extension reports (confidence gap, equal-width and
  equal-mass ECE with their reliability tables, metadata groups);
* ``smooth``: smooth ECE with its bandwidth, bootstrap interval and reliability curve;
* ``binned``: top-label and class-wise ECE, the debiased ℓ2 ECE;
* ``decomposition``: CORP split of Brier score and log loss (isotonic regression, PAV);
* ``recalibration``: temperature scaling, cross-validated;
* ``abstention``: the confidence threshold with a guaranteed selective risk;
* ``section``: all of them for one result set (:func:`calibration_section`).

Only ``summary``'s names are re-exported here (the guard extension imports them on every CLI
run); the other measures are imported from their modules, so that importing the package stays
as cheap as before, e.g. ``from decguard_pipeline.core.calibration.section import
calibration_section``.
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
