"""The golden evaluation as steps: what the assets contract, golden_dataset, case_results,
golden_metrics and report call (``defs/assets/golden.py``), each writing its rows to the
warehouse (built by ``warehouse/rows/golden.py``). No Dagster here.

Within a target run the evaluation flows in memory (``steps/base.TargetRun``): the target's
DecGuard report is built once (:func:`golden_of`), its metrics and checks are what
``golden_metrics`` stores and shows, what the diff, guard and calibrator steps measure and
what the ``report`` step writes. A step run on its own reads the evaluation back.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from decguard_pipeline.core.calibration.extension import SECTION as CALIBRATION
from decguard_pipeline.core.consistency.section import SECTION as CONSISTENCY
from decguard_pipeline.core.dataset import Dataset
from decguard_pipeline.core.errors import DecGuardError
from decguard_pipeline.core.golden.statistics import golden_statistics, statistics_settings
from decguard_pipeline.core.guard.curves import evaluation_curves
from decguard_pipeline.core.report.golden import (
    Report,
    build_report,
    dataset_info,
    result_records,
    with_property_results,
)
from decguard_pipeline.core.report.html import write_report_html
from decguard_pipeline.core.report.jsonio import write_document
from decguard_pipeline.core.report.sidecar import write_sections
from decguard_pipeline.core.report.verify import load_report
from decguard_pipeline.core.results import served_version
from decguard_pipeline.core.usage import USAGE
from decguard_pipeline.core.verdict import Verdict
from decguard_pipeline.steps.base import Evaluated, Step, evaluated_of, load_evaluated, run_rows
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.steps.targets import Target
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline.warehouse.rows.base import to_json
from decguard_pipeline.warehouse.rows.calibration import calibration_rows, curve_rows
from decguard_pipeline.warehouse.rows.consistency import (
    consistency_column,
    consistency_rows,
    stored_consistency,
)
from decguard_pipeline.warehouse.rows.golden import (
    case_results_table,
    case_rows,
    contract_row,
    dataset_row,
    gate_rows,
    interval_rows,
    intervals_section,
    metrics_rows,
    per_label_rows,
    reliability_rows,
    report_row,
    run_base,
    run_row,
    usage_rows,
)
from decguard_pipeline.warehouse.store import now

COST_SOURCE = "cost"  # gate_results.source of the cost gates (pipeline.requirements/warnings)


def record_contract(entry: ContractEntry, step: Step) -> dict[str, Any]:
    keys = step.keys(entry.key)
    row = contract_row(entry.require(), keys)
    step.warehouse.write("contracts", [row], **keys)
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
    keys = step.keys(entry.key)
    row = dataset_row(data, keys)
    step.warehouse.write("datasets", [row], **keys)
    step.warehouse.write("cases", case_rows(data, keys), **keys)
    return data, row


# What identifies a registration: a new row is written only when one of these changed.
TARGET_FIELDS = ("backend", "provider", "model", "model_version", "version_source")


def record_target(entry: ContractEntry, target: Target, step: Step) -> bool:
    """Record a target in ``targets`` when it is new or its registration changed (a sensor
    tick or an ``evaluate`` that finds the same version writes nothing); returns whether a
    row was written."""
    keys = step.keys(entry.key, target.key)
    row = {**keys, **target.as_row()}
    row.pop("key")
    latest = step.warehouse.read_latest("targets", entry.key, target.key)
    if latest is not None and latest.num_rows:
        last = latest.to_pylist()[-1]
        if all(last[name] == row[name] for name in TARGET_FIELDS):
            return False
    step.warehouse.write("targets", [row], **keys)
    return True


def evaluate_target(entry: ContractEntry, target: str, step: Step) -> Evaluated:
    """Decide every golden case with the target's backend, as many at a time as the
    contract's ``evaluation.max_concurrency`` (the project has no other setting for it),
    as ``test`` does (``runs.golden.ask_golden``); write ``case_results`` and ``runs``. The
    evaluation stays in memory for the run's later parts."""
    from decguard_pipeline.runs.golden import ask_golden
    from decguard_pipeline.steps.backend import target_backend

    loaded = entry.require()
    data = load_golden(entry)
    started = now()
    clock = time.perf_counter()
    with target_backend(entry, target, step) as asking:
        asked = ask_golden(loaded, data, asking.backend)
    wall = time.perf_counter() - clock - asked.repeats_s
    results = asked.results
    model_version = served_version(asked.metadata, results)
    keys = step.keys(entry.key, target)
    table = case_results_table(
        results,
        contract=entry.key,
        target=target,
        run_id=step.run_id,
        recorded_at=step.at,
        model_version=model_version,
    )
    step.warehouse.write("case_results", table, **keys)
    run = run_row(
        keys,
        loaded=loaded,
        data=data,
        results=results,
        meta=asked.metadata,
        model_version=model_version,
        health=asking.health,
        started_at=started,
        wall_s=wall,
        usage=asked.usage,
    ) | consistency_column(asked.consistency)
    cache = asking.cache
    run["cache_json"] = None if cache is None else to_json(cache.stats.section())
    step.warehouse.write("runs", [run], **keys)
    evaluated = Evaluated(results, run)
    if step.shared is not None:  # the run's later parts work on it, not on a read-back
        step.shared.evaluated, step.shared.golden = evaluated, None
    return evaluated


