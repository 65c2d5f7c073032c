"""Dagster assets and checks of the production feature (the interface: features.py).

Every contract's group gains two assets on **daily** partitions (one
``DailyPartitionsDefinition`` per contract, UTC days, the last partition the last complete
day), run by their own job ``production_<contract>`` and a daily schedule, never by the
per-target ``evaluate_<contract>`` job (``off_target``):

* ``production_records``: the day's records (``data/production/<contract>/<day>.jsonl``, else
  ``production_inbox`` rows) checked strictly as ``check`` checks them and stored normalised;
  a bad record fails the asset with DecGuard's message.
* ``production_check``: DecGuard's production check of the stored records against the
  contract's ``pipeline.production.baseline`` (default: the newest earlier day with records),
  the ``check_version`` 0.1 report file and its sidecar, metrics, drift, segments
  and extension results in the warehouse.

Both assets and the day's gate checks are one multi-asset (``<contract>_production_day``,
``can_subset``): one Dagster step per day, whose check measures the columns the ingestion has
just checked (no read-back of the day); either asset, or the checks, can still run alone.
``production_check`` has a check per aggregate gate and, per segment key, a check per segment
gate aggregated over that day's segment values (the worst segment's value, every segment in
the metadata): requirements are ERROR checks, warnings WARN; a failing day is a successful
run with failed checks (a verdict, not a crash).

The first partition: ``pipeline.production.start_date``, else ``$DECGUARD_PRODUCTION_START``,
else the date of the contract's earliest records file (see
``steps/production/schedule.start_date``); a contract with none of them has no production
assets (``enabled``). The schedule's cron is
``$DECGUARD_PRODUCTION_CRON`` (default ``0 5 * * *``, UTC).

(No ``from __future__ import annotations``: Dagster reads the context annotations.)
"""

import functools
import os
import re
import uuid
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

import dagster as dg

from decguard_pipeline.core.errors import DecGuardError
from decguard_pipeline.defs.assets.base import asset_key, code_version, one_transaction
from decguard_pipeline.defs.assets.verdict import tag_verdict
from decguard_pipeline.defs.gate_checks import Gate, check_name, check_results
from decguard_pipeline.defs.gate_checks import check_result as gate_result
from decguard_pipeline.defs.metadata import base as md
from decguard_pipeline.defs.metadata.production import check_metadata, records_metadata
from decguard_pipeline.defs.resources import WarehouseResource
from decguard_pipeline.defs.site_links import contract_link, day_link
from decguard_pipeline.steps.base import Step
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.steps.production import baseline, check, ingest, schedule, sources

RECORDS, CHECK = sources.RECORDS, "production_check"
T = TypeVar("T")
ENV_CRON = "DECGUARD_PRODUCTION_CRON"
DEFAULT_CRON = "0 5 * * *"  # early morning (UTC), after the nightly re-evaluation at 02:00
_NOT_IDENT = re.compile(r"[^A-Za-z0-9_]")


def cron() -> str:
    return os.environ.get(ENV_CRON) or DEFAULT_CRON


def job_name(entry: ContractEntry) -> str:
    return f"production_{entry.key}"


def schedule_name(entry: ContractEntry) -> str:
    return f"production_{entry.key}_daily"


def daily_partitions(entry: ContractEntry) -> dg.DailyPartitionsDefinition:
    start, _ = schedule.start_date(entry)
    return dg.DailyPartitionsDefinition(start_date=start.isoformat(), timezone="UTC")


def enabled(entry: ContractEntry) -> bool:
    """Whether the contract has production assets: it has records files or declares its first
    day (``pipeline.production.start_date`` or ``$DECGUARD_PRODUCTION_START``). A contract
    without either would show a year of daily partitions that can only ever be missing (a
    producer writing only to ``production_inbox`` declares its start). Broken settings are
    enabled: the broken asset says what is wrong."""
    if not entry.ok:
        return False
    try:
        _, origin = schedule.start_date(entry)
    except DecGuardError:
        return True
    return origin != "default"


def _usable(entry: ContractEntry) -> str | None:
    """Why the production assets cannot be defined (a bad start date), else None."""
    try:
        schedule.start_date(entry)
    except DecGuardError as exc:
        return str(exc)
    return None


def assets(entry: ContractEntry) -> list[dg.AssetsDefinition]:
    if not enabled(entry):
        return []
    error = _usable(entry)
    if error is not None:
        return [_broken(entry, error)]
    parts = daily_partitions(entry)
    return [_production_day(entry, parts)]


def checks(entry: ContractEntry) -> list[dg.AssetChecksDefinition]:
    return []  # the gate checks are part of the day's multi-asset (``check_specs``)


def report_inputs(entry: ContractEntry) -> list[dg.AssetKey]:
    return []  # production checks are not part of a target's DecGuard report


def off_target(entry: ContractEntry) -> list[dg.AssetKey]:
    """Daily assets: kept out of the per-target evaluation job."""
    if not enabled(entry):
        return []
    if _usable(entry) is not None:
        return [asset_key(entry, RECORDS)]
    return [asset_key(entry, RECORDS), asset_key(entry, CHECK)]


