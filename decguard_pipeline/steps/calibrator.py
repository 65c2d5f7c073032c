"""The ``calibrator`` asset's step: fit a calibrator for one target and store it.

For a contract with calibrator keys under ``pipeline.calibration`` (``split``, ``method``,
``conformal``, …): the target's golden run and its report are the run's own (read back from
the warehouse when the asset runs alone; its answers are never asked again), the calibration
dataset is decided through the run's backend when the contract names one, and
``runs/calibrator.fit_for_report`` fits on the calibration cases and judges on the held-out
ones, as ``decguard-pipeline calibrate`` does. The ``calibrator.json`` goes to
``calibrator_files/contract=…/target=…/<time>_<run>.calibrator.json``; the section to the
``calibrators``, ``calibrator_metrics`` and ``escalation_sweep`` tables, where the report
step (``steps/golden.write_report``) reads it back for its sidecar and HTML page.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from decguard_pipeline.core.report.golden import with_property_results
from decguard_pipeline.steps.base import Step
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.warehouse.rows.calibrator import calibrator_row, metric_rows, sweep_rows
from decguard_pipeline.warehouse.rows.golden import run_base

FILES = "calibrator_files"  # the folder of calibrator.json files beside the tables


def fits(entry: ContractEntry) -> bool:
    """Whether the contract's targets get a calibrator."""
    pipeline = entry.require().contract.pipeline
    settings = pipeline.calibration if pipeline is not None else None
    return settings is not None and settings.fits_calibrator


@dataclass
class FittedTarget:
    """The section, the calibrator document and the file it was written to."""

    section: dict[str, Any]
    document: dict[str, Any]
    path: Path


def fit_target(entry: ContractEntry, target: str, step: Step) -> FittedTarget:
    """Fit the target's calibrator on its newest golden run (this run's when it made one);
    write the file and the rows."""
    from decguard_pipeline.runs.calibrator import (
        calibration_dataset,
        fit_for_report,
        write_calibrator,
    )
    from decguard_pipeline.steps.golden import golden_of

    loaded = entry.require()
    wh = step.warehouse
    golden = golden_of(entry, target, step)
    data = calibration_dataset(loaded)
    calibration = None
    if data is not None:
        from decguard_pipeline.runs.golden import decide_dataset
        from decguard_pipeline.steps.backend import target_backend

        with target_backend(entry, target, step) as asking:  # the run's backend
            calibration = decide_dataset(loaded, data, asking.backend)
    # on a copy: the section the fit adds is the report step's to add (from its rows)
    report = with_property_results(golden.report, loaded)
    fitted = fit_for_report(
        loaded, report, golden.evaluated.results, calibration=calibration,
        calibration_data=data,
    )  # fmt: skip
    folder = wh.files_dir(entry.key, target, FILES)
    path = Path(folder) / f"{step.at:%Y%m%dT%H%M%S%fZ}_{step.run_id}.calibrator.json"
    write_calibrator(path, fitted.document)
    where = step.keys(entry.key, target)
    base = run_base(where, golden.evaluated.run)
    wh.write("calibrators", [calibrator_row(fitted.section, base, str(path))], **where)
    wh.write("calibrator_metrics", metric_rows(fitted.section, base), **where)
    wh.write("escalation_sweep", sweep_rows(fitted.section, base), **where)
    return FittedTarget(fitted.section, fitted.document, path)
