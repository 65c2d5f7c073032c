"""A target's verdict, its promotion and the contract's scoreboard.

Gates decide promotion, not record-keeping: every evaluated target gets its metrics, report,
diff and guard/property results whatever its gates say (the gate checks do not block them),
and then

* ``verdict`` (per target, always materialised): PASS / WARN / FAIL over every check of the
  evaluation, the run tagged ``decguard/verdict``;
* ``approved_target`` (per target, materialised only when no requirement of any kind failed):
  "this version may replace the baseline"; the regression baseline of later versions is chosen
  among approved targets;
* ``scoreboard`` (one per contract): every target's verdict and headline numbers, the newest
  evaluation first.

A model failing its gates is therefore a successful run with failed checks and the verdict
FAIL; only a pipeline that breaks fails a run. (Dagster's blocking checks would fail the step,
and with it the run, so the checks are not Dagster-blocking: the verdict step blocks the
promotion, per partition, from the same stored check rows.)

(No ``from __future__ import annotations``: Dagster reads the context annotations.)
"""

from collections.abc import Iterator, Sequence

import dagster as dg

from decguard_pipeline.defs.assets.base import asset_key, code_version, step_of
from decguard_pipeline.defs.metadata.verdict import (
    approved_metadata,
    scoreboard_metadata,
    verdict_metadata,
)
from decguard_pipeline.defs.partitions import targets_name, targets_partitions
from decguard_pipeline.defs.resources import WarehouseResource
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.steps.verdict import decide_target, latest_verdicts

VERDICT, APPROVED, SCOREBOARD = "verdict", "approved_target", "scoreboard"
VERDICT_TAG = "decguard/verdict"  # on the run: PASS | WARN | FAIL
EPHEMERAL = "EPHEMERAL"  # the run id of an asset called as a plain function


def assets(
    entry: ContractEntry, evaluated: Sequence[dg.AssetsDefinition]
) -> list[dg.AssetsDefinition]:
    """The verdict (after every per-target asset of ``evaluated``), the approval, the
    scoreboard."""
    if not entry.ok:
        return []
    after = [
        key
        for a in evaluated
        if isinstance(a.partitions_def, dg.DynamicPartitionsDefinition)
        and a.partitions_def.name == targets_name(entry.key)
        for key in a.keys
    ]
    return [_verdict(entry, after), _scoreboard(entry)]


def _verdict(entry: ContractEntry, after: list[dg.AssetKey]) -> dg.AssetsDefinition:
    parts, version = targets_partitions(entry.key), code_version(entry)
    verdict_key, approved_key = asset_key(entry, VERDICT), asset_key(entry, APPROVED)

    @dg.multi_asset(
        name=f"{entry.key}__{VERDICT}",
        specs=[
            dg.AssetSpec(
                verdict_key,
                deps=after,
                partitions_def=parts,
                group_name=entry.key,
                code_version=version,
                kinds={"python", "parquet"},
                description="PASS / WARN / FAIL over every check of the target's evaluation "
                "(golden, properties, guard, regression); the run is tagged decguard/verdict.",
            ),
            dg.AssetSpec(
                approved_key,
                deps=[verdict_key],
                skippable=True,
                partitions_def=parts,
                group_name=entry.key,
                code_version=version,
                kinds={"python"},
                description="This version may replace the baseline: materialised only when no "
                "requirement gate failed. Regression baselines are chosen among approved "
                "targets.",
            ),
        ],
    )
    def verdict(
        context: dg.AssetExecutionContext, warehouse: WarehouseResource
    ) -> Iterator[dg.MaterializeResult]:
        done = decide_target(entry, context.partition_key, step_of(context, warehouse))
        run_id = context.op_execution_context.run_id
        if run_id != EPHEMERAL:
            context.instance.add_run_tags(run_id, {VERDICT_TAG: done.verdict.status.upper()})
        yield dg.MaterializeResult(asset_key=verdict_key, metadata=verdict_metadata(done))
        if done.approved:
            yield dg.MaterializeResult(asset_key=approved_key, metadata=approved_metadata(done))
        else:
            context.log.info(
                f"{context.partition_key} is not approved: " + ", ".join(done.verdict.failing)
            )

    return verdict


def _scoreboard(entry: ContractEntry) -> dg.AssetsDefinition:
    @dg.asset(
        key=asset_key(entry, SCOREBOARD),
        group_name=entry.key,
        code_version=code_version(entry),
        deps=[asset_key(entry, VERDICT)],
        kinds={"python", "parquet"},
        description="Every target of the contract, the newest evaluation first: verdict, "
        "approval, accuracy, macro-F1, ECE (equal-width and equal-mass), coverage, cost, "
        "regression against its baseline, and a link to its HTML report.",
    )
    def scoreboard(warehouse: WarehouseResource) -> dg.MaterializeResult:
        return dg.MaterializeResult(
            metadata=scoreboard_metadata(latest_verdicts(entry.key, warehouse.get()))
        )

    return scoreboard