def extras(entries: list[ContractEntry], jobs: dict[str, Any]) -> dict[str, list[Any]]:
    """Per contract, the job of its two daily assets and the schedule that runs it."""
    out: dict[str, list[Any]] = {"jobs": [], "schedules": []}
    for entry in entries:
        if not enabled(entry) or _usable(entry) is not None:
            continue
        job = production_job(entry)
        out["jobs"].append(job)
        out["schedules"].append(production_schedule(entry, job))
    return out


def production_job(entry: ContractEntry) -> Any:
    return dg.define_asset_job(
        job_name(entry),
        selection=dg.AssetSelection.assets(asset_key(entry, RECORDS), asset_key(entry, CHECK)),
        description=f"Ingest and check one day of production records of {entry.path}.",
        tags={"decguard/contract": entry.key},  # few tags: the run's verdict tag shows
    )


# -- assets ---------------------------------------------------------------------------------


def _broken(entry: ContractEntry, error: str) -> dg.AssetsDefinition:
    @dg.asset(
        key=asset_key(entry, RECORDS),
        group_name=entry.key,
        description=f"BROKEN PRODUCTION SETTINGS:\n\n{error}",
    )
    def production_records() -> dg.MaterializeResult:
        raise dg.Failure(description=error)

    return production_records


def _production_day(
    entry: ContractEntry, parts: dg.DailyPartitionsDefinition
) -> dg.AssetsDefinition:
    """Both daily assets and the day's gate checks in one step: the records ingested (and
    checked once) are the columns the check measures, with no read-back of the day. Either
    asset alone, or the checks alone, can still be materialised (``can_subset``)."""
    start, origin = schedule.start_date(entry)
    rule = sources.settings(entry.require()).baseline
    records, checked = asset_key(entry, RECORDS), asset_key(entry, CHECK)
    if rule == baseline.PREVIOUS:  # the day and the day before (the baseline, when it has records)
        mapping = dg.TimeWindowPartitionMapping(
            start_offset=-1, allow_nonexistent_upstream_partitions=True
        )
        deps: list[Any] = [dg.AssetDep(records, partition_mapping=mapping)]
    else:
        deps = [records]
    common = {
        "group_name": entry.key,
        "code_version": code_version(entry),
        "metadata": contract_link(entry.key),
    }
    specs = [
        dg.AssetSpec(
            records, **common, deps=[asset_key(entry, "contract")], kinds={"python", "parquet"},
            description=(
                "The day's production records, checked strictly as `check` checks them and "
                f"stored normalised: `{sources.production_root()}/{entry.key}/<day>.jsonl` "
                f"(`${sources.ENV_DIR}`), else `{sources.INBOX}` rows for the day. First day "
                f"{start} ({origin})."
            ),
            skippable=True,
        ),
        dg.AssetSpec(
            checked, **common, deps=deps, kinds={"python", "parquet", "json"},
            description=(
                "DecGuard's production check of the day's stored records (metrics, drift, "
                f"segments, gates) against the baseline `{rule}` (pipeline.production.baseline); "
                "the check_version 0.1 report file and its sidecar next to the report "
                "files; label drift, calibration per model_version, a Wilson interval on "
                "accuracy and the records still lacking an outcome."
            ),
            skippable=True,
        ),
    ]  # fmt: skip
    gates = check.production_gates(entry.require())
    checks = [
        Gate(name, level, (key, gate, level), _describe(key, gate, level))
        for name, (key, gate, level) in zip(check_names(gates), gates, strict=True)
    ]
    check_specs = [
        dg.AssetCheckSpec(
            g.name, asset=checked, blocking=False, description=g.description, partitions_def=parts
        )
        for g in checks
    ]

    @dg.multi_asset(
        name=f"{entry.key}_production_day",
        specs=specs,
        check_specs=check_specs,
        partitions_def=parts,
        can_subset=True,
        description="Ingest one day of production records, check it against the baseline and "
        "report DecGuard's post-deployment gates (requirements ERROR, warnings WARN; segment "
        "gates per segment key, the worst segment of the day).",
    )
    def production_day(
        context: dg.AssetExecutionContext, warehouse: WarehouseResource
    ) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
        with one_transaction(warehouse):
            yield from _day(context, warehouse, wanted=context.selected_asset_keys)

    def _day(
        context: dg.AssetExecutionContext, warehouse: WarehouseResource, wanted: Any
    ) -> Iterator[dg.MaterializeResult | dg.AssetCheckResult]:
        ingested = None
        if records in wanted:
            ingested = _run_step(context, warehouse, ingest.ingest_day, entry)
            yield dg.MaterializeResult(
                asset_key=records,
                metadata={
                    **records_metadata(ingested),
                    **day_link(entry.key, context.partition_key),
                },
                data_version=dg.DataVersion(ingested.hash),
            )
        rows = None
        if checked in wanted:
            work = functools.partial(check.check_day, ingested=ingested)
            done = _run_step(context, warehouse, work, entry)
            rows = done.rows["production_checks"]
            metadata = {**check_metadata(done), **day_link(entry.key, context.partition_key)}
            yield dg.MaterializeResult(asset_key=checked, metadata=metadata)
            tag_verdict(context, done.status)  # the day's verdict on its run, as a target's
        yield from _gate_results(context, warehouse, entry, checks, checked, rows)

    return production_day


