"""The guard extension as a step (issue 7): what the ``guard_metrics`` asset and its
checks call. No Dagster here.

The main golden dataset is not decided again: its DecGuard report is the run's own
(``steps.golden.golden_of``, built once from the target's evaluation), handed to
``runs.guard.run_guarded``, the flow ``test`` runs, which decides every other suite of
``pipeline.suites`` through the run's backend and measures every dataset; so the warehouse
rows equal the CLI's sidecar.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from decguard_pipeline.core.contract import LoadedContract
from decguard_pipeline.core.gates import combine_checks
from decguard_pipeline.core.guard.evaluation import MAIN, GuardedRun, SuiteRun
from decguard_pipeline.core.guard.extension import GuardConfig, guard_config
from decguard_pipeline.runs.guard import harness_files, plan_datasets, run_guarded
from decguard_pipeline.steps import pictures
from decguard_pipeline.steps.backend import target_backend
from decguard_pipeline.steps.base import Step, run_rows
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.steps.golden import golden_of
from decguard_pipeline.steps.targets import backend_of
from decguard_pipeline.warehouse.rows.guard import guard_rows, suite_cases_table

RUN_DIR = "geh"  # <stem>.geh/: the Guard Eval Harness run directory of a materialisation
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

    guarded: GuardedRun  # runs (main first), summary, image and sidecar paths
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # table -> rows
    # where the Guard Eval Harness run was published (one guarded label only)
    run_dir: str | None = None

    @property
    def runs(self) -> list[SuiteRun]:
        return self.guarded.runs

    @property
    def labels(self) -> list[str]:
        """Suite label per run."""
        return [run.label for run in self.runs]

    @property
    def sidecar(self) -> Path:
        assert self.guarded.sidecar is not None
        return self.guarded.sidecar

    @property
    def status(self) -> str:
        return self.guarded.status


def measure_target(entry: ContractEntry, target: str, step: Step) -> GuardMeasured:
    """Extension metrics and checks of every planned dataset of a target; pictures, the
    sidecar and (for one guarded label) the Guard Eval Harness run directory
    ``<stem>.geh/`` under ``report_files``; rows in the ``guard_*`` and ``suite_case_results``
    tables.
    The main dataset is the target's evaluation, its DecGuard report the run's own; the
    other suites go through the run's backend (``steps/backend.py``)."""
    loaded = entry.require()
    config = config_of(entry)
    wh = step.warehouse
    main = golden_of(entry, target, step).report  # the run's report, built once
    plan = plan_datasets(loaded, suite=None, dataset=None)
    if len(plan) > 1:  # the other suites go through the run's backend and its response cache
        with target_backend(entry, target, step) as asking:
            guarded = run_guarded(loaded, config, plan, backend=asking.backend, main=main,
                                  health=asking.health)  # fmt: skip
    else:
        guarded = run_guarded(loaded, config, plan, backend=backend_of(target), main=main)
    directory = wh.files_dir(entry.key, target)
    stem = f"{step.at:%Y%m%dT%H%M%S%fZ}_{step.run_id}"
    guarded.write_files(directory, stem, target=target, draw=pictures.draw)
    run_dir = None
    if len(config.guarded) == 1:  # GEH's files are about one positive label
        harness = harness_files(loaded, config, main, guarded, target=target)
        run_dir = wh.location(harness.write(directory / f"{stem}.{RUN_DIR}"))

    where = step.keys(entry.key, target)
    backend = main.document["backend"]
    who = {"backend": backend["name"], "model_version": backend["model_version"]}
    measured = GuardMeasured(guarded, guard_rows(guarded, {**where, **who}), run_dir)
    for table, rows in measured.rows.items():
        wh.write(table, rows, **where)
    if len(guarded.runs) > 1:
        wh.write("suite_case_results", suite_cases_table(guarded.runs[1:], where), **where)
    return measured


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

    rows = run_rows(warehouse, "guard_checks", entry.key, target, run_id)
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
