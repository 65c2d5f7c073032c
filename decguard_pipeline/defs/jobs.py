"""One job per contract: its whole asset group, run for one target partition at a time."""

from __future__ import annotations

import dagster as dg

from decguard_pipeline.steps.contracts import ContractEntry

# what define_asset_job returns (not exported under a public name in dagster 1.13)
AssetJob = type(dg.define_asset_job("_probe"))


def job_name(entry: ContractEntry) -> str:
    return f"evaluate_{entry.key}"


def evaluate_job(entry: ContractEntry) -> AssetJob:
    from decguard_pipeline.defs.assets.features import off_target

    selection = dg.AssetSelection.groups(entry.key)
    excluded = off_target(entry) if entry.ok else []
    if excluded:  # assets on other partitions (daily production checks) run in their own job
        selection = selection - dg.AssetSelection.assets(*excluded)
    return dg.define_asset_job(
        job_name(entry),
        selection=selection,
        description=f"Evaluate {entry.path} for one target (backend@model_version).",
        tags={"decguard/contract": entry.key},
    )
