"""The whole calibration section of one result set, in one call.

:func:`calibration_section` takes the probability matrix of the labeled, decided cases and the
index of each case's expected label, and computes every measure of this package once: smooth
ECE with its interval and reliability curve, top-label and class-wise ECE, the debiased ℓ2 ECE,
the CORP decompositions, cross-validated temperature scaling and the guaranteed abstention
threshold. The result is a frozen dataclass; :meth:`CalibrationSection.to_dict` gives the
JSON-ready nested form (sidecar, UI plot) and :meth:`CalibrationSection.headline` one number
per metric (warehouse row, gates). Nothing here reads files or settings: the caller passes
them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from decguard_pipeline.core.calibration.abstention import Abstention, guaranteed_threshold
from decguard_pipeline.core.calibration.binned import l2_ece, per_label_ece, top_label_ece
from decguard_pipeline.core.calibration.decomposition import Decomposition, score_decompositions
from decguard_pipeline.core.calibration.inputs import multiclass, top_label
from decguard_pipeline.core.calibration.logits import LOG_P
from decguard_pipeline.core.calibration.recalibration import (
    TemperatureScaling,
    temperature_scaling,
)
from decguard_pipeline.core.calibration.smooth import SmoothECE
from decguard_pipeline.core.calibration.smooth_bootstrap import smooth_calibration
from decguard_pipeline.core.exact import fsum

DECOMPOSED = ("brier", "brier_top_label", "log_loss_top_label")


@dataclass(frozen=True)
class SectionSettings:
    n_bins: int = 10  # equal-width (top-label, class-wise) and equal-mass (debiased) bins
    alpha: float = 0.1  # target selective risk of the abstention threshold
    delta: float = 0.1  # allowed probability of missing it
    folds: int = 5  # cross-validation folds of temperature scaling
    n_bootstrap: int = 200  # smooth-ECE resamples
    level: float = 0.95  # smooth-ECE interval level
    seed: int = 0  # bootstrap resamples and fold assignment


@dataclass(frozen=True)
class CalibrationSection:
    n: int  # cases measured (labeled and decided)
    labels: int  # k, the columns of the probability matrix
    accuracy: float | None  # top-label: the selected label is the expected one
    mean_confidence: float | None
    ece_top_label: float | None  # DecGuard's ece
    ece_classwise: float | None
    ece_per_label: tuple[float, ...]
    ece_l2: float | None  # plug-in ℓ2 ECE, equal-mass bins
    ece_l2_debiased: float | None  # Kumar et al.
    smooth: SmoothECE | None
    decomposition: dict[str, Decomposition | None]
    recalibration: TemperatureScaling | None
    abstention: Abstention
    settings: SectionSettings

    def to_dict(self) -> dict[str, Any]:
        """Nested plain data (dicts, lists, floats, ints, None, bools): ready for JSON."""
        out = asdict(self)
        out["ece_per_label"] = list(self.ece_per_label)
        if self.smooth is not None:
            curve = out["smooth"]["curve"]
            for key, value in curve.items():
                curve[key] = None if value is None else list(value)
        if self.recalibration is not None:
            out["recalibration"]["fold_temperatures"] = list(self.recalibration.fold_temperatures)
        return out

    def headline(self) -> dict[str, float | None]:
        """One number per metric, for a warehouse row or a gate."""
        s, r, a = self.smooth, self.recalibration, self.abstention
        out: dict[str, float | None] = {
            "smece": s.value if s else None,
            "smece_low": s.low if s else None,
            "smece_high": s.high if s else None,
            "smece_bandwidth": s.bandwidth if s else None,
            "ece_top_label": self.ece_top_label,
            "ece_classwise": self.ece_classwise,
            "ece_l2": self.ece_l2,
            "ece_l2_debiased": self.ece_l2_debiased,
        }
        for name in DECOMPOSED:
            d = self.decomposition.get(name)
            for part in ("miscalibration", "discrimination", "uncertainty"):
                out[f"{name}_{part}"] = getattr(d, part) if d else None
        out.update(
            {
                "temperature": r.temperature if r else None,
                "ece_before_scaling": r.before.ece if r else None,
                "ece_after_scaling": r.after.ece if r else None,
                "nll_before_scaling": r.before.nll if r else None,
                "nll_after_scaling": r.after.nll if r else None,
                "brier_before_scaling": r.before.brier if r else None,
                "brier_after_scaling": r.after.brier if r else None,
                "abstention_threshold": a.threshold,
                "abstention_coverage": a.coverage,
                "abstention_selective_risk": a.selective_risk,
            }
        )
        return out


def calibration_section(
    probs: np.ndarray,
    expected: np.ndarray,
    settings: SectionSettings | None = None,
    *,
    logits: np.ndarray | None = None,
    logits_source: str = LOG_P,
    **overrides: Any,
) -> CalibrationSection:
    """Every calibration measure of one result set.

    ``probs`` is the (n, k) probability matrix of the labeled, decided cases in the contract's
    label order, ``expected`` the index of each case's expected label. Settings come from
    ``settings`` (defaults: :class:`SectionSettings`) with keyword ``overrides`` on top
    (e.g. ``alpha=0.05, seed=7``). ``logits`` (default ``log p``, ``logits_source`` saying
    which) are what temperature scaling rescales. No cases: every number None, the
    abstention without a threshold. Deterministic for a given seed."""
    s = SectionSettings(**{**asdict(settings or SectionSettings()), **overrides})
    p, e = multiclass(probs, expected)
    n, k = p.shape
    confidence, correct = top_label(p, e)
    per_label = per_label_ece(p, e, s.n_bins)
    return CalibrationSection(
        n=n,
        labels=k,
        accuracy=fsum(correct) / n if n else None,
        mean_confidence=fsum(confidence) / n if n else None,
        ece_top_label=top_label_ece(p, e, s.n_bins),
        ece_classwise=float(per_label.mean()) if n else None,
        ece_per_label=tuple(per_label.tolist()),
        ece_l2=l2_ece(confidence, correct, s.n_bins, debias=False),
        ece_l2_debiased=l2_ece(confidence, correct, s.n_bins, debias=True),
        smooth=smooth_calibration(
            confidence, correct, n_bootstrap=s.n_bootstrap, level=s.level, seed=s.seed
        ),
        decomposition=score_decompositions(p, e),
        recalibration=temperature_scaling(
            p,
            e,
            logits=logits,
            logits_source=logits_source,
            folds=s.folds,
            seed=s.seed,
            n_bins=s.n_bins,
        ),
        abstention=guaranteed_threshold(confidence, correct, alpha=s.alpha, delta=s.delta),
        settings=s,
    )