def _gate_results(
    context: dg.AssetExecutionContext,
    warehouse: WarehouseResource,
    entry: ContractEntry,
    gates: list[Gate],
    asset: dg.AssetKey,
    rows: list[dict[str, Any]] | None,
) -> Iterator[dg.AssetCheckResult]:
    """The selected gate checks from the check rows this step wrote (else the stored ones
    of the day: the checks materialised without the asset)."""
    wanted = {key.name for key in context.selected_asset_check_keys}
    if not any(g.name in wanted for g in gates):
        return
    if rows is not None:
        outcomes = check.gate_outcomes(rows, entry.require())
    else:
        outcomes = _run_step(context, warehouse, _stored_outcomes, entry)
    yield from check_results(
        entry, asset, gates, outcomes, context.log,
        result=check_result, selected=wanted.__contains__,
    )  # fmt: skip


def _stored_outcomes(
    entry: ContractEntry, day: str, step: Step
) -> dict[tuple[str | None, str, str], dict[str, Any]]:
    return check.check_outcomes(entry, day, step.warehouse, step.run_id)


def _run_step(
    context: dg.AssetExecutionContext,
    warehouse: WarehouseResource,
    work: Callable[[ContractEntry, str, Step], T],
    entry: ContractEntry,
) -> T:
    """A day's step for the partition being materialised; its errors fail the asset with
    DecGuard's message. Called directly (tests: no run), the step gets a run id of its own."""
    try:
        run_id = context.run.run_id
    except dg.DagsterError:
        run_id = f"direct-{uuid.uuid4().hex[:12]}"
    try:
        return work(entry, context.partition_key, Step(warehouse.get(), run_id))
    except DecGuardError as exc:
        raise dg.Failure(description=str(exc)) from exc


# -- checks ---------------------------------------------------------------------------------


def check_names(gates: list[tuple[str | None, str, str]]) -> list[str]:
    """``min_accuracy`` / ``max_ece_warning`` for aggregate gates,
    ``segment_locale__min_accuracy`` (``…_warning``) per segment key; unique identifiers."""
    names: list[str] = []
    for key, gate, level in gates:
        base = check_name(gate, level)
        if key is not None:
            base = f"segment_{_NOT_IDENT.sub('_', key)}__{base}"
        name, n = base, 1
        while name in names:
            n += 1
            name = f"{base}_{n}"
        names.append(name)
    return names


def _describe(key: str | None, gate: str, level: str) -> str:
    if key is None:
        return f"production {level} {gate}"
    return f"segment {level} {gate} on every value of metadata.{key} (the worst segment decides)"


def check_result(row: Mapping[str, Any], asset: dg.AssetKey, name: str) -> dg.AssetCheckResult:
    """A stored production check: value, threshold and DecGuard's message; for a segment
    gate those of the worst segment, and every segment's row."""
    extra: dict[str, Any] = {"baseline": row["baseline"] or "none"}
    if "segments" in row:
        extra["segment"] = f"{row['segment_key']}={row['segment_value']}"
        extra["segments"] = md.outcomes_table(row["segments"], "segment_value")
    return gate_result(row, asset, name, extra)


# -- the schedule ---------------------------------------------------------------------------


def production_schedule(entry: ContractEntry, job: Any) -> dg.ScheduleDefinition:
    @dg.schedule(
        name=schedule_name(entry),
        cron_schedule=cron(),
        execution_timezone="UTC",
        job=job,
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description="Check yesterday's production records (or, when yesterday has none, the "
        "latest day with records not checked yet).",
    )
    def daily(
        context: dg.ScheduleEvaluationContext, warehouse: WarehouseResource
    ) -> dg.RunRequest | dg.SkipReason:
        tick = context.scheduled_execution_time or datetime.now(UTC)
        start, _ = schedule.start_date(entry)
        day, why = schedule.day_to_check(
            entry.key, tick.astimezone(UTC).date(), warehouse.get(), start
        )
        if day is None:
            return dg.SkipReason(f"{entry.key}: {why}")
        return dg.RunRequest(
            partition_key=day,
            run_key=f"production|{entry.key}|{day}|{tick.isoformat()}",
            # the day is the run's partition tag
            tags={"decguard/trigger": "schedule", "decguard/why": why},
        )

    return daily


def production_days(entry: ContractEntry) -> list[str]:
    """Days with a records file that are daily partitions of the contract, oldest first
    (what the main job checks)."""
    if not enabled(entry) or _usable(entry) is not None:
        return []
    parts = daily_partitions(entry)
    return [d for d in sources.file_days(entry.key) if parts.has_partition_key(d)]
