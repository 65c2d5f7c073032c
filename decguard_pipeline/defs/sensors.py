"""Re-evaluation when a model version changes (or the contract, or its golden dataset)."""

import os

import dagster as dg

from decguard_pipeline.defs.jobs import AssetJob, job_name
from decguard_pipeline.defs.partitions import targets_partitions
from decguard_pipeline.defs.resources import WarehouseResource
from decguard_pipeline.pipeline import steps
from decguard_pipeline.pipeline.contracts import ContractEntry
from decguard_pipeline.pipeline.registration import discover_and_record

INTERVAL_S = int(os.environ.get("DECGUARD_SENSOR_INTERVAL_S", "300"))


def run_key(entry: ContractEntry, target: str) -> str:
    """Same target, contract and dataset: same key, so Dagster runs it once. A new model
    version, an edited contract or an edited dataset gives a new key and a new run."""
    loaded = entry.require()
    return f"{entry.key}|{target}|{loaded.hash}|{steps.dataset_hash(entry)}"


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
        "requests its evaluation.",
    )
    def model_versions(
        context: dg.SensorEvaluationContext, warehouse: WarehouseResource
    ) -> dg.SensorResult:
        requests: list[dg.RunRequest] = []
        additions: list[dg.AddDynamicPartitionsRequest] = []
        wh = warehouse.get()
        for entry in ok:
            try:
                found = discover_and_record(entry, wh, run_id=f"sensor-{context.cursor or 0}")
            except Exception as exc:
                context.log.warning(f"{entry.key}: {exc}")
                continue
            for backend, reason in found.skipped.items():
                context.log.info(f"{entry.key}/{backend} skipped: {reason}")
            known = set(context.instance.get_dynamic_partitions(targets_partitions(entry.key).name))
            new = [t.key for t in found.targets if t.key not in known]
            if new:
                additions.append(targets_partitions(entry.key).build_add_request(new))
            for target in found.targets:
                requests.append(
                    dg.RunRequest(
                        job_name=job_name(entry),
                        partition_key=target.key,
                        run_key=run_key(entry, target.key),
                        tags={"decguard/target": target.key, "decguard/trigger": "sensor"},
                    )
                )
        return dg.SensorResult(run_requests=requests, dynamic_partitions_requests=additions)

    return model_versions
