"""Which days the daily partitions and the schedule cover: the first partition, the day the
schedule checks, and a checked day's summary line for the main job."""

from __future__ import annotations

import os
from datetime import date
from typing import Any

from decguard_pipeline.core.errors import DecGuardError
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.steps.production.sources import (
    checked_days,
    day_before,
    day_file,
    file_days,
    has_records,
    parse_day,
    record_days,
    settings,
)
from decguard_pipeline.warehouse import Warehouse

ENV_START = "DECGUARD_PRODUCTION_START"
# the first daily partition when nothing else says (no setting, no variable, no file)
DEFAULT_START = date(2026, 1, 1)


def start_date(entry: ContractEntry) -> tuple[date, str]:
    """The first daily partition and where it came from: the contract's
    ``pipeline.production.start_date``, ``$DECGUARD_PRODUCTION_START``, the earliest records
    file of the contract, else :data:`DEFAULT_START`."""
    configured = settings(entry.require()).start_date if entry.ok else None
    if configured is not None:
        return configured, "pipeline.production.start_date"
    env = os.environ.get(ENV_START, "").strip()
    if env:
        parsed = parse_day(env)
        if parsed is None:
            raise DecGuardError(f"${ENV_START}: {env!r} is not a date (YYYY-MM-DD)")
        return parsed, f"${ENV_START}"
    days = file_days(entry.key)
    if days:
        return date.fromisoformat(days[0]), f"earliest file {day_file(entry.key, days[0])}"
    return DEFAULT_START, "default"


def summary_row(
    contract: str, day: str, warehouse: Warehouse, run_id: str | None = None
) -> dict[str, Any] | None:
    """Status, accuracy and drift of the check of a day by run ``run_id`` (by default the
    newest check); None when there is none."""
    runs = (
        warehouse.read_latest("production_runs", contract, day)
        if run_id is None
        else warehouse.read_run("production_runs", contract, day, run_id)
    )
    if runs is None or runs.num_rows == 0:
        return None
    run = runs.to_pylist()[-1]
    drift = warehouse.read_run("production_drift", contract, day, run["run_id"])
    metrics = warehouse.read_run("production_metrics", contract, day, run["run_id"])
    values = {
        m["metric"]: m["value"]
        for m in (metrics.to_pylist() if metrics is not None else [])
        if m["segment_key"] is None
    }
    d = drift.to_pylist()[0] if drift is not None and drift.num_rows else {}
    return {
        "contract": contract,
        "day": day,
        "run_id": run["run_id"],
        "status": run["status"],
        "n_records": run["n_records"],
        "accuracy": values.get("outcomes.accuracy"),
        "confidence_tv_distance": d.get("confidence_tv_distance"),
        "baseline": run["baseline"],
        "baseline_rule": run["baseline_rule"],
    }


def day_to_check(
    contract: str, today: date, warehouse: Warehouse, first: date
) -> tuple[str | None, str]:
    """What the daily schedule checks on ``today``: yesterday when it has records, else the
    latest earlier day with records that was never checked; None (and why) when neither."""
    yesterday = day_before(today.isoformat())
    if yesterday < first:
        return None, f"{yesterday} is before the first production day {first}"
    if has_records(contract, yesterday.isoformat(), warehouse):
        return yesterday.isoformat(), "yesterday"
    days = [
        d for d in record_days(contract, warehouse) if first <= date.fromisoformat(d) < yesterday
    ]
    if not days:
        return None, f"no production records for {yesterday} nor any earlier day"
    if days[-1] in checked_days(contract, warehouse):
        return None, (
            f"no production records for {yesterday}; the latest day with records, {days[-1]}, "
            "is checked already"
        )
    return days[-1], "latest day with records"
