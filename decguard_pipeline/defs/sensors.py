"""Re-evaluation when a model version changes (or the contract, or its golden dataset)."""

import os
import uuid

import dagster as dg

from decguard_pipeline.core.formatting import printable
from decguard_pipeline.defs.instance import UNFINISHED, process_gone
from decguard_pipeline.defs.jobs import AssetJob, job_name
from decguard_pipeline.defs.limits import backend_tags
from decguard_pipeline.defs.partitions import targets_partitions
from decguard_pipeline.defs.resources import WarehouseResource
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.steps.golden import dataset_hash
from decguard_pipeline.steps.registration import current_inputs, discover_and_record, evaluations
from decguard_pipeline.warehouse.store import now

INTERVAL_S = int(os.environ.get("DECGUARD_SENSOR_INTERVAL_S", "300"))
# Runs of one target on the same contract and dataset that ended without evaluating it
# (killed, or broken before the verdict) after which the sensor stops asking; the nightly
# schedule still does.
MAX_FAILED = 3
# Dagster tags every run of a partition with it: a run of the target carries its key.
PARTITION_TAG = "dagster/partition"
# A run not yet started (NOT_STARTED) is not in progress: the daemon launches it when the
# sensor requests its key again.
IN_PROGRESS = [
    dg.DagsterRunStatus.QUEUED,
    *(s for s in UNFINISHED if s != dg.DagsterRunStatus.NOT_STARTED),
]


def tick_run_id() -> str:
    """The ``run_id`` of what one tick records: when, plus a suffix so two ticks never share
    it."""
    return f"sensor-{now().strftime('%Y%m%dT%H%M%SZ')}-{uuid.uuid4().hex[:6]}"


def run_key(entry: ContractEntry, target: str, failed: int = 0) -> str:
    """Same target, contract and dataset: same key, so Dagster runs it once. A new model
    version, an edited contract or an edited dataset gives a new key and a new run, and so
    does each run on them that ended without evaluating the target (``failed``: Dagster
    never launches a key twice, and a killed run must be asked again)."""
    loaded = entry.require()
    key = f"{entry.key}|{target}|{loaded.hash}|{dataset_hash(entry)}"
    return key if not failed else f"{key}|after {failed} failed"


def in_progress(instance: dg.DagsterInstance, entry: ContractEntry, target: str) -> bool:
    """Whether a run of the target's evaluation is queued or running (not one whose process
    is gone: the dead_runs sensor marks those failed)."""
    runs = instance.get_runs(
        filters=dg.RunsFilter(
            job_name=job_name(entry), tags={PARTITION_TAG: target}, statuses=IN_PROGRESS
        )
    )
    return any(not process_gone(dict(run.tags)) for run in runs)


def model_versions_sensor(
    entries: list[ContractEntry], jobs: list[AssetJob]
) -> dg.SensorDefinition:
    ok = [e for e in entries if e.ok]

    @dg.sensor(
        name="model_versions",
        jobs=jobs,
        minimum_interval_seconds=INTERVAL_S,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Discovers each backend's current model version (contract, health "
        "answer or a one-case canary), adds it as a target partition and "
        "requests its evaluation unless a run (of evaluate, this sensor or anything "
        "else) already evaluated it to its verdict on the current contract and dataset, "
        "or one is in progress; a run that ended without its verdict (killed, broken) is "
        f"asked again, up to {MAX_FAILED} times.",
    )
    def model_versions(
        context: dg.SensorEvaluationContext, warehouse: WarehouseResource
    ) -> dg.SensorResult:
        requests: list[dg.RunRequest] = []
        additions: list[dg.AddDynamicPartitionsRequest] = []
        wh = warehouse.get()
        run_id = tick_run_id()
        for entry in ok:
            try:
                found = discover_and_record(entry, wh, run_id=run_id)
                inputs = current_inputs(entry)
                stale = {t.key: evaluations(entry, t.key, wh, inputs) for t in found.targets}
            except Exception as exc:
                context.log.warning(printable(f"{entry.key}: {exc}"))
                continue
            for backend, reason in found.skipped.items():
                context.log.info(printable(f"{entry.key}/{backend} skipped: {reason}"))
            if found.recorded:
                context.log.info(f"{entry.key}: recorded {', '.join(found.recorded)} ({run_id})")
            known = set(context.instance.get_dynamic_partitions(targets_partitions(entry.key).name))
            new = [t.key for t in found.targets if t.key not in known]
            if new:
                additions.append(targets_partitions(entry.key).build_add_request(new))
            for target, state in stale.items():
                if state.evaluated or in_progress(context.instance, entry, target):
                    continue
                if state.failed >= MAX_FAILED:
                    context.log.warning(
                        f"{entry.key}/{target}: {state.failed} runs on this contract and "
                        "dataset ended without a verdict; not asked again until the nightly run"
                    )
                    continue
                requests.append(
                    dg.RunRequest(
                        job_name=job_name(entry),
                        partition_key=target,
                        run_key=run_key(entry, target, state.failed),
                        tags={  # the target is the run's partition tag
                            "decguard/trigger": "sensor",
                            **backend_tags(entry, target),
                        },
                    )
                )
        return dg.SensorResult(run_requests=requests, dynamic_partitions_requests=additions)

    return model_versions
