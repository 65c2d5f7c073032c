"""The asset group of one contract: contract -> golden_dataset -> case_results ->
golden_metrics -> report; the last three partitioned by target. Bodies are one step call
(``steps/golden.py``); what the UI shows is ``defs/metadata/golden.py``.

(No ``from __future__ import annotations`` in modules with Dagster-decorated functions:
Dagster reads the context annotations at definition time.)"""

import dagster as dg

from decguard_pipeline.defs.assets.base import asset_key, code_version, step_of, target_asset
from decguard_pipeline.defs.metadata.golden import (
    case_results_metadata,
    contract_metadata,
    dataset_metadata,
    golden_metrics_metadata,
    report_metadata,
)
from decguard_pipeline.defs.resources import WarehouseResource
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.steps.golden import (
    evaluate_target,
    record_contract,
    record_dataset,
    score_target,
    write_report,
)

PARQUET, JSON = frozenset({"python", "parquet"}), frozenset({"python", "json"})
# The assets partitioned by target, in order: (name, step, metadata, kinds, description).
PER_TARGET = (
    ("case_results", evaluate_target, case_results_metadata, PARQUET,
     "Every golden case through the target's backend: one row per case."),
    ("golden_metrics", score_target, golden_metrics_metadata, PARQUET,
     "DecGuard's golden metrics and gate results of the newest run."),
    ("report", write_report, report_metadata, JSON,
     "DecGuard 0.1 report file, verified as the reference verifies it."),
)  # fmt: skip


def report_inputs(entry: ContractEntry) -> list[dg.AssetKey]:
    """Assets of other features the DecGuard report is built from (same partition)."""
    from decguard_pipeline.defs.assets.features import report_inputs as feature_inputs

    return feature_inputs(entry)


def broken_contract_asset(entry: ContractEntry) -> dg.AssetsDefinition:
    """A contract that does not load: one asset that explains why, so the others still load."""

    @dg.asset(
        key=asset_key(entry, "contract"),
        group_name=entry.key,
        description=f"BROKEN CONTRACT {entry.path}:\n\n{entry.error}",
    )
    def contract() -> dg.MaterializeResult:
        raise dg.Failure(description=entry.error or "the contract does not load")

    return contract


def contract_assets(entry: ContractEntry) -> list[dg.AssetsDefinition]:
    if not entry.ok:
        return [broken_contract_asset(entry)]
    version = code_version(entry)
    group = entry.key
    spec = entry.require().contract.spec()

    @dg.asset(
        key=asset_key(entry, "contract"),
        group_name=group,
        code_version=version,
        kinds={"python"},
        description=f"{spec.name} ({spec.type}): {', '.join(spec.labels)} — {entry.path}",
    )
    def contract(
        context: dg.AssetExecutionContext, warehouse: WarehouseResource
    ) -> dg.MaterializeResult:
        row = record_contract(entry, step_of(context, warehouse))
        return dg.MaterializeResult(
            metadata=contract_metadata(row), data_version=dg.DataVersion(row["contract_hash"])
        )

    @dg.asset(
        key=asset_key(entry, "golden_dataset"),
        group_name=group,
        code_version=version,
        deps=[contract],
        kinds={"python", "parquet"},
        description="The golden cases, strictly loaded; data version = file sha256.",
    )
    def golden_dataset(
        context: dg.AssetExecutionContext, warehouse: WarehouseResource
    ) -> dg.MaterializeResult:
        _, row = record_dataset(entry, step_of(context, warehouse))
        return dg.MaterializeResult(
            metadata=dataset_metadata(row), data_version=dg.DataVersion(row["dataset_hash"])
        )

    chain = [contract, golden_dataset]
    for name, run, metadata, kinds, description in PER_TARGET:
        # each after the one before; the report also after the features' assets it is
        # built from (e.g. property results), by asset key
        deps = [chain[-1].key, *(report_inputs(entry) if name == "report" else [])]
        chain.append(
            target_asset(
                entry, name, run=run, metadata=metadata, kinds=kinds, deps=deps,
                description=description,
            )
        )  # fmt: skip
    return chain
