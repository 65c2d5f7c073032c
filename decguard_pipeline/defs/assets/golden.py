"""The asset group of one contract: contract -> golden_dataset -> case_results ->
golden_metrics -> report; the first two one step (``<contract>__inputs``), the last three
partitioned by target, parts of the evaluation step (``defs/assets/evaluation.py``). Bodies
are one step call (``steps/golden.py``); what the UI shows is ``defs/metadata/golden.py``.

(No ``from __future__ import annotations`` in modules with Dagster-decorated functions:
Dagster reads the context annotations at definition time.)"""

from collections.abc import Iterator

import dagster as dg

from decguard_pipeline.defs.assets.base import (
    PARQUET,
    TargetPart,
    asset_key,
    code_version,
    one_transaction,
    step_of,
)
from decguard_pipeline.defs.assets.evaluation import run_in_order
from decguard_pipeline.defs.checks import golden_gates
from decguard_pipeline.defs.metadata.golden import (
    case_results_metadata,
    contract_metadata,
    dataset_metadata,
    golden_metrics_metadata,
    report_metadata,
)
from decguard_pipeline.defs.resources import WarehouseResource
from decguard_pipeline.defs.site_links import contract_link
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.steps.golden import (
    evaluate_target,
    record_contract,
    record_dataset,
    score_target,
    write_report,
)

JSON = frozenset({"python", "json"})
# The golden parts partitioned by target, in order: (name, step, metadata, kinds, description).
PER_TARGET = (
    ("case_results", evaluate_target, case_results_metadata, PARQUET,
     "Every golden case through the target's backend: one row per case."),
    ("golden_metrics", score_target, golden_metrics_metadata, PARQUET,
     "DecGuard's golden metrics and gate results of the newest run."),
    ("report", write_report, report_metadata, JSON,
     "DecGuard 0.1 report file, verified as the reference verifies it."),
)  # fmt: skip
INPUTS = "inputs"  # the step of the two unpartitioned assets: <contract>__inputs


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
    """The contract's unpartitioned inputs, ``contract`` -> ``golden_dataset``, as one step
    (a subsettable multi-asset; see defs/assets/evaluation.py for why one step)."""
    if not entry.ok:
        return [broken_contract_asset(entry)]
    version = code_version(entry)
    spec = entry.require().contract.spec()
    contract_key, dataset_key = asset_key(entry, "contract"), asset_key(entry, "golden_dataset")

    @dg.multi_asset(
        name=f"{entry.key}__{INPUTS}",
        specs=[
            dg.AssetSpec(
                contract_key,
                group_name=entry.key,
                code_version=version,
                kinds={"python"},
                description=f"{spec.name} ({spec.type}): {', '.join(spec.labels)} — {entry.path}",
                metadata=contract_link(entry.key),
            ),
            dg.AssetSpec(
                dataset_key,
                group_name=entry.key,
                code_version=version,
                deps=[contract_key],
                kinds={"python", "parquet"},
                description="The golden cases, strictly loaded; data version = file sha256.",
                metadata=contract_link(entry.key),
            ),
        ],
        can_subset=True,
        description=f"The contract {entry.path} and its golden dataset, in one step.",
    )
    def inputs(
        context: dg.AssetExecutionContext, warehouse: WarehouseResource
    ) -> Iterator[dg.MaterializeResult]:
        def contract() -> Iterator[dg.MaterializeResult]:
            row = record_contract(entry, step_of(context, warehouse))
            yield dg.MaterializeResult(
                asset_key=contract_key,
                metadata={**contract_metadata(row), **contract_link(entry.key)},
                data_version=dg.DataVersion(row["contract_hash"]),
            )

        def golden_dataset() -> Iterator[dg.MaterializeResult]:
            _, row = record_dataset(entry, step_of(context, warehouse))
            yield dg.MaterializeResult(
                asset_key=dataset_key,
                metadata={**dataset_metadata(row), **contract_link(entry.key)},
                data_version=dg.DataVersion(row["dataset_hash"]),
            )

        work = [("contract", [], contract), ("golden_dataset", ["contract"], golden_dataset)]
        selected = {k.path[-1] for k in context.selected_asset_keys}
        with one_transaction(warehouse):
            yield from run_in_order([w for w in work if w[0] in selected], context.log)

    return [inputs]


def parts(entry: ContractEntry) -> list[TargetPart]:
    """The golden parts of the evaluation step, ``golden_metrics`` carrying the golden gates;
    each after the one before, the report also after the features' parts it is built from
    (e.g. property results)."""
    before = ["golden_dataset"]
    out = []
    for name, run, metadata, kinds, description in PER_TARGET:
        deps = [before[-1], *(k.path[-1] for k in report_inputs(entry) if name == "report")]
        gates = golden_gates(entry) if name == "golden_metrics" else None
        out.append(TargetPart(
            name, run=run, metadata=metadata, description=description, kinds=kinds,
            deps=tuple(deps), gates=gates,
        ))  # fmt: skip
        before.append(name)
    return out
