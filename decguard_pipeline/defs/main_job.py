"""The main job: register every contract's current targets and materialise all their assets
and checks through Dagster on a persistent instance (what ``decguard-pipeline evaluate`` and
``make run`` do)."""

import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg

from decguard_pipeline.defs.jobs import job_name
from decguard_pipeline.defs.partitions import targets_partitions
from decguard_pipeline.pipeline.contracts import ContractEntry, project_root
from decguard_pipeline.pipeline.registration import discover_and_record
from decguard_pipeline.warehouse import Warehouse

# One SQLite event log for all runs: the default keeps a database per run and reconnects on
# every event, which made each evaluation of a small contract ~3x slower.
DAGSTER_YAML = """\
# Written by decguard-pipeline: a local instance inside the project.
event_log_storage:
  module: dagster.core.storage.event_log
  class: ConsolidatedSqliteEventLogStorage
  config:
    base_dir: {home}/history
telemetry:
  enabled: false
run_queue:
  max_concurrent_runs: 4
"""

# Blocked reports after a failing requirement are expected results, not errors to print.
QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


def ensure_dagster_home() -> Path:
    """``$DAGSTER_HOME``, defaulting to ``.dagster_home`` in the project, created with a
    ``dagster.yaml`` when missing."""
    home = Path(os.environ.get("DAGSTER_HOME") or project_root() / ".dagster_home").resolve()
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists():
        config.write_text(DAGSTER_YAML.format(home=home))
    os.environ["DAGSTER_HOME"] = str(home)
    return home


@dataclass
class Outcome:
    contract: str
    target: str
    success: bool
    run_id: str
    failed_steps: list[str] = field(default_factory=list)


@dataclass
class MainJobResult:
    outcomes: list[Outcome] = field(default_factory=list)
    skipped: list[tuple[str, str, str]] = field(default_factory=list)  # contract, backend, why
    broken: list[tuple[str, str]] = field(default_factory=list)  # contract, error
    production: list[Outcome] = field(default_factory=list)  # target = the day checked


def evaluate_all(
    defs: dg.Definitions,
    entries: list[ContractEntry],
    instance: dg.DagsterInstance,
    warehouse: Warehouse,
    *,
    backends: list[str] | None = None,
) -> MainJobResult:
    out = MainJobResult()
    for entry in entries:
        if not entry.ok:
            out.broken.append((entry.key, entry.error or ""))
            continue
        names = [
            b for b in entry.require().contract.backend_names() if not backends or b in backends
        ]
        found = discover_and_record(
            entry, warehouse, run_id=f"register-{uuid.uuid4().hex[:12]}", backends=names
        )
        out.skipped += [(entry.key, b, why) for b, why in found.skipped.items()]
        keys = [t.key for t in found.targets]
        partitions = targets_partitions(entry.key).name
        known = set(instance.get_dynamic_partitions(partitions))
        new = [k for k in keys if k not in known]
        if new:
            instance.add_dynamic_partitions(partitions, new)
        job = defs.resolve_job_def(job_name(entry))
        for key in keys:
            result = job.execute_in_process(
                instance=instance,
                partition_key=key,
                raise_on_error=False,
                run_config=QUIET,
                tags={"decguard/target": key, "decguard/trigger": "evaluate"},
            )
            failed = [e.step_key for e in result.all_events if e.is_step_failure and e.step_key]
            out.outcomes.append(Outcome(entry.key, key, result.success, result.run_id, failed))
        out.production += run_production_days(defs, entry, instance)
    return out


def run_production_days(
    defs: dg.Definitions, entry: ContractEntry, instance: dg.DagsterInstance
) -> list[Outcome]:
    """The contract's production job for every day that has a records file, oldest first
    (so each day's baseline, the day before, is ingested first)."""
    from decguard_pipeline.defs import production_assets

    days = production_assets.production_days(entry)
    if not days:
        return []
    job = defs.resolve_job_def(production_assets.job_name(entry))
    outcomes = []
    for day in days:
        result = job.execute_in_process(
            instance=instance,
            partition_key=day,
            raise_on_error=False,
            run_config=QUIET,
            tags={"decguard/day": day, "decguard/trigger": "evaluate"},
        )
        failed = [e.step_key for e in result.all_events if e.is_step_failure and e.step_key]
        outcomes.append(Outcome(entry.key, day, result.success, result.run_id, failed))
    return outcomes