@dataclass
class GoldenReport:
    """A target's golden evaluation and its DecGuard report, built once: the golden metrics
    and checks are the report's own sections, so whoever stores, shows or measures them uses
    the same objects instead of computing them again."""

    evaluated: Evaluated
    report: Report
    intervals: dict[str, Any] | None = None  # with pipeline.statistics, set by score_target
    # reliability (equal-width and equal-mass) and risk-coverage, set by score_target
    curves: dict[str, Any] | None = None

    @property
    def metrics(self) -> dict[str, Any]:
        return self.report.document["metrics"]

    @property
    def checks(self) -> list[dict[str, Any]]:
        return self.report.document["checks"]

    @property
    def usage(self) -> dict[str, Any] | None:
        """The run's usage section with the cost gates' checks (core/usage.py), if any."""
        return self.report.extensions.get(USAGE)

    @property
    def consistency(self) -> dict[str, Any] | None:
        """The consistency section of an evaluation with pipeline.repeats (else None)."""
        return self.report.extensions.get(CONSISTENCY)

    @property
    def calibration(self) -> dict[str, Any] | None:
        """The calibration measures' sidecar section (None unless the contract asks)."""
        return self.report.extensions.get(CALIBRATION)


def golden_report(
    entry: ContractEntry,
    target: str,
    warehouse: Warehouse,
    *,
    run_id: str | None = None,
    evaluated: Evaluated | None = None,
    measures: bool = True,
) -> GoldenReport:
    """The DecGuard report of the evaluation by run ``run_id`` (else the newest), or of
    ``evaluated`` when already read, against the current contract (the ``report`` step makes
    it the mode ``all`` report with the stored property results: ``write_report``).

    ``measures``: with the calibration measures' section (a bootstrap; a diff, which compares
    the reports' own numbers, goes without)."""
    loaded = entry.require()
    evaluated = evaluated or load_evaluated(entry, target, warehouse, run_id)
    run = evaluated.run
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
    )
    from decguard_pipeline.runs.golden import add_golden_sections

    # the sections `test` adds (runs/golden.py); the intervals are stored as rows instead
    add_golden_sections(loaded, report, stored_usage(run), statistics=False, measures=measures)
    consistency = stored_consistency(run)  # asked by the evaluation (pipeline.repeats)
    if consistency is not None:
        report.extensions[CONSISTENCY] = consistency
    return GoldenReport(evaluated, report)


def golden_of(entry: ContractEntry, target: str, step: Step) -> GoldenReport:
    """The golden report of the step's evaluation (``evaluated_of``): built once a target run,
    by its first part that needs it, and handed to the others (``Step.shared``); a step on
    its own builds it."""
    shared = step.shared
    if shared is not None and shared.golden is not None:
        return shared.golden
    evaluated = evaluated_of(entry, target, step)
    golden = golden_report(entry, target, step.warehouse, run_id=step.run_id, evaluated=evaluated)
    if shared is not None:
        shared.golden = golden
    return golden


def stored_usage(run: dict[str, Any]) -> dict[str, Any] | None:
    """A run's usage section as ``evaluate_target`` stored it (None: a run recorded before
    usage was)."""
    text = run.get("usage_json")
    return None if text is None else json.loads(text)


