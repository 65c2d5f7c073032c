"""What a day is compared with (``pipeline.production.baseline``): the newest earlier day
with ingested records, the golden run of the deployed target, a pinned file, or nothing."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

from decguard_pipeline.core.contract import LoadedContract
from decguard_pipeline.core.errors import DecGuardError
from decguard_pipeline.core.production.check import load_baseline
from decguard_pipeline.core.production.loader import RecordSet
from decguard_pipeline.core.production.metrics import production_metrics
from decguard_pipeline.core.production.report import Baseline
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.steps.production.ingest import load_lines, load_stored
from decguard_pipeline.steps.production.sources import day_before, settings, stored_days
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline.warehouse.rows.production import golden_lines

PREVIOUS, GOLDEN, NONE, PINNED = "previous", "golden", "none", "file"
DEFAULT_BACKEND = "default"


@dataclass
class ChosenBaseline:
    rule: str  # previous | golden | file | none
    ref: str | None  # the day, target or file compared with
    reason: str
    baseline: Baseline | None = None


def dataset_baseline(loaded: LoadedContract, data: RecordSet) -> Baseline:
    """What ``check --baseline RECORDS`` builds from a records file."""
    info = {
        "source": "dataset",
        "path": data.path,
        "hash": data.hash,
        "n_records": len(data),
        "metrics": production_metrics(data.columns, loaded.contract.evaluation),
    }
    return Baseline(info, data.columns)


def deployed_target(contract: str, warehouse: Warehouse) -> dict[str, Any] | None:
    """The newest target of the ``default`` backend whose golden requirements passed."""
    from decguard_pipeline.steps.diff import known_targets

    passing = [
        k
        for k in known_targets(contract, warehouse)
        if k["backend"] == DEFAULT_BACKEND and k["requirements_passed"]
    ]
    return passing[-1] if passing else None


def choose_baseline(
    entry: ContractEntry, day: str, warehouse: Warehouse, folder: Path
) -> ChosenBaseline:
    loaded = entry.require()
    rule = settings(loaded).baseline
    if rule == NONE:
        return ChosenBaseline(NONE, None, "pipeline.production.baseline is none")
    if rule == PREVIOUS:
        earlier = [d for d in stored_days(entry.key, warehouse) if d < day]
        if not earlier:
            return ChosenBaseline(PREVIOUS, None, f"no day before {day} with ingested records")
        data, _, _ = load_stored(entry, earlier[-1], warehouse, segments=False)
        reason = "previous day" if date.fromisoformat(earlier[-1]) == day_before(day) else (
            "newest earlier day with ingested records"
        )  # fmt: skip
        return ChosenBaseline(PREVIOUS, earlier[-1], reason, dataset_baseline(loaded, data))
    if rule == GOLDEN:
        target = deployed_target(entry.key, warehouse)
        if target is None:
            return ChosenBaseline(
                GOLDEN, None, "no target of the default backend whose golden requirements passed"
            )
        table = warehouse.read_run("case_results", entry.key, target["target"], target["run_id"])
        if table is None:
            raise DecGuardError(f"{entry.key}: case results of run {target['run_id']} are missing")
        ref = f"warehouse:{entry.key}/{target['target']}/{target['run_id']}"
        lines = golden_lines(table, loaded.contract.spec().name)
        data, digest = load_lines(lines, loaded, folder, label=ref, segments=False)
        data = dataclasses.replace(data, path=ref, hash=digest)
        reason = "golden run of the deployed target (newest passing target of the default backend)"
        return ChosenBaseline(GOLDEN, target["target"], reason, dataset_baseline(loaded, data))
    path = loaded.resolve(rule)
    return ChosenBaseline(PINNED, str(path), "pinned in pipeline.production.baseline",
                          load_baseline(loaded, path))  # fmt: skip
