"""The evaluation steps, each reading its inputs from and writing its outputs to the
warehouse. The Dagster assets are thin wrappers around these functions."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from decguard_pipeline.core.dataset import Dataset
from decguard_pipeline.core.errors import DecGuardError
from decguard_pipeline.core.golden.statistics import golden_statistics, statistics_settings
from decguard_pipeline.core.report.golden import (
    Report,
    build_report,
    checks_for,
    dataset_info,
    metrics_for,
    result_records,
)
from decguard_pipeline.core.report.jsonio import write_document
from decguard_pipeline.core.report.render import render_report
from decguard_pipeline.core.report.sidecar import write_section
from decguard_pipeline.core.report.verify import load_report
from decguard_pipeline.steps.base import Evaluated, Step, load_evaluated, run_rows
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.steps.targets import Target, backend_of
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline.warehouse.rows import golden as T
from decguard_pipeline.warehouse.store import now


def record_contract(entry: ContractEntry, step: Step) -> dict[str, Any]:
    loaded = entry.require()
    row = T.contract_row(entry.key, loaded, run_id=step.run_id, at=step.at)
    step.warehouse.write(
        "contracts", [row], contract=entry.key, run_id=step.run_id, recorded_at=step.at
    )
    return row


def load_golden(entry: ContractEntry) -> Dataset:
    from decguard_pipeline.runs.golden import resolve_dataset

    return resolve_dataset(entry.require(), None)


def dataset_hash(entry: ContractEntry) -> str | None:
    """sha256 over the contract's golden dataset and its suite files (cheap; what the sensor
    compares to decide whether evaluations are stale)."""
    loaded = entry.loaded
    if loaded is None:
        return None
    named = [loaded.contract.dataset] if loaded.contract.dataset is not None else []
    pipeline = loaded.contract.pipeline
    if pipeline is not None and pipeline.suites:
        named += [pipeline.suites[name] for name in sorted(pipeline.suites)]
    if not named:
        return None
    digest = hashlib.sha256()
    for name in named:
        try:
            digest.update(loaded.resolve(name).read_bytes())
        except OSError:
            digest.update(b"<missing>")
    return "sha256:" + digest.hexdigest()


def record_dataset(entry: ContractEntry, step: Step) -> tuple[Dataset, dict[str, Any]]:
    data = load_golden(entry)
    keys = {"contract": entry.key, "target": "_", "run_id": step.run_id, "recorded_at": step.at}
    row = {
        **keys,
        "dataset_hash": data.hash,
        "path": str(data.path),
        "n_cases": len(data),
        "n_labeled": data.n_labeled,
    }
    wh = step.warehouse
    wh.write("datasets", [row], contract=entry.key, run_id=step.run_id, recorded_at=step.at)
    cases = [
        {
            **keys,
            "dataset_hash": data.hash,
            "position": i,
            "case_id": case_id,
            "input_text": T.input_text(value),
            "input_json": T.to_json(value),
            "expected": expected,
            "metadata_json": T.to_json(meta),
        }
        for i, (case_id, value, expected, meta) in enumerate(
            zip(data.ids, data.inputs, data.expected, data.metadata, strict=True)
        )
    ]
    wh.write("cases", cases, contract=entry.key, run_id=step.run_id, recorded_at=step.at)
    return data, row


# What identifies a registration: a new row is written only when one of these changed.
TARGET_FIELDS = ("backend", "provider", "model", "model_version", "version_source")


def record_target(entry: ContractEntry, target: Target, step: Step) -> bool:
    """Record a target in ``targets`` when it is new or its registration changed (a sensor
    tick or an ``evaluate`` that finds the same version writes nothing); returns whether a
    row was written."""
    row = {
        "contract": entry.key,
        "target": target.key,
        "run_id": step.run_id,
        "recorded_at": step.at,
        **target.as_row(),
    }
    row.pop("key")
    latest = step.warehouse.read_latest("targets", entry.key, target.key)
    if latest is not None and latest.num_rows:
        last = latest.to_pylist()[-1]
        if all(last[name] == row[name] for name in TARGET_FIELDS):
            return False
    step.warehouse.write(
        "targets",
        [row],
        contract=entry.key,
        target=target.key,
        run_id=step.run_id,
        recorded_at=step.at,
    )
    return True


def evaluate_target(
    entry: ContractEntry, target: str, step: Step, *, max_concurrency: int | None = None
) -> Evaluated:
    """Decide every golden case with the target's backend; write ``case_results`` and ``runs``."""
    from decguard_pipeline.runs.golden import check_health, decide_dataset, make_backend
    from decguard_pipeline.steps.cache import target_cache

    loaded = entry.require()
    data = load_golden(entry)
    started = now()
    clock = time.perf_counter()
    backend = make_backend(loaded, backend_of(target), cache=target_cache(entry, target, step))
    try:
        health = check_health(backend)
        results = decide_dataset(loaded, data, backend, max_concurrency=max_concurrency)
        meta = backend.metadata()
    finally:
        backend.close()
    wall = time.perf_counter() - clock
    versions = {v for v in results.model_version if v is not None}
    model_version = meta["model_version"] or (versions.pop() if len(versions) == 1 else None)
    wh = step.warehouse
    table = T.case_results_table(
        results,
        contract=entry.key,
        target=target,
        run_id=step.run_id,
        recorded_at=step.at,
        model_version=model_version,
    )
    wh.write(
        "case_results",
        table,
        contract=entry.key,
        target=target,
        run_id=step.run_id,
        recorded_at=step.at,
    )
    run = {
        "contract": entry.key,
        "target": target,
        "run_id": step.run_id,
        "recorded_at": step.at,
        "dagster_run_id": step.run_id,
        "backend": meta["name"],
        "provider": meta["provider"],
        "model": meta["model"],
        "model_version": model_version,
        "contract_hash": loaded.hash,
        "dataset_hash": data.hash,
        "dataset_path": str(data.path),
        "n_cases": len(data),
        "n_labeled": data.n_labeled,
        "n_errored": int((~results.ok).sum()),
        "health_status": health["status"],
        "health_detail": health["detail"],
        "backend_details_json": T.to_json(meta["details"]),
        "started_at": started,
        "wall_s": wall,
    }
    wh.write(
        "runs", [run], contract=entry.key, target=target, run_id=step.run_id, recorded_at=step.at
    )
    return Evaluated(results, run)


