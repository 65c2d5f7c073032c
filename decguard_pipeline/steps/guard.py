"""The guard extension as a step (issue 7): what the ``guard_metrics`` asset and its
checks call. No Dagster here.

The main golden dataset is not decided again: its results are the newest evaluation of the
target in the warehouse (``case_results``). Every other suite of ``pipeline.suites`` is decided
through the same target's backend, then every dataset is measured exactly as ``test`` measures
it (``runs.guard.measure``), so the warehouse rows equal the CLI's sidecar.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from decguard_pipeline.core.contract import LoadedContract
from decguard_pipeline.core.dataset import load_dataset
from decguard_pipeline.core.gates import combine_checks, overall_status
from decguard_pipeline.core.guard.extension import GuardConfig, guard_config, metric_rows
from decguard_pipeline.core.guard.suites import suite_summary
from decguard_pipeline.core.report.golden import Report, build_report, dataset_info
from decguard_pipeline.core.report.jsonio import write_document
from decguard_pipeline.core.results import CaseResults
from decguard_pipeline.runs.guard import GuardedRun, SuiteRun, measure, plan_datasets
from decguard_pipeline.steps import golden as steps
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.steps.targets import backend_of
from decguard_pipeline.warehouse.rows import golden as T

MAIN = "main"  # suite label of the main evaluation when its dataset is not a named suite
SUITE_GATES = "suite_gates"  # DecGuard's own gates on the other suites, as one check
PARTIAL_RUNS = "partial_runs"


def config_of(entry: ContractEntry) -> GuardConfig:
    """The extension's settings; a ``ContractError`` naming the file and field when they do
    not fit the decision (what ``test`` and ``validate`` print)."""
    loaded = entry.require()
    return guard_config(loaded.contract, source=str(loaded.path))


def planned_suites(loaded: LoadedContract) -> list[str]:
    """Suite labels in evaluation order: the main evaluation first."""
    plan = plan_datasets(loaded, suite=None, dataset=None)
    return [name or MAIN for name, _ in plan]


def gate_list(loaded: LoadedContract, config: GuardConfig) -> list[tuple[str, str]]:
    """``(gate, level)`` of every guard check, in the order of the CLI's pipeline checks: the
    extension's requirements and warnings, ``partial_runs``, then ``suite_gates`` when there are
    other suites. ``partial_runs`` and ``suite_gates`` have the level of their worst outcome;
    here the level that can block."""
    gates = [(g, "requirement") for g in config.requirements.configured()]
    gates += [(g, "warning") for g in config.warnings.configured()]
    gates.append((PARTIAL_RUNS, "requirement" if config.partial_runs.fail_partial else "warning"))
    if len(planned_suites(loaded)) > 1:
        gates.append((SUITE_GATES, "requirement"))
    return gates


@dataclass
class GuardMeasured:
    """What one materialisation measured and wrote."""

    guarded: GuardedRun  # runs (main first), summary, image paths
    labels: list[str]  # suite label per run
    sidecar: Path
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # table -> rows

    @property
    def runs(self) -> list[SuiteRun]:
        return self.guarded.runs

    @property
    def status(self) -> str:
        return self.guarded.status


def _served_version(meta: dict[str, Any], results: CaseResults) -> str | None:
    """As ``steps.evaluate_target`` records it: the backend's, else the one answers report."""
    versions = {v for v in results.model_version if v is not None}
    return meta["model_version"] or (versions.pop() if len(versions) == 1 else None)


def _decide_suites(
    loaded: LoadedContract,
    target: str,
    planned: list[tuple[str, Any]],
    *,
    max_concurrency: int | None,
) -> list[tuple[str, Report, dict[str, Any]]]:
    """``(name, DecGuard report, backend metadata)`` per other suite, through the target's
    backend (one instance for all, health checked once, as ``test`` does)."""
    from decguard_pipeline.runs.golden import check_health, decide_dataset, make_backend

    out = []
    backend = make_backend(loaded, backend_of(target))
    try:
        health = check_health(backend)
        for name, data in planned:
            results = decide_dataset(loaded, data, backend, max_concurrency=max_concurrency)
            meta = backend.metadata()
            info = dataset_info(str(data.path), data.hash, len(data), data.n_labeled)
            out.append((name, build_report(loaded, info, meta, results, health=health), meta))
    finally:
        backend.close()
    return out


