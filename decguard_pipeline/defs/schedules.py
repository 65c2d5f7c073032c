"""Nightly re-evaluation of the latest target of every backend."""

import os

import dagster as dg

from decguard_pipeline.defs.jobs import AssetJob, job_name
from decguard_pipeline.defs.limits import backend_tags
from decguard_pipeline.defs.partitions import targets_partitions
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.steps.targets import backend_of

NIGHTLY_CRON = os.environ.get("DECGUARD_NIGHTLY_CRON", "0 2 * * *")


def latest_per_backend(keys: list[str]) -> list[str]:
    """The most recently added target of each backend (partition keys keep insertion order)."""
    latest: dict[str, str] = {}
    for key in keys:
        latest[backend_of(key)] = key
    return list(latest.values())


def nightly_schedule(entry: ContractEntry, job: AssetJob) -> dg.ScheduleDefinition:
    @dg.schedule(
        name=f"nightly_{entry.key}",
        cron_schedule=NIGHTLY_CRON,
        job=job,
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description="Re-evaluate the latest target of every backend, nightly.",
    )
    def nightly(context: dg.ScheduleEvaluationContext) -> list[dg.RunRequest] | dg.SkipReason:
        keys = context.instance.get_dynamic_partitions(targets_partitions(entry.key).name)
        if not keys:
            return dg.SkipReason(f"{entry.key}: no targets registered yet")
        tick = context.scheduled_execution_time
        stamp = tick.isoformat() if tick is not None else "manual"
        return [
            dg.RunRequest(
                job_name=job_name(entry),
                partition_key=key,
                run_key=f"nightly|{key}|{stamp}",
                tags={  # the target is the run's partition tag
                    "decguard/trigger": "nightly",
                    **backend_tags(entry, key),
                },
            )
            for key in latest_per_backend(keys)
        ]

    return nightly