def score_target(entry: ContractEntry, target: str, step: Step) -> GoldenReport:
    """The golden report of this run's evaluation (else the newest); its metrics and gate
    checks written to ``metrics``, ``per_label_metrics``, ``reliability_bins`` and
    ``gate_results`` (and the intervals to ``metric_intervals`` with pipeline.statistics, the
    calibration measures to ``calibration``, ``calibration_curve`` and, source
    ``calibration``, ``gate_results`` with pipeline.calibration_measures). Its reliability
    and risk-coverage curves come with it, for the pictures."""
    golden = golden_of(entry, target, step)
    golden.curves = evaluation_curves(golden.evaluated.results, entry.require().contract)
    metrics = golden.metrics
    where = step.keys(entry.key, target)
    base = run_base(where, golden.evaluated.run)
    wh = step.warehouse
    usage = stored_usage(golden.evaluated.run)
    consistency = consistency_rows(golden.consistency, base)
    wh.write("metrics", metrics_rows(metrics, base) + usage_rows(usage, base) + consistency,
             **where)  # fmt: skip
    wh.write("per_label_metrics", per_label_rows(metrics, base), **where)
    wh.write("reliability_bins", reliability_rows(metrics, base), **where)
    checks = gate_rows(golden.checks, base, source="golden")
    checks += gate_rows((golden.usage or {}).get("checks", []), base, source=COST_SOURCE)
    calibration = golden.calibration
    if calibration is not None:  # its checks in the same write: one gate_results file a run
        checks += gate_rows(calibration["checks"], base, source=CALIBRATION)
        labels = list(entry.require().contract.labels)
        wh.write("calibration", calibration_rows(calibration, base, labels), **where)
        wh.write("calibration_curve", curve_rows(calibration, base), **where)
    wh.write("gate_results", checks, **where)
    settings = statistics_settings(entry.require().contract)
    if settings is not None:
        golden.intervals = golden_statistics(golden.evaluated.results, metrics, settings)
        wh.write("metric_intervals", interval_rows(golden.intervals, base), **where)
    return golden


def gate_results(
    entry: ContractEntry, target: str, warehouse: Warehouse, run_id: str | None = None
) -> dict[tuple[str, str, str], dict[str, Any]]:
    """The golden gate checks of a target by (source, gate, level): what asset checks report."""
    rows = run_rows(warehouse, "gate_results", entry.key, target, run_id)
    if rows is None:
        raise DecGuardError(f"{entry.key}: target {target!r} has no gate results yet")
    return {(r["source"], r["gate"], r["level"]): r for r in rows}


@dataclass
class WrittenReport:
    """A report file the ``report`` asset wrote, its HTML page next to it, and the report."""

    path: Path
    html: Path
    report: Report

    def __iter__(self) -> Iterator[Any]:
        """``path, report = write_report(...)``: the report file and the report."""
        return iter((self.path, self.report))


def write_page(
    entry: ContractEntry,
    target: str,
    step: Step,
    report: Report,
    path: Path,
    *,
    verdict: Verdict | None = None,
    diff_href: str | None = None,
) -> Path:
    """The HTML page of the report file at ``path`` (``<report>.html``), with its extension
    sections and the intervals this run stored; with the pipeline's ``verdict`` (the verdict
    step writes the page again with it: its banner) and the link to the diff's page."""
    sidecar = dict(report.extensions)
    intervals = step.warehouse.read_run("metric_intervals", entry.key, target, step.run_id)
    if intervals is not None and intervals.num_rows:  # golden_metrics of this run stored them
        sidecar["statistics"] = intervals_section(intervals.to_pylist())
    return write_report_html(
        path.with_suffix(".html"), report, sidecar or None, source=path.name, verdict=verdict,
        diff_href=diff_href,
    )  # fmt: skip


def write_report(entry: ContractEntry, target: str, step: Step) -> WrittenReport:
    """Write the report file (verified by loading it back), its sidecar sections, its HTML
    page (``<report>.html``, with the intervals and the calibrator this run stored) and its
    ``reports`` row."""
    golden = golden_of(entry, target, step)
    from decguard_pipeline.steps.properties import stored_for_report

    stored = stored_for_report(entry, target, step.warehouse, golden.evaluated.run, step.run_id)
    # the report of this run's evaluation, made now (in mode `all` with the stored property
    # results); a copy: what is added to it for the file stays out of the run's report
    report = (
        with_property_results(golden.report, entry.require())
        if stored is None
        else with_property_results(golden.report, entry.require(), stored.section, stored.checks)
    )
    if stored is not None:
        report.extensions = {"properties": stored.pipeline, **report.extensions}
    wh = step.warehouse
    stamp = step.at.strftime("%Y%m%dT%H%M%S%fZ")
    path = wh.files_dir(entry.key, target) / f"{stamp}_{step.run_id}.json"
    write_document(
        path, report.document, stream_key="results", items=result_records(report.results)
    )
    load_report(path)  # the file must verify exactly, as DecGuard would check it
    fitted = wh.read_run("calibrators", entry.key, target, step.run_id)
    if fitted is not None and fitted.num_rows:  # the calibrator asset of this run fitted one
        report.extensions["calibrator"] = json.loads(fitted.column("section_json")[0].as_py())
    write_sections(path, report)  # <stem>.pipeline.json, as -o writes it
    html = write_page(entry, target, step, report, path)
    keys = step.keys(entry.key, target)
    wh.write("reports", [report_row(keys, report.document, path)], **keys)
    return WrittenReport(path, html, report)
