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

The public names are re-exported here; existing imports of ``summary``'s names keep working.
"""

from decguard_pipeline.core.calibration.abstention import (
    Abstention,
    binomial_cdf,
    guaranteed_threshold,
)
from decguard_pipeline.core.calibration.binned import (
    classwise_ece,
    debiased_ece,
    l2_ece,
    per_label_ece,
    top_label_ece,
)
from decguard_pipeline.core.calibration.decomposition import (
    Decomposition,
    classwise_brier_decomposition,
    corp_decomposition,
    isotonic_fit,
    score_decompositions,
)
from decguard_pipeline.core.calibration.recalibration import (
    Scores,
    TemperatureScaling,
    fit_temperature,
    scale,
    temperature_scaling,
)
from decguard_pipeline.core.calibration.section import (
    CalibrationSection,
    SectionSettings,
    calibration_section,
)
from decguard_pipeline.core.calibration.smooth import (
    ReliabilityCurve,
    SmoothECE,
    smooth_calibration,
    smooth_ece,
    smooth_ece_at,
    smooth_ece_bandwidth,
)
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
    "Abstention",
    "CalibrationSection",
    "Decomposition",
    "ReliabilityCurve",
    "Scores",
    "SectionSettings",
    "SmoothECE",
    "TemperatureScaling",
    "binomial_cdf",
    "calibration_section",
    "calibration_summary",
    "classwise_brier_decomposition",
    "classwise_ece",
    "confidence_gap",
    "corp_decomposition",
    "debiased_ece",
    "equal_mass_edges",
    "equal_mass_reliability",
    "fit_temperature",
    "gap_direction",
    "guaranteed_threshold",
    "isotonic_fit",
    "l2_ece",
    "mean_confidence",
    "metadata_groups",
    "per_label_ece",
    "scale",
    "score_decompositions",
    "smooth_calibration",
    "smooth_ece",
    "smooth_ece_at",
    "smooth_ece_bandwidth",
    "temperature_scaling",
    "top_label_ece",
]
