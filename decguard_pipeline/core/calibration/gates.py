"""Checks of the calibration gates (``CalibrationGates`` under ``pipeline.requirements`` /
``pipeline.warnings``) on a :class:`CalibrationSection`.

DecGuard's semantics (``core.gates.make_check``): inclusive, a number that cannot be computed
fails. ``max_selective_risk: a`` holds when a confidence threshold exists whose selective risk
is at most ``a`` with probability at least 1 − ``delta`` (Learn then Test, ``abstention.py``);
its value is the observed selective risk at that threshold, which is below ``a`` whenever the
guarantee holds (``delta`` < 1/2), and it fails, saying so, when no threshold certifies ``a``.
The section's own abstention (at ``alpha``) is reused when ``a`` equals it.
"""

from __future__ import annotations

import numpy as np

from decguard_pipeline.core.calibration.abstention import Abstention, guaranteed_threshold
from decguard_pipeline.core.calibration.inputs import top_label
from decguard_pipeline.core.calibration.section import CalibrationSection
from decguard_pipeline.core.gates import Check, Comparison, levelled, make_check, table_check

# gate -> (metric: a CalibrationSection.headline() name, comparison that must hold)
CALIBRATION_GATES: dict[str, tuple[str, Comparison]] = {
    "max_smece": ("smece", "<="),
    "max_classwise_ece": ("ece_classwise", "<="),
    "max_miscalibration": ("brier_miscalibration", "<="),
    "max_selective_risk": ("selective_risk", "<="),
}
_NO_CASES = "no labeled, decided cases"


def _detail(section: CalibrationSection, metric: str) -> str:
    s, brier = section.smooth, section.decomposition.get("brier")
    if metric == "smece" and s is not None and s.low is not None:
        return f"{s.level:.0%} interval [{s.low:.4g}, {s.high:.4g}]"
    if metric == "ece_classwise" and section.n:
        return f"{section.labels} labels, {section.settings.n_bins} bins"
    if metric == "brier_miscalibration" and brier is not None:
        return (
            f"of Brier {brier.score:.4g}; discrimination {brier.discrimination:.4g},"
            f" uncertainty {brier.uncertainty:.4g}"
        )
    return ""


def abstention_at(
    section: CalibrationSection, probs: np.ndarray, expected: np.ndarray, alpha: float
) -> Abstention:
    """The guaranteed threshold for target ``alpha`` at the section's ``delta``."""
    if alpha == section.abstention.alpha:
        return section.abstention
    confidence, correct = top_label(np.asarray(probs, dtype=np.float64), np.asarray(expected))
    return guaranteed_threshold(confidence, correct, alpha=alpha, delta=section.settings.delta)


def selective_risk_check(abstention: Abstention, n: int, level: str) -> Check:
    """``max_selective_risk``: pass when a threshold certifies the target."""
    alpha, sure = abstention.alpha, 1 - abstention.delta
    if abstention.threshold is None:
        check = make_check("max_selective_risk", "selective_risk", "<=", alpha, None, level=level)
        check["message"] = (
            f"selective_risk: no confidence threshold keeps it <= {alpha:g} with probability"
            f" >= {sure:g} ({n} labeled, decided cases)"
        )
        return check
    return make_check(
        "max_selective_risk",
        "selective_risk",
        "<=",
        alpha,
        abstention.selective_risk,
        level=level,
        detail=(
            f"guaranteed <= {alpha:g} with probability >= {sure:g} at confidence >= "
            f"{abstention.threshold:g}, coverage {abstention.coverage:.4g}"
        ),
    )


def calibration_checks(
    section: CalibrationSection,
    probs: np.ndarray,
    expected: np.ndarray,
    *,
    requirements: dict[str, float],
    warnings: dict[str, float],
) -> list[Check]:
    """Requirements, then warnings, each in gate field order. ``probs``/``expected``: the
    cases the section was computed over (a selective-risk target other than the section's
    ``alpha`` needs its own threshold)."""
    values = section.headline()
    checks = []
    for level, gate, threshold in levelled(requirements, warnings):
        if gate == "max_selective_risk":
            found = abstention_at(section, probs, expected, threshold)
            checks.append(selective_risk_check(found, section.n, level))
            continue
        metric = CALIBRATION_GATES[gate][0]
        value = values[metric]
        detail = "" if value is None else _detail(section, metric)
        checks.append(
            table_check(
                CALIBRATION_GATES,
                gate,
                threshold,
                value,
                level=level,
                missing=_NO_CASES,
                detail=detail,
            )
        )
    return checks
