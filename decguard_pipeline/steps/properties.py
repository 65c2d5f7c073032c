"""Metamorphic properties as a step (issue 5): what the ``property_results`` asset,
its checks and the DecGuard ``report`` call. No Dagster here.

The originals are the target's golden evaluation (this run's, in memory, else the newest in
the warehouse's ``case_results``): they are not decided again. Every enabled property runs with the
contract's ``fuzz`` settings through the target's backend and the concurrent runner, exactly
as ``test --all`` runs them (``runs.properties.run_properties``). The step writes

* ``<stem>.properties.json`` under ``report_files`` — DecGuard's ``properties`` section, the
  property checks and the sidecar section, with the golden run they were judged against: the
  ``report`` asset puts them into the mode ``all`` report unchanged;
* rows in ``property_runs``, ``property_pairs``, ``property_skips``, ``property_summaries``
  and ``property_checks``.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

from decguard_pipeline.core.collector import gc_paused
from decguard_pipeline.core.contract import LoadedContract
from decguard_pipeline.core.errors import DecGuardError
from decguard_pipeline.core.gates import overall_status
from decguard_pipeline.core.properties.summary import property_checks
from decguard_pipeline.core.report.jsonio import write_document
from decguard_pipeline.steps.base import Step, evaluated_of, run_rows
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline.warehouse.rows.properties import property_rows
from decguard_pipeline.warehouse.store import now

SECTION_SUFFIX = ".properties.json"
TABLES = ("property_pairs", "property_skips", "property_summaries", "property_checks")


def has_properties(loaded: LoadedContract) -> bool:
    """The contract enables at least one property."""
    return bool(loaded.contract.properties.enabled())


def gate_list(loaded: LoadedContract) -> list[tuple[str, str]]:
    """``(gate, level)`` of every property check in DecGuard's order: per enabled property
    ``<p>.max_error_rate`` (always a requirement), ``<p>.max_violation_rate`` and
    ``<p>.max_flip_rate`` at the property's level, when configured."""
    return [(c["gate"], c["level"]) for c in property_checks([], loaded.contract.properties)]


def _plan(loaded: LoadedContract) -> Any:
    from decguard_pipeline.runs.properties import plan_properties

    return plan_properties(loaded, None, seed=None, minimize=None)


@dataclass
class PropertyRun:
    """What one materialisation ran and wrote."""

    section: dict[str, Any]  # DecGuard's ``properties`` section
    checks: list[dict[str, Any]]  # DecGuard's property checks
    pipeline: dict[str, Any]  # the sidecar section: Wilson intervals, backend calls
    run: dict[str, Any]  # the ``property_runs`` row
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # table -> rows

    @property
    def status(self) -> str:
        return overall_status(self.checks)


def run_target(entry: ContractEntry, target: str, step: Step) -> PropertyRun:
    """Every enabled property of the contract against the target's backend, the newest golden
    results of the target as originals; the stored section and the warehouse rows."""
    from decguard_pipeline.runs.properties import run_properties
    from decguard_pipeline.steps.backend import target_backend

    loaded = entry.require()
    plan = _plan(loaded)  # a ContractError before any backend call
    wh = step.warehouse
    evaluated = evaluated_of(entry, target, step)
    started = now()
    clock = time.perf_counter()
    with target_backend(entry, target, step) as asking:  # the run's backend, checked once
        health = asking.health
        outcome = run_properties(plan, loaded, asking.backend, evaluated.results)
    wall = time.perf_counter() - clock
    section, checks = outcome

    directory = wh.files_dir(entry.key, target)
    path = directory / f"{step.at:%Y%m%dT%H%M%S%fZ}_{step.run_id}{SECTION_SUFFIX}"
    golden_run_id = evaluated.run["run_id"]
    stored = {
        "golden_run_id": golden_run_id,
        "contract_hash": loaded.hash,
        "section": section,
        "checks": checks,
        "pipeline": outcome.pipeline,
    }
    # the pairs encoded a batch at a time (the same bytes): never one string of the section
    write_document(path, stored, chunked=(("section", "pairs"),), what="property results")

    where = {"contract": entry.key, "target": target, "run_id": step.run_id, "recorded_at": step.at}
    base = {
        **where,
        "backend": evaluated.run["backend"],
        "model_version": evaluated.run["model_version"],
    }
    summaries = section["summaries"]
    run = {
        **base,
        "golden_run_id": golden_run_id,
        "contract_hash": loaded.hash,
        "seed": plan.seed,
        "minimize": plan.fuzz.minimize,
        "max_minimize_calls": plan.fuzz.max_minimize_calls,
        "text_field": plan.fuzz.text_field,
        "properties": list(plan.enabled),
        "n_cases": len(evaluated.results),
        "n_pairs": len(section["pairs"]),
        "n_skipped": len(section["skipped"]),
        "n_errors": sum(s["n_errors"] for s in summaries),
        "n_violations": sum(s["n_violations"] for s in summaries),
        "backend_calls": outcome.pipeline["backend_calls"],
        "status": overall_status(checks),
        "health_status": health["status"],
        "health_detail": health["detail"],
        "started_at": started,
        "wall_s": wall,
        "section_path": str(path),
        "section_sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
    }
    done = PropertyRun(section, checks, outcome.pipeline, run)
    done.rows = property_rows(section, checks, outcome.pipeline, base)
    for table in TABLES:
        wh.write(table, done.rows[table], **where)
    wh.write("property_runs", [run], **where)  # last: it points at everything else
    return done


