"""The asset group of one contract: contract -> golden_dataset -> case_results ->
golden_metrics -> report; the last three partitioned by target.

(No ``from __future__ import annotations`` in modules with Dagster-decorated functions:
Dagster reads the context annotations at definition time.)"""

import dagster as dg

from decguard_pipeline.defs.assets.base import asset_key, code_version
from decguard_pipeline.defs.metadata import base as md
from decguard_pipeline.defs.partitions import targets_partitions
from decguard_pipeline.defs.resources import WarehouseResource
from decguard_pipeline.steps import golden as steps
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.warehouse.rows.golden import flat_metrics


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
    loaded = entry.require()
    parts = targets_partitions(entry.key)
    version = code_version(entry)
    group = entry.key
    spec = loaded.contract.spec()

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
        row = steps.record_contract(entry, steps.Step(warehouse.get(), context.run.run_id))
        return dg.MaterializeResult(
            metadata={
                "hash": row["contract_hash"],
                "path": dg.MetadataValue.path(row["path"]),
                "labels": ", ".join(row["labels"]),
                "backends": ", ".join(row["backends"]),
            },
            data_version=dg.DataVersion(row["contract_hash"]),
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
        _, row = steps.record_dataset(entry, steps.Step(warehouse.get(), context.run.run_id))
        return dg.MaterializeResult(
            metadata={
                "dagster/row_count": row["n_cases"],
                "labeled": row["n_labeled"],
                "hash": row["dataset_hash"],
                "path": dg.MetadataValue.path(row["path"]),
            },
            data_version=dg.DataVersion(row["dataset_hash"]),
        )

    @dg.asset(
        key=asset_key(entry, "case_results"),
        group_name=group,
        code_version=version,
        partitions_def=parts,
        deps=[golden_dataset],
        kinds={"python", "parquet"},
        description="Every golden case through the target's backend: one row per case.",
    )
    def case_results(
        context: dg.AssetExecutionContext, warehouse: WarehouseResource
    ) -> dg.MaterializeResult:
        step = steps.Step(warehouse.get(), context.run.run_id)
        evaluated = steps.evaluate_target(entry, context.partition_key, step)
        run, results = evaluated.run, evaluated.results
        errors = results.errors_by_kind()
        return dg.MaterializeResult(
            metadata={
                "dagster/row_count": run["n_cases"],
                "errored": run["n_errored"],
                "errors_by_kind": dg.MetadataValue.json(errors),
                "model": run["model"] or "-",
                "model_version": run["model_version"] or "-",
                "health": f"{run['health_status']}: {run['health_detail']}",
                "wall_s": run["wall_s"],
                "results": md.results_table(results),
            },
        )

    @dg.asset(
        key=asset_key(entry, "golden_metrics"),
        group_name=group,
        code_version=version,
        partitions_def=parts,
        deps=[case_results],
        kinds={"python", "parquet"},
        description="DecGuard's golden metrics and gate results of the newest run.",
    )
    def golden_metrics(
        context: dg.AssetExecutionContext, warehouse: WarehouseResource
    ) -> dg.MaterializeResult:
        scored = steps.score_target(
            entry, context.partition_key, steps.Step(warehouse.get(), context.run.run_id)
        )
        report = scored.report
        m = scored.metrics
        return dg.MaterializeResult(
            metadata={
                "summary": dg.MetadataValue.md(steps.summary_markdown(report)),
                "status": report.status.upper(),
                "metrics": md.metrics_table(flat_metrics(m)),
                "per_label": md.table(
                    [{"label": k, **v} for k, v in m["classification"]["per_label"].items()],
                    [
                        ("label", "string"),
                        ("precision", "float"),
                        ("recall", "float"),
                        ("f1", "float"),
                        ("support", "int"),
                    ],
                    limit=1000,
                ),
                "reliability": md.table(
                    m["calibration"]["reliability"],
                    [
                        ("lower", "float"),
                        ("upper", "float"),
                        ("count", "int"),
                        ("mean_confidence", "float"),
                        ("accuracy", "float"),
                    ],
                    limit=1000,
                ),
                "failing_cases": md.failing_cases_table(report.document["failures"]),
                "gates": md.checks_table(scored.checks),
                **(
                    {}
                    if scored.intervals is None
                    else {"intervals": md.intervals_table(scored.intervals)}
                ),
                "dagster/row_count": len(flat_metrics(m)),
            },
        )

    @dg.asset(
        key=asset_key(entry, "report"),
        # features add inputs (e.g. property results) by asset key
        deps=[golden_metrics, *report_inputs(entry)],
        group_name=group,
        code_version=version,
        partitions_def=parts,
        kinds={"python", "json"},
        description="DecGuard 0.1 report file, verified as the reference verifies it.",
    )
    def report(
        context: dg.AssetExecutionContext, warehouse: WarehouseResource
    ) -> dg.MaterializeResult:
        path, built = steps.write_report(
            entry, context.partition_key, steps.Step(warehouse.get(), context.run.run_id)
        )
        return dg.MaterializeResult(
            metadata={
                "path": dg.MetadataValue.path(str(path)),
                "status": built.status.upper(),
                "summary": dg.MetadataValue.md(steps.summary_markdown(built)),
                "dagster/row_count": len(built.results),
            },
        )

    return [contract, golden_dataset, case_results, golden_metrics, report]
