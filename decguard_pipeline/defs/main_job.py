"""The main job: register every contract's current targets and materialise all their assets
and checks through Dagster on a persistent instance (what ``decguard-pipeline evaluate`` and
``make run`` do)."""

import uuid
from dataclasses import dataclass, field
from typing import Any

import dagster as dg

from decguard_pipeline.defs.instance import owner_tags
from decguard_pipeline.defs.jobs import job_name
from decguard_pipeline.defs.partitions import targets_partitions
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.steps.registration import discover_and_record
from decguard_pipeline.warehouse import Warehouse

# Blocked reports after a failing requirement are expected results, not errors to print.
QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}

# What a blocking asset check raises when a requirement gate fails: a verdict, not a crash.
GATE_FAILURE = "DagsterAssetCheckFailedError"


@dataclass
class Outcome:
    """One run of the main job. ``failed_steps``: every step that failed, a blocking gate
    included (a verdict); ``errors``: the steps that broke, with their error (the pipeline
    failed; ``evaluate`` exits 2). ``run_id`` is None when no run could be started."""

    contract: str
    target: str
    success: bool
    run_id: str | None
    failed_steps: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def broken(self) -> bool:
        return bool(self.errors) or self.run_id is None


@dataclass
class MainJobResult:
    outcomes: list[Outcome] = field(default_factory=list)
    skipped: list[tuple[str, str, str]] = field(default_factory=list)  # contract, backend, why
    broken: list[tuple[str, str]] = field(default_factory=list)  # contract, error
    production: list[Outcome] = field(default_factory=list)  # target = the day checked


def _error_text(error: Any) -> str:
    """The innermost cause of a step's error (the exception our code raised), one line."""
    while getattr(error, "cause", None) is not None:
        error = error.cause
    message = (error.message or "").strip().splitlines()
    text = message[0] if message else error.cls_name
    name = f"{error.cls_name}: "
    return text.split(name, 1)[1] if name in text else text


def run_job(
    job: Any, instance: dg.DagsterInstance, contract: str, key: str, tags: dict[str, str]
) -> Outcome:
    """Execute one partition of a job in this process; a step failing on a blocking gate is
    a verdict, any other failure (or no run at all) an error of the outcome."""
    try:
        result = job.execute_in_process(
            instance=instance,
            partition_key=key,
            raise_on_error=False,
            run_config=QUIET,
            tags={**tags, **owner_tags()},
        )
    except Exception as exc:  # the run could not even start (e.g. an unknown partition)
        return Outcome(contract, key, False, None, errors={"run": f"{type(exc).__name__}: {exc}"})
    failed, errors = [], {}
    for event in result.all_events:
        if not (event.is_step_failure and event.step_key):
            continue
        failed.append(event.step_key)
        error = event.step_failure_data.error
        if error is not None and error.cls_name != GATE_FAILURE:
            errors[event.step_key] = _error_text(error)
        elif error is None:
            errors[event.step_key] = "failed without an error"
    if not result.success and not failed:  # the run failed outside any step
        failure = result.get_run_failure_event()
        errors["run"] = failure.message if failure is not None else "the run failed"
    return Outcome(contract, key, result.success, result.run_id, failed, errors)


def _problem(exc: Exception) -> str:
    from decguard_pipeline.core.errors import DecGuardError

    return str(exc) if isinstance(exc, DecGuardError) else f"{type(exc).__name__}: {exc}"


def evaluate_all(
    defs: dg.Definitions,
    entries: list[ContractEntry],
    instance: dg.DagsterInstance,
    warehouse: Warehouse,
    *,
    backends: list[str] | None = None,
) -> MainJobResult:
    """Every contract in turn; a contract that cannot be evaluated (broken file, missing
    dataset, ...) is reported in ``broken`` and the others still run."""
    out = MainJobResult()
    for entry in entries:
        if not entry.ok:
            out.broken.append((entry.key, entry.error or ""))
            continue
        try:
            evaluate_contract(defs, entry, instance, warehouse, out, backends=backends)
        except Exception as exc:
            out.broken.append((entry.key, _problem(exc)))
    return out


def evaluate_contract(
    defs: dg.Definitions,
    entry: ContractEntry,
    instance: dg.DagsterInstance,
    warehouse: Warehouse,
    out: MainJobResult,
    *,
    backends: list[str] | None = None,
) -> None:
    names = [b for b in entry.require().contract.backend_names() if not backends or b in backends]
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
        tags = {"decguard/target": key, "decguard/trigger": "evaluate"}
        out.outcomes.append(run_job(job, instance, entry.key, key, tags))
    out.production += run_production_days(defs, entry, instance)


def run_production_days(
    defs: dg.Definitions, entry: ContractEntry, instance: dg.DagsterInstance
) -> list[Outcome]:
    """The contract's production job for every day that has a records file, oldest first
    (so each day's baseline, the day before, is ingested first)."""
    from decguard_pipeline.defs.assets import production as production_assets

    days = production_assets.production_days(entry)
    if not days:
        return []
    job = defs.resolve_job_def(production_assets.job_name(entry))
    tags = {"decguard/trigger": "evaluate"}
    return [run_job(job, instance, entry.key, day, {**tags, "decguard/day": day}) for day in days]
