"""The calibrator feature's part of the evaluation step (the interface: features.py).

For a contract with calibrator keys under ``pipeline.calibration`` (``split``, ``method``,
``conformal``, …), its group gains ``calibrator``, partitioned by target like
``case_results`` (a part of the evaluation step, ``defs/assets/evaluation.py``): one
calibrator per target (``backend@model_version``), fitted on the calibration split of that
target's golden answers and judged on the held-out ones (``steps/calibrator.py``). The
DecGuard ``report`` waits for it: its sidecar and HTML page show the calibrator. It has no
gates. Contracts without calibrator keys get nothing here.

(No ``from __future__ import annotations``: Dagster reads the context annotations.)
"""

from typing import Any

import dagster as dg

from decguard_pipeline.defs.assets.base import TargetPart, asset_key
from decguard_pipeline.defs.metadata.calibrator import materialisation_metadata
from decguard_pipeline.steps.calibrator import fit_target, fits
from decguard_pipeline.steps.contracts import ContractEntry

NAME = "calibrator"


def enabled(entry: ContractEntry) -> bool:
    return entry.ok and fits(entry)


def parts(entry: ContractEntry) -> list[TargetPart]:
    if not enabled(entry):
        return []
    return [
        TargetPart(
            NAME,
            run=fit_target,
            metadata=materialisation_metadata,
            description=(
                "A calibrator for this target's model version (calibrator.json), fitted on the "
                "calibration split of its golden answers (pipeline.calibration.split) and "
                "judged on the held-out cases: before/after, conformal sets, the suggested "
                "abstain_below and the escalation sweep."
            ),
        )
    ]


def report_inputs(entry: ContractEntry) -> list[dg.AssetKey]:
    """The report waits for the calibrator: its sidecar and page show it."""
    return [asset_key(entry, NAME)] if enabled(entry) else []


def extras(entries: list[ContractEntry], jobs: dict[str, Any]) -> dict[str, list[Any]]:
    return {}  # the contract's evaluate job selects its whole group, the calibrator included