def measure_target(
    entry: ContractEntry, target: str, step: steps.Step, *, max_concurrency: int | None = None
) -> GuardMeasured:
    """Extension metrics and checks of every planned dataset of a target; pictures and the
    sidecar under ``report_files``; rows in the ``guard_*`` and ``suite_case_results`` tables."""
    loaded = entry.require()
    config = config_of(entry)
    spec = loaded.contract.spec()
    plan = plan_datasets(loaded, suite=None, dataset=None)
    # every suite file is loaded before the first model call (as ``test`` does)
    others = [(name, load_dataset(path, spec)) for name, path in plan[1:]]
    wh = step.warehouse
    evaluated = steps.load_evaluated(entry, target, wh, step.run_id)
    runs = [measure(steps.report_for(entry, target, wh, evaluated), config, plan[0][0])]
    decided = (
        _decide_suites(loaded, target, others, max_concurrency=max_concurrency) if others else []
    )
    runs += [measure(report, config, name) for name, report, _ in decided]
    labels = [run.suite or MAIN for run in runs]
    summary = None
    if len(runs) > 1:
        summary = suite_summary(
            [
                (label, r.report.results, r.block, r.status)
                for label, r in zip(labels, runs, strict=True)
            ],
            config,
        )
    guarded = GuardedRun(loaded, config, runs, summary)

    from decguard_pipeline.core.report.plots import write_images

    directory = wh.partition_dir("report_files", entry.key, target)
    stem = f"{step.at:%Y%m%dT%H%M%S%fZ}_{step.run_id}"
    for index, (label, run) in enumerate(zip(labels, runs, strict=True)):
        name = stem if index == 0 else f"{stem}.{run.suite}"
        title = f"{spec.name} · {label} · {target}"
        guarded.images[index] = write_images(run.block, directory, name, title=title)
    sidecar = directory / f"{stem}.pipeline.json"
    write_document(sidecar, guarded.document(), what="pipeline results")

    measured = GuardMeasured(guarded, labels, sidecar)
    who = {"backend": evaluated.run["backend"], "model_version": evaluated.run["model_version"]}
    measured.rows = _rows(measured, who, step, entry.key, target)
    where = {"contract": entry.key, "target": target, "run_id": step.run_id, "recorded_at": step.at}
    for table, rows in measured.rows.items():
        wh.write(table, rows, **where)
    if decided:
        wh.write("suite_case_results", _suite_cases(decided, step, entry.key, target), **where)
    return measured


def _suite_cases(
    decided: list[tuple[str, Report, dict[str, Any]]], step: steps.Step, key: str, target: str
) -> pa.Table:
    parts = []
    for name, report, meta in decided:
        results = report.results
        table = T.case_results_table(
            results,
            contract=key,
            target=target,
            run_id=step.run_id,
            recorded_at=step.at,
            model_version=_served_version(meta, results),
        )
        parts.append(table.append_column("suite", pa.array([name] * len(results), pa.string())))
    return pa.concat_tables(parts)


def _parts(block: dict[str, Any]) -> list[tuple[str | None, str | None, dict[str, Any]]]:
    """``(split key, split value, block)``: the whole set, then every metadata group."""
    out: list[tuple[str | None, str | None, dict[str, Any]]] = [(None, None, block)]
    for key, groups in block.get("splits", {}).items():
        out += [(key, group["value"], group) for group in groups]
    return out


