"""Re-evaluation when a model version changes (or the contract, or its golden dataset)."""

import os
import uuid

import dagster as dg

from decguard_pipeline.defs.jobs import AssetJob, job_name
from decguard_pipeline.defs.limits import backend_tags
from decguard_pipeline.defs.partitions import targets_partitions
from decguard_pipeline.defs.resources import WarehouseResource
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.steps.golden import dataset_hash
from decguard_pipeline.steps.registration import current_inputs, discover_and_record, evaluated
from decguard_pipeline.warehouse.store import now

INTERVAL_S = int(os.environ.get("DECGUARD_SENSOR_INTERVAL_S", "300"))


def tick_run_id() -> str:
    """The ``run_id`` of what one tick records: when, plus a suffix so two ticks never share
    it."""
    return f"sensor-{now().strftime('%Y%m%dT%H%M%SZ')}-{uuid.uuid4().hex[:6]}"


def run_key(entry: ContractEntry, target: str) -> str:
    """Same target, contract and dataset: same key, so Dagster runs it once. A new model
    version, an edited contract or an edited dataset gives a new key and a new run."""
    loaded = entry.require()
    return f"{entry.key}|{target}|{loaded.hash}|{dataset_hash(entry)}"


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
        "else) already evaluated it on the current contract and dataset.",
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
                stale = [t for t in found.targets if not evaluated(entry, t.key, wh, inputs)]
            except Exception as exc:
                context.log.warning(f"{entry.key}: {exc}")
                continue
            for backend, reason in found.skipped.items():
                context.log.info(f"{entry.key}/{backend} skipped: {reason}")
            if found.recorded:
                context.log.info(f"{entry.key}: recorded {', '.join(found.recorded)} ({run_id})")
            known = set(context.instance.get_dynamic_partitions(targets_partitions(entry.key).name))
            new = [t.key for t in found.targets if t.key not in known]
            if new:
                additions.append(targets_partitions(entry.key).build_add_request(new))
            for target in stale:
                requests.append(
                    dg.RunRequest(
                        job_name=job_name(entry),
                        partition_key=target.key,
                        run_key=run_key(entry, target.key),
                        tags={  # the target is the run's partition tag
                            "decguard/trigger": "sensor",
                            **backend_tags(entry, target.key),
                        },
                    )
                )
        return dg.SensorResult(run_requests=requests, dynamic_partitions_requests=additions)

    return model_versions
