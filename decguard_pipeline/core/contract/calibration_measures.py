"""``pipeline.calibration_measures``: calibration beyond bins for every golden run.

Smooth ECE with a bootstrap interval, top-label, class-wise and debiased ECE, the CORP
decomposition of the Brier score and log loss, cross-validated temperature scaling and the
abstention threshold with a guaranteed selective risk (``core/calibration``, docs/metrics.md).
Present (even empty: ``calibration_measures: {}``) or with any calibration gate under
``pipeline.requirements`` / ``pipeline.warnings``, they are measured on every golden run;
absent, DecGuard's behaviour. The names follow ``pipeline.statistics`` and
``pipeline.calibration``.
"""

from __future__ import annotations

from pydantic import Field

from decguard_pipeline.core.validation import Strict


class CalibrationMeasures(Strict):
    # equal-width bins of the top-label and class-wise ECE, equal-mass bins of the debiased
    # one, and the ECE before/after temperature scaling; default: evaluation.calibration_bins
    bins: int | None = Field(default=None, ge=1, le=1000)
    alpha: float = Field(default=0.1, gt=0.0, lt=1.0)
    """Target selective risk of the reported abstention threshold."""
    delta: float = Field(default=0.1, gt=0.0, lt=0.5)
    """Allowed probability that the threshold misses its target (also max_selective_risk's)."""
    folds: int = Field(default=5, ge=2, le=1000)
    """Cross-validation folds of temperature scaling."""
    bootstrap_resamples: int = Field(default=200, ge=0, le=100_000)
    """Resamples of the smooth-ECE interval and curve band (0: no interval)."""
    confidence: float = Field(default=0.95, gt=0.5, lt=1.0)
    """Level of the smooth-ECE interval and band."""
    seed: int = Field(default=0, ge=0, lt=2**63)
    """Seed of the bootstrap and of the fold assignment."""