def _rows(
    measured: GuardMeasured, who: dict[str, Any], step: steps.Step, key: str, target: str
) -> dict[str, list[dict[str, Any]]]:
    base = {"contract": key, "target": target, "run_id": step.run_id, "recorded_at": step.at, **who}
    rows: dict[str, list[dict[str, Any]]] = {
        "guard_suites": [],
        "guard_metrics": [],
        "guard_reliability": [],
        "guard_risk_coverage": [],
        "guard_checks": [],
        "guard_summary": [],
    }
    for index, (label, run) in enumerate(zip(measured.labels, measured.runs, strict=True)):
        block, doc = run.block, run.report.document
        state = block["run"]
        images = measured.guarded.images.get(index, {})
        rows["guard_suites"].append(
            {
                **base,
                "suite": label,
                "position": index,
                "is_main": index == 0,
                "dataset_path": doc["dataset"]["path"],
                "dataset_hash": doc["dataset"]["hash"],
                "n_cases": state["total"],
                "n_labeled": doc["dataset"]["n_labeled"],
                "n_decided": state["decided"],
                "n_errored": state["errored"],
                "errors_by_kind_json": T.to_json(state["errors_by_kind"]),
                "drop_rate": state["drop_rate"],
                "run_state": state["state"],
                "decguard_status": run.report.status,
                "guard_status": overall_status(run.checks),
                "status": run.status,
                "reliability_png": str(images["reliability"]) if images else None,
                "risk_coverage_png": str(images["risk_coverage"]) if images else None,
                "sidecar_path": str(measured.sidecar),
            }
        )
        rows["guard_metrics"] += [{**base, **r} for r in metric_rows(block, suite=label)]
        for split_key, split_value, part in _parts(block):
            where = {**base, "suite": label, "split_key": split_key, "split_value": split_value}
            cal = part["calibration"]
            for binning in ("equal_width", "equal_mass"):
                rows["guard_reliability"] += [
                    {**where, "binning": binning, "bin": i, **b}
                    for i, b in enumerate(cal[f"reliability_{binning}"])
                ]
            rows["guard_risk_coverage"] += [{**where, **r} for r in part["risk_coverage"]["sweep"]]
        rows["guard_checks"] += [
            {**base, "source": "guard", "suite": label, **c} for c in run.checks
        ]
        if index:  # the main evaluation's DecGuard gates are golden gate_results
            rows["guard_checks"] += [
                {**base, "source": "decguard", "suite": label, **c} for c in doc["checks"]
            ]
    summary = measured.guarded.summary
    if summary is not None:
        for aggregate in ("pooled", "mean"):
            rows["guard_summary"] += [
                {**base, "aggregate": aggregate, "metric": m, "value": v, "suite": None}
                for m, v in summary[aggregate].items()
            ]
        rows["guard_summary"] += [
            {**base, "aggregate": "worst", "metric": m, "value": w["value"], "suite": w["suite"]}
            for m, w in summary["worst"].items()
            if w is not None
        ]
    return rows


# -- checks ------------------------------------------------------------------------------


SUITE_FIELDS = ("suite", "gate", "level", "value", "threshold", "status", "message")


def aggregate(rows: list[dict[str, Any]], gate: str) -> dict[str, Any]:
    """One check over every suite: the worst suite decides (``core.gates.combine_checks``);
    messages read as the CLI's pipeline checks do ("adversarial: min_auroc auroc 0.3889
    violates >= 0.8"); ``suites`` holds every suite's row."""
    return combine_checks(
        rows, gate, parts="suites", fields=SUITE_FIELDS,
        message=lambda r: f"{r['suite']}: {r['gate']} {r['message']}",
    )  # fmt: skip


def check_outcomes(
    entry: ContractEntry, target: str, warehouse: Any, run_id: str | None = None
) -> dict[tuple[str, str], dict[str, Any]]:
    """The guard checks of a target by ``(gate, level)`` as :func:`gate_list` names them,
    each aggregated over the suites (what the asset checks report): run ``run_id``'s when it
    wrote any, else the newest."""
    from decguard_pipeline.core.errors import DecGuardError

    rows = steps.run_rows(warehouse, "guard_checks", entry.key, target, run_id)
    if rows is None:
        raise DecGuardError(f"{entry.key}: target {target!r} has no guard checks yet")
    loaded = entry.require()
    out = {}
    for gate, level in gate_list(loaded, config_of(entry)):
        if gate == SUITE_GATES:
            picked = [r for r in rows if r["source"] == "decguard"]
        elif gate == PARTIAL_RUNS:
            picked = [r for r in rows if r["source"] == "guard" and r["gate"] == PARTIAL_RUNS]
        else:
            picked = [
                r
                for r in rows
                if r["source"] == "guard" and r["gate"] == gate and r["level"] == level
            ]
        if picked:
            out[(gate, level)] = aggregate(picked, gate)
    return out
