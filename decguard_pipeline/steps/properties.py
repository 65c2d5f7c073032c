"""Metamorphic properties as a step (issue 5): what the ``property_results`` asset,
its checks and the DecGuard ``report`` call. No Dagster here.

The originals are the newest golden evaluation of the target in the warehouse
(``case_results``): they are not decided again. Every enabled property runs with the
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
from pathlib import Path
from typing import Any

from decguard_pipeline.core.contract import LoadedContract
from decguard_pipeline.core.dataset import gc_paused
from decguard_pipeline.core.errors import DecGuardError
from decguard_pipeline.core.gates import overall_status
from decguard_pipeline.core.properties.summary import is_failed, property_checks
from decguard_pipeline.core.report.jsonio import write_document
from decguard_pipeline.steps import base as steps
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.steps.targets import backend_of
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline.warehouse.rows import golden as T
from decguard_pipeline.warehouse.store import now

SOURCE = "properties"  # ``source`` of the rows in ``property_checks``
SECTION_SUFFIX = ".properties.json"
TABLES = ("property_pairs", "property_skips", "property_summaries", "property_checks")


def enabled(loaded: LoadedContract) -> bool:
    """The contract enables at least one property."""
    return bool(loaded.contract.properties.enabled())


def gate_list(loaded: LoadedContract) -> list[tuple[str, str]]:
    """``(gate, level)`` of every property check in DecGuard's order: per enabled property
    ``<p>.max_error_rate`` (always a requirement), ``<p>.max_violation_rate`` and
    ``<p>.max_flip_rate`` at the property's level, when configured."""
    return [(c["gate"], c["level"]) for c in property_checks([], loaded.contract.properties)]


def check_name(gate: str) -> str:
    """A Dagster check name (an identifier): ``option_order.max_error_rate`` ->
    ``option_order__max_error_rate``."""
    return gate.replace(".", "__")


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


