"""Features beyond the golden evaluation plug into every contract's asset group here.

Each feature module (``defs/assets/<feature>.py``) provides any of:

* ``parts(entry) -> list[TargetPart]`` — its assets partitioned by target, each with its gates
  as checks: parts of the contract's evaluation step (``defs/assets/evaluation.py``), which
  composes them with the golden parts and the verdict;
* ``assets(entry) -> list[AssetsDefinition]`` and ``checks(entry) ->
  list[AssetChecksDefinition]`` — assets with steps of their own (same group, on other
  partitions: daily production checks) and their gates as asset checks;
* ``report_inputs(entry) -> list[AssetKey]`` — assets the DecGuard report must wait for;
* ``off_target(entry) -> list[AssetKey]`` (optional) — its assets that are not partitioned by
  target (e.g. daily production checks), kept out of the per-target evaluation job;
* ``extras(entries, jobs) -> dict`` — optional ``schedules``, ``sensors``, ``jobs`` lists.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import dagster as dg

from decguard_pipeline.defs.assets import calibrator as calibrator_assets
from decguard_pipeline.defs.assets import diff as diff_assets
from decguard_pipeline.defs.assets import guard as guard_assets
from decguard_pipeline.defs.assets import production as production_assets
from decguard_pipeline.defs.assets import properties as properties_assets
from decguard_pipeline.defs.assets.base import TargetPart
from decguard_pipeline.steps.contracts import ContractEntry

FEATURES: tuple[ModuleType, ...] = (
    properties_assets,
    diff_assets,
    guard_assets,
    production_assets,
    calibrator_assets,
)


def _each(name: str, entry: ContractEntry) -> list[Any]:
    return [x for f in FEATURES for x in getattr(f, name, lambda e: [])(entry)] if entry.ok else []


def parts(entry: ContractEntry) -> list[TargetPart]:
    return _each("parts", entry)


def assets(entry: ContractEntry) -> list[dg.AssetsDefinition]:
    return _each("assets", entry)


def checks(entry: ContractEntry) -> list[dg.AssetChecksDefinition]:
    return _each("checks", entry)


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
