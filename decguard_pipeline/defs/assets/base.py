"""What every feature's assets share: asset keys, the code version that marks them stale when
the contract changes, and the per-target asset whose body is one step call.

(No ``from __future__ import annotations`` in modules with Dagster-decorated functions:
Dagster reads the context annotations at definition time.)"""

from collections.abc import Callable, Sequence
from typing import Any

import dagster as dg

from decguard_pipeline.core.product import __version__
from decguard_pipeline.defs.partitions import targets_partitions
from decguard_pipeline.defs.resources import WarehouseResource
from decguard_pipeline.steps.base import Step
from decguard_pipeline.steps.contracts import ContractEntry


def asset_key(entry: ContractEntry, name: str) -> dg.AssetKey:
    return dg.AssetKey([entry.key, name])


def code_version(entry: ContractEntry) -> str:
    """Every asset of a contract carries the contract's hash in its code version: editing the
    contract marks their materialisations stale in the UI (and the sensor re-requests them)."""
    return f"{__version__}-{entry.require().hash.removeprefix('sha256:')[:12]}"


def step_of(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> Step:
    """Where an asset body writes: the warehouse and the run's id (Dagster's ``EPHEMERAL``
    when a test calls the asset as a plain function, where ``context.run`` is not set)."""
    return Step(warehouse.get(), context.op_execution_context.run_id)


def target_asset(
    entry: ContractEntry,
    name: str,
    *,
    run: Callable[[ContractEntry, str, Step], Any],
    metadata: Callable[[Any], dict[str, Any]],
    description: str,
    kinds: frozenset[str] = frozenset({"python", "parquet"}),
    deps: Sequence[dg.AssetKey] | None = None,
) -> dg.AssetsDefinition:
    """An asset partitioned by target whose body is one step call, shown by ``metadata``.
    A feature's comes after ``case_results`` (the default ``deps``; not after the golden
    gates, so a candidate failing them is still measured)."""

    @dg.asset(
        key=asset_key(entry, name),
        group_name=entry.key,
        code_version=code_version(entry),
        partitions_def=targets_partitions(entry.key),
        deps=[asset_key(entry, "case_results")] if deps is None else list(deps),
        kinds=set(kinds),
        description=description,
    )
    def _target_asset(
        context: dg.AssetExecutionContext, warehouse: WarehouseResource
    ) -> dg.MaterializeResult:
        done = run(entry, context.partition_key, step_of(context, warehouse))
        return dg.MaterializeResult(metadata=metadata(done))

    return _target_asset
