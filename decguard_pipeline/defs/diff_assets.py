"""Dagster assets and checks of the diff feature (see defs/features.py for the interface)."""

from typing import Any

import dagster as dg

from decguard_pipeline.pipeline.contracts import ContractEntry


def assets(entry: ContractEntry) -> list[dg.AssetsDefinition]:
    return []


def checks(entry: ContractEntry) -> list[dg.AssetChecksDefinition]:
    return []


def report_inputs(entry: ContractEntry) -> list[dg.AssetKey]:
    return []


def extras(entries: list[ContractEntry], jobs: dict[str, Any]) -> dict[str, list[Any]]:
    return {}
