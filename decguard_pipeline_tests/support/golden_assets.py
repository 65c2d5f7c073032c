"""The golden assets of one contract called as plain functions (Dagster's direct invocation,
``asset(build_asset_context(partition_key=..., resources=...))``) against a warehouse folder:
what a test needs to materialise them without a job run."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from decguard_pipeline.defs.assets.golden import contract_assets
from decguard_pipeline.defs.resources import WarehouseResource
from decguard_pipeline.steps.contracts import ContractEntry

UNPARTITIONED = ("contract", "golden_dataset")
GOLDEN = (*UNPARTITIONED, "case_results", "golden_metrics", "report")


def golden_assets(entry: ContractEntry) -> dict[str, dg.AssetsDefinition]:
    """The contract's golden assets by name."""
    return {a.key.path[-1]: a for a in contract_assets(entry)}


def materialise(
    entry: ContractEntry, target: str, root: Path, names: tuple[str, ...] = GOLDEN
) -> dict[str, dg.MaterializeResult]:
    """Call ``names`` in order, the partitioned ones for ``target``; their results by name."""
    assets = golden_assets(entry)
    resources = {"warehouse": WarehouseResource(root=str(root))}
    done = {}
    for name in names:
        partition = None if name in UNPARTITIONED else target
        context = dg.build_asset_context(resources=resources, partition_key=partition)
        done[name] = assets[name](context)
    return done