@dataclass
class Scored:
    metrics: dict[str, Any]
    checks: list[dict[str, Any]]
    evaluated: Evaluated
    intervals: dict[str, Any] | None = None  # with pipeline.statistics


def score_target(entry: ContractEntry, target: str, step: Step) -> Scored:
    """Golden metrics and gate checks of the newest evaluation; written to ``metrics``,
    ``per_label_metrics``, ``reliability_bins`` and ``gate_results``."""
    loaded = entry.require()
    evaluated = load_evaluated(entry, target, step.warehouse, step.run_id)
    contract = loaded.contract
    metrics = metrics_for(evaluated.results, contract.evaluation)
    checks = checks_for("test", contract.requirements, contract.warnings, metrics)
    base = T.run_base(
        contract=entry.key,
        target=target,
        run_id=step.run_id,
        at=step.at,
        backend=evaluated.run["backend"],
        model_version=evaluated.run["model_version"],
    )
    wh = step.warehouse
    where = {"contract": entry.key, "target": target, "run_id": step.run_id, "recorded_at": step.at}
    wh.write("metrics", T.metrics_rows(metrics, base), **where)
    wh.write("per_label_metrics", T.per_label_rows(metrics, base), **where)
    wh.write("reliability_bins", T.reliability_rows(metrics, base), **where)
    wh.write("gate_results", T.gate_rows(checks, base, source="golden"), **where)
    intervals = None
    settings = statistics_settings(contract)
    if settings is not None:
        intervals = golden_statistics(evaluated.results, metrics, settings)
        wh.write("metric_intervals", T.interval_rows(intervals, base), **where)
    return Scored(metrics, checks, evaluated, intervals)


def gate_results(
    entry: ContractEntry, target: str, warehouse: Warehouse, run_id: str | None = None
) -> dict[tuple[str, str, str], dict[str, Any]]:
    """The golden gate checks of a target by (source, gate, level): what asset checks report."""
    rows = run_rows(warehouse, "gate_results", entry.key, target, run_id)
    if rows is None:
        raise DecGuardError(f"{entry.key}: target {target!r} has no gate results yet")
    return {(r["source"], r["gate"], r["level"]): r for r in rows}


def report_for(
    entry: ContractEntry,
    target: str,
    warehouse: Warehouse,
    evaluated: Evaluated | None = None,
    *,
    with_properties: bool = False,
    run_id: str | None = None,
) -> Report:
    """The DecGuard report of the evaluation by run ``run_id`` (else the newest), against the
    current contract.

    ``with_properties``: when the contract enables properties, the mode ``all`` report with the
    stored section and checks of ``property_results`` (``steps/properties.py``)."""
    loaded = entry.require()
    evaluated = evaluated or load_evaluated(entry, target, warehouse, run_id)
    run = evaluated.run
    stored = None
    if with_properties:
        from decguard_pipeline.steps.properties import stored_for_report

        stored = stored_for_report(entry, target, warehouse, run, run_id)
    backend = {
        "name": run["backend"],
        "provider": run["provider"],
        "model": run["model"],
        "model_version": run["model_version"],
        "details": json.loads(run["backend_details_json"] or "{}"),
    }
    health = {"status": run["health_status"], "detail": run["health_detail"]}
    report = build_report(
        loaded,
        dataset_info(run["dataset_path"], run["dataset_hash"], run["n_cases"], run["n_labeled"]),
        backend,
        evaluated.results,
        health=health,
        **(
            {"mode": "all", "properties": stored.section, "property_checks": stored.checks}
            if stored is not None
            else {}
        ),
    )
    if stored is not None:
        report.extensions["properties"] = stored.pipeline  # sidecar section, as `test --all`
    return report


def write_report(entry: ContractEntry, target: str, step: Step) -> tuple[Path, Report]:
    """Write the report file (verified by loading it back) and its ``reports`` row."""
    report = report_for(entry, target, step.warehouse, with_properties=True, run_id=step.run_id)
    wh = step.warehouse
    stamp = step.at.strftime("%Y%m%dT%H%M%S%fZ")
    path = wh.partition_dir("report_files", entry.key, target) / f"{stamp}_{step.run_id}.json"
    write_document(
        path, report.document, stream_key="results", items=result_records(report.results)
    )
    load_report(path)  # the file must verify exactly, as DecGuard would check it
    for name, section in report.extensions.items():  # <stem>.pipeline.json, as -o writes
        write_section(path, report.document, name, section)
    doc = report.document
    wh.write(
        "reports",
        [
            {
                "contract": entry.key,
                "target": target,
                "run_id": step.run_id,
                "recorded_at": step.at,
                "mode": doc["mode"],
                "status": doc["status"],
                "exit_code": doc["exit_code"],
                "path": str(path),
                "report_sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            }
        ],
        contract=entry.key,
        target=target,
        run_id=step.run_id,
        recorded_at=step.at,
    )
    return path, report


def summary_markdown(report: Report) -> str:
    """The terminal summary, as the UI shows it."""
    return "```\n" + render_report(report.document) + "\n```"
