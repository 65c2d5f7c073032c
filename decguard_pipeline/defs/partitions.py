"""One dynamic partition set per contract; its keys are targets ``<backend>@<version>``."""

from __future__ import annotations

import dagster as dg


def targets_name(contract_key: str) -> str:
    return f"{contract_key}_targets"


def targets_partitions(contract_key: str) -> dg.DynamicPartitionsDefinition:
    return dg.DynamicPartitionsDefinition(name=targets_name(contract_key))