def run_target(
    entry: ContractEntry, target: str, step: steps.Step, *, max_concurrency: int | None = None
) -> PropertyRun:
    """Every enabled property of the contract against the target's backend, the newest golden
    results of the target as originals; the stored section and the warehouse rows."""
    from decguard_pipeline.runs.golden import check_health, make_backend
    from decguard_pipeline.runs.properties import run_properties
    from decguard_pipeline.steps.cache import target_cache

    loaded = entry.require()
    plan = _plan(loaded)  # a ContractError before any backend call
    wh = step.warehouse
    evaluated = steps.load_evaluated(entry, target, wh, step.run_id)
    started = now()
    clock = time.perf_counter()
    backend = make_backend(loaded, backend_of(target), cache=target_cache(entry, target, step))
    try:
        health = check_health(backend)
        outcome = run_properties(
            plan, loaded, backend, evaluated.results,
            max_concurrency=max_concurrency or loaded.contract.evaluation.max_concurrency,
        )  # fmt: skip
    finally:
        backend.close()
    wall = time.perf_counter() - clock
    section, checks = outcome

    directory = wh.partition_dir("report_files", entry.key, target)
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

    who = {"backend": evaluated.run["backend"], "model_version": evaluated.run["model_version"]}
    base = {"contract": entry.key, "target": target, "run_id": step.run_id, "recorded_at": step.at}
    summaries = section["summaries"]
    run = {
        **base,
        **who,
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
    done.rows = _rows(done, {**base, **who})
    where = {"contract": entry.key, "target": target, "run_id": step.run_id, "recorded_at": step.at}
    for table in TABLES:
        wh.write(table, done.rows[table], **where)
    wh.write("property_runs", [run], **where)  # last: it points at everything else
    return done


# -- rows --------------------------------------------------------------------------------


def _json(value: Any) -> str | None:
    return None if value is None else T.to_json(value)


def pair_row(pair: dict[str, Any], position: int) -> dict[str, Any]:
    """A pair of the section as a ``property_pairs`` row (without the key columns)."""
    result, comparison, error = pair["result"], pair["comparison"], pair["error"]
    presentation, reduced = pair["presentation"], pair["reduced"]
    comparison = comparison or {}
    probabilities = result["probabilities"] if result is not None else None
    return {
        "position": position,
        "pair_id": pair["id"],
        "property": pair["property"],
        "case_id": pair["case_id"],
        "sample": pair["sample"],
        "steps_json": T.to_json(pair["steps"]),
        "provenance_json": T.to_json(pair["provenance"]),
        "input_text": T.input_text(pair["input"]),
        "input_json": T.to_json(pair["input"]),
        "presentation_json": _json(presentation),
        "shown_labels": None if presentation is None else [s for s, _ in presentation],
        "labels": None if result is None else result["labels"],
        "probs_after": None if probabilities is None else list(probabilities.values()),
        "probabilities_after": None if probabilities is None else list(probabilities.items()),
        "selected_before": comparison.get("selected_before"),
        "selected_after": comparison.get("selected_after"),
        "confidence_after": None if result is None else result["confidence"],
        "latency_ms": None if result is None else result["latency_ms"],
        "result_model": None if result is None else result["model"],
        "result_model_version": None if result is None else result["model_version"],
        "result_metadata_json": None if result is None else T.to_json(result["metadata"]),
        "tv_distance": comparison.get("tv_distance"),
        "js_divergence": comparison.get("js_divergence"),
        "max_abs_delta": comparison.get("max_abs_delta"),
        "confidence_delta": comparison.get("confidence_delta"),
        "flipped": comparison.get("flipped"),
        "rank_changed": comparison.get("rank_changed"),
        "level_delta": comparison.get("level_delta"),
        "violations": list(pair["violations"]),
        "violated": bool(pair["violations"]),
        "failed": is_failed(pair),
        "error_kind": None if error is None else error["kind"],
        "error_message": None if error is None else error["message"],
        "reduced_json": _json(reduced),
        "reduced_input_text": None if reduced is None else T.input_text(reduced["input"]),
        "reduced_backend_calls": None if reduced is None else reduced["backend_calls"],
    }


def summary_row(
    summary: dict[str, Any], extension: dict[str, Any], confidence: float, status: str
) -> dict[str, Any]:
    """DecGuard's summary fields, the Wilson intervals and the calls of one property."""
    row = {k: v for k, v in summary.items() if k != "errors_by_kind"}
    violation = extension["violation_rate_interval"] or [None, None]
    flip = extension["flip_rate_interval"] or [None, None]
    calls = extension["backend_calls"]
    return {
        **row,
        "errors_by_kind_json": T.to_json(summary["errors_by_kind"]),
        "confidence": confidence,
        "violation_rate_low": violation[0],
        "violation_rate_high": violation[1],
        "flip_rate_low": flip[0],
        "flip_rate_high": flip[1],
        "calls_transformed": calls["transformed"],
        "calls_minimize": calls["minimize"],
        "calls_total": calls["total"],
        "status": status,
    }


def _property_of(gate: str) -> str:
    return gate.split(".", 1)[0]


def _rows(done: PropertyRun, base: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    section, pipeline = done.section, done.pipeline
    extensions = {e["property"]: e for e in pipeline["summaries"]}
    by_property: dict[str, list[dict[str, Any]]] = {}
    for check in done.checks:
        by_property.setdefault(_property_of(check["gate"]), []).append(check)
    return {
        "property_pairs": [
            {**base, **pair_row(pair, i)} for i, pair in enumerate(section["pairs"])
        ],
        "property_skips": [
            {**base, "position": i, **skip} for i, skip in enumerate(section["skipped"])
        ],
        "property_summaries": [
            {
                **base,
                "position": i,
                **summary_row(
                    s,
                    extensions[s["property"]],
                    pipeline["confidence"],
                    overall_status(by_property.get(s["property"], [])),
                ),
            }
            for i, s in enumerate(section["summaries"])
        ],
        "property_checks": [
            {**base, "source": SOURCE, **c, "property": _property_of(c["gate"])}
            for c in done.checks
        ],
    }


# -- checks and the report ---------------------------------------------------------------


def check_rows(
    entry: ContractEntry, target: str, warehouse: Warehouse, run_id: str | None = None
) -> dict[str, dict]:
    """The property checks of a target by gate (what the asset checks report): those of run
    ``run_id`` when it wrote any, else the newest."""
    rows = steps.run_rows(warehouse, "property_checks", entry.key, target, run_id)
    if rows is None:
        raise DecGuardError(f"{entry.key}: target {target!r} has no property checks yet")
    return {r["gate"]: r for r in rows}


@dataclass
class StoredProperties:
    """What the mode ``all`` report takes from the newest ``property_results``."""

    section: dict[str, Any]
    checks: list[dict[str, Any]]
    pipeline: dict[str, Any]
    path: Path


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
    if not enabled(loaded):
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
    path = Path(row["section_path"])
    data = path.read_bytes()
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


def worst_pairs(section: dict[str, Any], limit: int = 20) -> list[dict[str, Any]]:
    """Failed pairs first (violations, then errors), then by TV distance, largest first."""

    def badness(pair: dict[str, Any]) -> tuple[int, int, float]:
        comparison = pair["comparison"] or {}
        return (
            len(pair["violations"]),
            int(is_failed(pair)),
            comparison.get("tv_distance") or 0.0,
        )

    ranked = sorted(section["pairs"], key=badness, reverse=True)  # stable: section order
    return ranked[:limit]
