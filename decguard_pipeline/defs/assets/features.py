"""Features beyond the golden evaluation plug into every contract's asset group here.

Each feature module (``defs/assets/<feature>.py``) provides:

* ``assets(entry) -> list[AssetsDefinition]`` — its assets for one contract (same group,
  usually partitioned by target with ``targets_partitions(entry.key)``);
* ``checks(entry) -> list[AssetChecksDefinition]`` — its gates as asset checks;
* ``report_inputs(entry) -> list[AssetKey]`` — assets the DecGuard report must wait for;
* ``off_target(entry) -> list[AssetKey]`` (optional) — its assets that are not partitioned by
  target (e.g. daily production checks), kept out of the per-target evaluation job;
* ``extras(entries, jobs) -> dict`` — optional ``schedules``, ``sensors``, ``jobs`` lists.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import dagster as dg

from decguard_pipeline.defs.assets import diff as diff_assets
from decguard_pipeline.defs.assets import guard as guard_assets
from decguard_pipeline.defs.assets import production as production_assets
from decguard_pipeline.defs.assets import properties as properties_assets
from decguard_pipeline.steps.contracts import ContractEntry

FEATURES: tuple[ModuleType, ...] = (
    properties_assets,
    diff_assets,
    guard_assets,
    production_assets,
)


def assets(entry: ContractEntry) -> list[dg.AssetsDefinition]:
    return [a for f in FEATURES for a in f.assets(entry)] if entry.ok else []


def checks(entry: ContractEntry) -> list[dg.AssetChecksDefinition]:
    return [c for f in FEATURES for c in f.checks(entry)] if entry.ok else []


def report_inputs(entry: ContractEntry) -> list[dg.AssetKey]:
    return [k for f in FEATURES for k in f.report_inputs(entry)] if entry.ok else []


def off_target(entry: ContractEntry) -> list[dg.AssetKey]:
    return [k for f in FEATURES for k in getattr(f, "off_target", lambda e: [])(entry)]


def extras(entries: list[ContractEntry], jobs: dict[str, Any]) -> dict[str, list[Any]]:
    merged: dict[str, list[Any]] = {"schedules": [], "sensors": [], "jobs": []}
    for feature in FEATURES:
        for kind, items in feature.extras(entries, jobs).items():
            merged[kind] += items
    return merged