# -- checks and the report ---------------------------------------------------------------


def check_rows(
    entry: ContractEntry, target: str, warehouse: Warehouse, run_id: str | None = None
) -> dict[str, dict]:
    """The property checks of a target by gate (what the asset checks report): those of run
    ``run_id`` when it wrote any, else the newest."""
    rows = run_rows(warehouse, "property_checks", entry.key, target, run_id)
    if rows is None:
        raise DecGuardError(f"{entry.key}: target {target!r} has no property checks yet")
    return {r["gate"]: r for r in rows}


@dataclass
class StoredProperties:
    """What the mode ``all`` report takes from the newest ``property_results``."""

    section: dict[str, Any]
    checks: list[dict[str, Any]]
    pipeline: dict[str, Any]
    path: str  # where the section is stored (a local path or the object's URL)


def stored_for_report(
    entry: ContractEntry,
    target: str,
    warehouse: Warehouse,
    golden_run: dict[str, Any],
    run_id: str | None = None,
) -> StoredProperties | None:
    """The stored properties section and checks for the report of ``golden_run`` (those of
    run ``run_id`` when it wrote any, else the newest); None when the contract enables no
    property. Raises when they were judged against other originals or other property
    settings than the report's (the report would not verify)."""
    loaded = entry.require()
    if not has_properties(loaded):
        return None
    table = "property_runs"
    runs = None if run_id is None else warehouse.read_run(table, entry.key, target, run_id)
    if runs is None or runs.num_rows == 0:
        runs = warehouse.read_latest(table, entry.key, target)
    if runs is None or runs.num_rows == 0:
        raise DecGuardError(
            f"{entry.key}: target {target!r} has no property results yet; "
            "materialise property_results first"
        )
    row = runs.to_pylist()[-1]
    if row["golden_run_id"] != golden_run["run_id"]:
        raise DecGuardError(
            f"{entry.key}: the property results of target {target!r} compare with the golden "
            f"run {row['golden_run_id']}, not with the newest one ({golden_run['run_id']}); "
            "materialise property_results again"
        )
    path = row["section_path"]  # a local path, or s3://... on an object-storage warehouse
    data = warehouse.read_bytes(path)
    if hashlib.sha256(data).hexdigest() != row["section_sha256"]:
        raise DecGuardError(f"{path}: the stored property results were modified")
    # the standard parser: integers of any size (orjson would turn those beyond 64 bits into
    # floats); with the collector paused, as the section is many acyclic objects
    with gc_paused():
        stored = json.loads(data)
    plan = _plan(loaded)
    section = stored["section"]
    current = {key: getattr(plan, key).model_dump(mode="json") for key in ("fuzz", "config")}
    if {key: section[key] for key in current} != current:
        raise DecGuardError(
            f"{entry.path}: the properties or fuzz settings changed since property_results ran "
            f"for target {target!r}; materialise property_results again"
        )
    return StoredProperties(section, stored["checks"], stored["pipeline"], path)
