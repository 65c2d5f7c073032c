"""The golden assets of one contract materialised without a job run, against a warehouse
folder: the inputs step called as a plain function (Dagster's direct invocation), the
per-target parts of the evaluation step as that step runs them (the part's step call, then
its metadata) and its verdict, with the run id Dagster gives a direct invocation."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from decguard_pipeline.defs.assets.base import TargetPart
from decguard_pipeline.defs.assets.golden import contract_assets, parts
from decguard_pipeline.defs.assets.verdict import EPHEMERAL
from decguard_pipeline.defs.resources import WarehouseResource
from decguard_pipeline.steps.base import Step
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.steps.verdict import decide_target
from decguard_pipeline.warehouse import Warehouse

UNPARTITIONED = ("contract", "golden_dataset")
GOLDEN = (*UNPARTITIONED, "case_results", "golden_metrics", "report")


def golden_parts(entry: ContractEntry) -> dict[str, TargetPart]:
    """The contract's golden parts by name."""
    return {p.name: p for p in parts(entry)}


def materialise_part(
    entry: ContractEntry, part: TargetPart, target: str, root: Path
) -> dg.MaterializeResult:
    assert part.run is not None
    done = part.run(entry, target, Step(Warehouse(root), EPHEMERAL))
    return dg.MaterializeResult(metadata=part.metadata(done))


def materialise(
    entry: ContractEntry,
    target: str,
    root: Path,
    names: tuple[str, ...] = GOLDEN,
    *,
    verdict: bool = True,
) -> dict[str, dg.MaterializeResult]:
    """Materialise ``names`` in order, the partitioned ones for ``target``; their results by
    name. Then, as the evaluation step ends (unless ``verdict`` is False), the target's
    verdict: the run has evaluated the target from then on, and its rows are the target's
    newest (``latest_*``, ``read_latest``)."""
    by_name = golden_parts(entry)
    done: dict[str, dg.MaterializeResult] = {}
    inputs = [n for n in names if n in UNPARTITIONED]
    if inputs:
        [step] = contract_assets(entry)
        resources = {"warehouse": WarehouseResource(root=str(root))}
        context = dg.build_asset_context(resources=resources)
        results = {r.asset_key.path[-1]: r for r in step(context)}
        done.update({n: results[n] for n in inputs})
    for name in names:
        if name not in UNPARTITIONED:
            done[name] = materialise_part(entry, by_name[name], target, root)
    if verdict and any(name not in UNPARTITIONED for name in names):
        decide_target(entry, target, Step(Warehouse(root), EPHEMERAL))
    return done


def check_specs(entry: ContractEntry, asset: str) -> list[dg.AssetCheckSpec]:
    """The check specs of one asset of the contract, as its definitions carry them."""
    from decguard_pipeline.definitions import contract_assets_of

    key = dg.AssetKey([entry.key, asset])
    return [s for a in contract_assets_of(entry) for s in a.check_specs if s.asset_key == key]
