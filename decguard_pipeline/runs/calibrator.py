"""Calibrators in a run: fit one on a golden run (``calibrate``, ``test`` with the contract's
calibrator keys, the ``calibrator`` asset) and apply one to a run's decisions (``test
--calibrator``, the contract's ``pipeline.calibration.apply``). No Dagster, no warehouse.

Fitting works on the model's raw answers; applying replaces each decision by its calibrated
one (``core/calibration/applying.py``), so DecGuard's report of a calibrated run is the
report of what the calibrated decider decides. The ``calibrated`` sidecar section says which
calibrator and puts the raw and calibrated golden numbers side by side.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from decguard_pipeline.core.contract import LoadedContract
from decguard_pipeline.core.dataset import Dataset, load_dataset
from decguard_pipeline.core.results import CaseResults, served_version

if TYPE_CHECKING:  # the calibration modules are imported by the runs that use them
    from decguard_pipeline.core.calibration.artifact import LoadedCalibrator
    from decguard_pipeline.core.calibration.fitting import Fitted, Identity
    from decguard_pipeline.core.report.golden import Report

CALIBRATED = "calibrated"  # the sidecar section of a run whose decisions were calibrated
DOCUMENT = "calibrator_document"  # Report.products: the fitted calibrator.json document


def calibrator_for(loaded: LoadedContract, path: str | Path | None) -> LoadedCalibrator | None:
    """The calibrator decisions apply: ``path`` (a ``--calibrator`` option, relative to the
    working directory), else the contract's ``pipeline.calibration.apply`` (relative to the
    contract), else None."""
    settings = calibration_settings(loaded.contract)
    named = settings.apply if settings is not None else None
    if path is None and named is None:
        return None
    from decguard_pipeline.core.calibration.artifact import load_calibrator

    return load_calibrator(path if path is not None else loaded.resolve(named))


def calibration_dataset(loaded: LoadedContract, *, forced: bool = False) -> Dataset | None:
    """The contract's calibration dataset (``pipeline.calibration.split.dataset``) when a
    calibrator is fitted (``forced``: ``calibrate`` fits whatever the contract says)."""
    settings = calibration_settings(loaded.contract)
    if not (forced or (settings is not None and settings.fits_calibrator)):
        return None
    split = settings.split if settings is not None else None
    if split is None or split.dataset is None:
        return None
    return load_dataset(loaded.resolve(split.dataset), loaded.contract.spec())


def calibrate(
    raw: CaseResults, calibrator: LoadedCalibrator, backend: dict[str, Any]
) -> CaseResults:
    """A run's decisions calibrated, checked against the calibrator's target (``backend``:
    the backend's metadata, whose model version counts when an answer reports none)."""
    from decguard_pipeline.core.calibration.applying import calibrate_results

    return calibrate_results(raw, calibrator, model_version=backend["model_version"])


def calibration_settings(contract: Any) -> Any:
    pipeline = contract.pipeline
    return None if pipeline is None else pipeline.calibration


def identity_of(report: Report, results: CaseResults) -> Identity:
    from decguard_pipeline.core.calibration.fitting import Identity

    backend = report.document["backend"]
    return Identity(
        backend=backend["name"],
        provider=backend["provider"],
        model=backend["model"],
        model_version=served_version(backend, results),
    )


def fit_for_report(
    loaded: LoadedContract,
    report: Report,
    raw: CaseResults,
    *,
    calibration: CaseResults | None = None,
    calibration_data: Dataset | None = None,
    method: str | None = None,
) -> Fitted:
    """Fit and judge a calibrator on a golden run (``raw``: its answers before any
    calibrator) and attach it: the ``calibrator`` sidecar section and, in
    ``report.products``, the ``calibrator.json`` document."""
    contract = loaded.contract
    from decguard_pipeline.core.calibration.fitting import SECTION, fit_calibrator, fit_settings

    usage = report.extensions.get("usage") or {}
    dataset = report.document["dataset"]
    fitted = fit_calibrator(
        raw,
        fit_settings(contract, method=method),
        identity_of(report, raw),
        contract={
            "name": contract.spec().name,
            "labels": list(contract.labels),
            "hash": loaded.hash,
        },
        dataset={"path": dataset["path"], "hash": dataset["hash"]},
        calibration=calibration,
        calibration_dataset=(
            None
            if calibration_data is None
            else {"path": str(calibration_data.path), "hash": calibration_data.hash}
        ),
        backend_cost_per_1000=usage.get("cost_per_1000"),
    )
    report.extensions[SECTION] = fitted.section
    report.products[DOCUMENT] = fitted.document
    return fitted


GOLDEN_NUMBERS = (
    "accuracy",
    "macro_f1",
    "ece",
    "brier",
    "nll",
    "coverage",
    "selective_accuracy",
)


def calibrated_section(
    loaded: LoadedContract, calibrator: LoadedCalibrator, raw: CaseResults, report: Report
) -> dict[str, Any]:
    """The ``calibrated`` section: which calibrator, and DecGuard's golden numbers of the
    raw answers next to the calibrated decisions' (the report's own)."""
    from decguard_pipeline.core.golden.metrics import gate_values
    from decguard_pipeline.core.report.golden import metrics_for

    raw_values = gate_values(metrics_for(raw, loaded.contract.evaluation))
    calibrated_values = gate_values(report.document["metrics"])
    numbers = []
    for name in GOLDEN_NUMBERS:
        before, after = raw_values.get(name), calibrated_values.get(name)
        if before is None and after is None:
            continue
        numbers.append(
            {
                "metric": name,
                "raw": before,
                "calibrated": after,
                "change": None if before is None or after is None else after - before,
            }
        )
    data = calibrator.document.get("data") or {}
    fitted_dataset = (data.get("dataset") or {}).get("hash")
    split = data.get("split") or {}
    # a calibrator fitted on a share of this very dataset saw some of these cases
    overlap = fitted_dataset == report.document["dataset"]["hash"] and "fraction" in split
    return {
        **calibrator.note(),
        "logits": calibrator.logits,
        "fitted_on": data.get("hash"),
        "fitted_on_these_cases": data.get("n_calibration") if overlap else 0,
        "conformal": None if calibrator.conformal is None else calibrator.conformal.model_dump(),
        "metrics": numbers,
    }


def products_path(report_path: Path) -> Path:
    """Where a report's fitted calibrator goes: ``<stem>.calibrator.json`` beside it."""
    return report_path.with_name(f"{report_path.stem}.calibrator.json")


def write_calibrator(path: Path, document: dict[str, Any]) -> Path:
    """Write a ``calibrator.json`` atomically (a reader never sees half a file)."""
    from decguard_pipeline.core.report.jsonio import write_document

    write_document(path, document, what="calibrator")
    return path


def write_picture(section: dict[str, Any], path: Path) -> Path:
    """The escalation sweep's PNG (``core/report/plots.escalation_png``)."""
    from decguard_pipeline.core.report.plots import escalation_png, write_png

    return write_png(path, escalation_png(section, title=section["target"]))


def write_products(report: Report, report_path: Path) -> list[Path]:
    """A fitted calibrator beside its report: ``<stem>.calibrator.json`` and the escalation
    sweep ``<stem>.escalation.png``."""
    document = report.products.get(DOCUMENT)
    if document is None:
        return []
    picture = report_path.with_name(f"{report_path.stem}.escalation.png")
    return [
        write_calibrator(products_path(report_path), document),
        write_picture(report.extensions["calibrator"], picture),
    ]
