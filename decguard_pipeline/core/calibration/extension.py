"""The calibration measures as a pipeline extension: what a golden run reports with
``pipeline.calibration_measures`` (or a calibration gate) in its contract.

:func:`calibration_extension` measures the labeled, decided cases of one result set with
:func:`~decguard_pipeline.core.calibration.section.calibration_section`, checks the contract's
calibration gates (``core/calibration/gates.py``) and returns the sidecar section
``calibration``: the settings as applied, every measure (``CalibrationSection.to_dict()``),
``headline`` (one number per measure: the warehouse's ``calibration`` rows, ``list metrics``),
the checks and their ``status``. DecGuard's report is never touched; the CLI prints the section
after DecGuard's layout (``core/calibration/render.py``) and exits with the worst of DecGuard's
status and ``status``. Pure: the callers (``runs/golden.py``, the golden steps) attach it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from decguard_pipeline.core.contract import Contract
from decguard_pipeline.core.contract.calibration_measures import CalibrationMeasures
from decguard_pipeline.core.contract.extension_gates import CalibrationGates
from decguard_pipeline.core.gates import overall_status
from decguard_pipeline.core.results import CaseResults

if TYPE_CHECKING:
    from decguard_pipeline.core.calibration.section import SectionSettings

SECTION = "calibration"  # the sidecar section's name (and the warehouse table's)


def measures_settings(contract: Contract) -> CalibrationMeasures | None:
    """The contract's ``pipeline.calibration_measures``; its defaults when only a calibration
    gate is set; None when the contract uses neither (DecGuard's behaviour)."""
    p = contract.pipeline
    if p is None:
        return None
    if p.calibration_measures is not None:
        return p.calibration_measures
    if p.requirements.owned(CalibrationGates) or p.warnings.owned(CalibrationGates):
        return CalibrationMeasures()
    return None


def applied_settings(measures: CalibrationMeasures, contract: Contract) -> dict[str, Any]:
    """The settings with their defaults resolved (``bins`` from ``evaluation``)."""
    return {**measures.model_dump(), "bins": measures.bins or contract.evaluation.calibration_bins}


def section_settings(applied: dict[str, Any]) -> SectionSettings:
    """The library's settings for the contract's (applied) ones."""
    from decguard_pipeline.core.calibration.section import SectionSettings

    return SectionSettings(
        n_bins=applied["bins"],
        alpha=applied["alpha"],
        delta=applied["delta"],
        folds=applied["folds"],
        n_bootstrap=applied["bootstrap_resamples"],
        level=applied["confidence"],
        seed=applied["seed"],
    )


def labeled_rows(results: CaseResults) -> np.ndarray:
    """The labeled, decided cases: what every calibration measure is computed over."""
    return results.ok & (results.expected_index >= 0)


def labeled_inputs(results: CaseResults) -> tuple[np.ndarray, np.ndarray]:
    """``(probabilities (n, k), expected label index (n,))`` of the labeled, decided cases in
    dataset order."""
    rows = labeled_rows(results)
    return results.probs[rows], results.expected_index[rows]


def labeled_logits(results: CaseResults) -> tuple[np.ndarray, str]:
    """``(logits (n, k), source)`` of the labeled, decided cases
    (``core/calibration/logits.results_logits``)."""
    from decguard_pipeline.core.calibration.logits import results_logits

    rows = np.flatnonzero(labeled_rows(results))
    metadata = [results.result_metadata[i] for i in rows.tolist()]
    return results_logits(results.probs[rows], metadata, results.labels)


def calibration_extension(results: CaseResults, contract: Contract) -> dict[str, Any] | None:
    """The sidecar section ``calibration`` of a result set; None when the contract does not
    ask for it."""
    measures = measures_settings(contract)
    if measures is None:
        return None
    # the measures are imported when asked for: a contract without them pays nothing
    from decguard_pipeline.core.calibration.gates import calibration_checks
    from decguard_pipeline.core.calibration.section import calibration_section

    applied = applied_settings(measures, contract)
    probs, expected = labeled_inputs(results)
    logits, source = labeled_logits(results)
    section = calibration_section(
        probs, expected, section_settings(applied), logits=logits, logits_source=source
    )
    p = contract.pipeline
    assert p is not None  # measures_settings returned settings
    checks = calibration_checks(
        section,
        probs,
        expected,
        requirements=p.requirements.owned(CalibrationGates),
        warnings=p.warnings.owned(CalibrationGates),
    )
    measured = section.to_dict()
    del measured["settings"]  # the library's names; the contract's are above
    return {
        "status": overall_status(checks),
        "settings": applied,
        **measured,
        "headline": section.headline(),
        "checks": checks,
    }
