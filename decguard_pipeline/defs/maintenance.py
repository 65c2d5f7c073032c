"""Warehouse maintenance in Dagster: the ``warehouse_compaction`` job and its nightly
schedule. The work is ``decguard_pipeline.warehouse.maintenance``; this module only wires it.
(No ``from __future__ import annotations``: Dagster reads the op's annotations at runtime.)"""

import os

import dagster as dg

from decguard_pipeline.defs.resources import WarehouseResource
from decguard_pipeline.warehouse.maintenance import Result, Settings, compact

# After the nightly evaluations (DECGUARD_NIGHTLY_CRON, 02:00 by default).
COMPACTION_CRON = os.environ.get("DECGUARD_COMPACTION_CRON", "30 3 * * *")


class CompactionConfig(dg.Config):  # type: ignore[misc]
    keep_days: float | None = None  # retention: delete rows older than this (off)
    snapshot_days: float = 7.0  # time travel window: older snapshots expire
    dry_run: bool = False


@dg.op(description="Compact the warehouse: DuckLake's flush, merge, expiry and cleanup.")
def compact_warehouse(
    context: dg.OpExecutionContext, config: CompactionConfig, warehouse: WarehouseResource
) -> dg.Output[None]:
    settings = Settings(
        keep_days=config.keep_days, snapshot_days=config.snapshot_days, dry_run=config.dry_run
    )
    result = compact(warehouse.get(), settings, log=context.log.info)
    context.log.info("\n" + result.render())
    return dg.Output(None, metadata=_metadata(result))


def _metadata(result: Result) -> dict[str, dg.MetadataValue]:
    tables = {n: t for n, t in result.tables.items() if t.files_before or t.files_after}
    rows = "\n".join(
        f"| {name} | {t.files_before} | {t.files_after} | {t.rows_dropped} |"
        for name, t in tables.items()
    )
    return {
        "files_before": dg.MetadataValue.int(result.files_before),
        "files_after": dg.MetadataValue.int(result.files_after),
        "snapshots_expired": dg.MetadataValue.int(result.snapshots_expired),
        "files_deleted": dg.MetadataValue.int(result.files_deleted),
        "dry_run": dg.MetadataValue.bool(result.dry_run),
        "tables": dg.MetadataValue.md(
            "| table | files before | after | rows dropped |\n| --- | --- | --- | --- |\n" + rows
        ),
    }


@dg.job(name="warehouse_compaction", description="Compact the warehouse (docs/warehouse.md).")
def warehouse_compaction() -> None:
    compact_warehouse()


warehouse_compaction_schedule = dg.ScheduleDefinition(
    name="warehouse_compaction_nightly",
    cron_schedule=COMPACTION_CRON,
    job=warehouse_compaction,
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="Compact the warehouse nightly, after the evaluations.",
)


def with_maintenance(defs: dg.Definitions) -> dg.Definitions:
    """``defs`` plus the maintenance job and schedule (they use its ``warehouse`` resource)."""
    return dg.Definitions.merge(
        defs, dg.Definitions(jobs=[warehouse_compaction], schedules=[warehouse_compaction_schedule])
    )
