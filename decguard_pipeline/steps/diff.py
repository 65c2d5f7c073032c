"""The regression diff as a step (issue 4): what the ``regression_diff`` asset and its
checks call. No Dagster here.

The candidate is a target's newest evaluation; the baseline is another target of the same
contract chosen by ``core.diff.choose_baseline`` from what the warehouse knows (every evaluated
target, when it was first registered or evaluated, whether its newest golden requirement gates
passed). The candidate's DecGuard report is the run's own (``steps.golden.golden_of``), the
baseline's is rebuilt from the warehouse (``steps.golden.golden_report``), and they are
compared exactly as ``decguard-pipeline diff BASELINE CANDIDATE -c CONTRACT`` compares them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from decguard_pipeline.core.contract import LoadedContract, Regression
from decguard_pipeline.core.contract.baseline import BaselineSettings
from decguard_pipeline.core.diff import BaselineChoice, Diff, choose_baseline, diff_reports
from decguard_pipeline.core.diff import sidecar_path as statistics_path
from decguard_pipeline.core.diff.baseline import no_baseline_reason
from decguard_pipeline.core.diff.calibration import diff_sidecar
from decguard_pipeline.core.diff.gates import configured_gates
from decguard_pipeline.core.diff.html import write_diff_html
from decguard_pipeline.core.errors import DecGuardError
from decguard_pipeline.core.report.golden import Report
from decguard_pipeline.core.report.jsonio import write_document
from decguard_pipeline.steps.base import Evaluated, Step, load_evaluated, run_rows
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.steps.golden import golden_of, golden_report
from decguard_pipeline.steps.targets import backend_of
from decguard_pipeline.steps.verdict import approvals
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline.warehouse.rows.calibration import diff_calibration_rows
from decguard_pipeline.warehouse.rows.diff import (
    change_rows,
    diffs_row,
    interval_rows,
    no_baseline_check_rows,
    regression_check_rows,
    segment_rows,
    statistical_test_rows,
)

NO_BASELINE = "no_baseline"  # the ``diffs.status`` of a candidate with nothing to compare to


def regression_gates(loaded: LoadedContract) -> list[tuple[str, str]]:
    """``(gate, level)`` of every regression check in DecGuard's order: requirements, the
    implicit ``max_error_rate_increase``, then warnings."""
    return [(gate, level) for gate, _, level in configured_gates(loaded.contract.regression)]


def baseline_settings(loaded: LoadedContract) -> BaselineSettings | None:
    pipeline = loaded.contract.pipeline
    return None if pipeline is None else pipeline.baseline


def version_of(target: str) -> str:
    """The version segment of a target key (``default@v2`` -> ``v2``)."""
    return target.split("@", 1)[1] if "@" in target else ""


def evaluation_ref(contract: str, target: str, run_id: str) -> str:
    """What a diff names as a run's ``path``: the evaluation in the warehouse it was rebuilt
    from (the report is built from the warehouse, not read from a file)."""
    return f"warehouse:{contract}/{target}/{run_id}"


# -- which targets the warehouse knows ------------------------------------------------------


def _first_times(warehouse: Warehouse, table: str, contract: str) -> dict[str, Any]:
    """Per target, when ``table`` got its first row for a contract."""
    found = warehouse.query(
        f"SELECT target, min(recorded_at) AS at FROM {table} WHERE contract = $c GROUP BY target",
        {"c": contract},
    ).to_pylist()
    return {r["target"]: r["at"] for r in found}


def known_targets(
    contract: str, warehouse: Warehouse, candidate: str | None = None
) -> list[dict[str, Any]]:
    """Every evaluated target of a contract as ``choose_baseline`` wants it.

    A target is evaluated once a run reached its verdict (warehouse/completion.py); its
    entry describes the newest such run. ``backend`` is the contract backend of the key;
    ``model_version`` is the key's version segment (unique per target, also when a backend
    reports no version and the key uses its model name); ``created_at`` is the target's first
    registration or first evaluation, whichever came first; ``requirements_passed`` is True
    when that run was approved (its verdict: no failing requirement of any kind,
    ``steps/verdict.py``), or, when the newest verdict is of another run, when that run's
    golden gate results hold no failing requirement. Targets never evaluated cannot be a
    baseline (there is nothing to compare) and are left out, but for ``candidate``, the
    target being diffed (its own evaluation is not complete before its verdict): its entry
    gives its ``created_at``.

    A few queries per contract, whatever its history: each target's first ``runs`` and
    ``targets`` rows, its newest completed ``runs`` write and its newest ``verdicts``."""
    with warehouse.snapshot():
        return _known_targets(contract, warehouse, candidate)


def _known_targets(
    contract: str, warehouse: Warehouse, candidate: str | None
) -> list[dict[str, Any]]:
    registered = _first_times(warehouse, "targets", contract)
    evaluated = _first_times(warehouse, "runs", contract)
    completed: dict[str, dict[str, Any]] = {}
    for row in warehouse.newest_writes("runs", contract).to_pylist():
        completed[row["target"]] = row  # the last row of the write, as read_latest's
    verdicts = approvals(contract, warehouse)
    known = []
    for target in sorted(evaluated):
        newest = completed.get(target)
        if newest is None:
            if target != candidate:
                continue
            newest = warehouse.rows(  # not evaluated yet: only its dates matter
                "runs", "contract = $c AND target = $t", {"c": contract, "t": target}
            ).to_pylist()[-1]
        first_seen = [evaluated[target]]
        if target in registered:
            first_seen.append(registered[target])
        verdict = verdicts.get(target)
        if verdict is not None and verdict["evaluation_run_id"] == newest["run_id"]:
            passed = bool(verdict["approved"])
        else:
            checks = warehouse.read_run("gate_results", contract, target, newest["run_id"])
            golden = [c for c in checks.to_pylist() if c["source"] == "golden"] if checks else []
            passed = bool(golden) and not any(
                c["level"] == "requirement" and c["status"] == "fail" for c in golden
            )
        known.append(
            {
                "backend": backend_of(target),
                "model_version": version_of(target),
                "target": target,
                "created_at": min(first_seen),
                "requirements_passed": passed,
                "run_id": newest["run_id"],
                "served_model_version": newest["model_version"],
                "evaluated_at": newest["recorded_at"],
            }
        )
    return sorted(known, key=lambda k: (k["created_at"], k["target"]))


@dataclass
class Resolved:
    candidate: dict[str, Any]  # the candidate's entry in ``known``
    choice: BaselineChoice | None
    reason: str  # why this baseline, or why there is none
    known: list[dict[str, Any]]


def resolve_baseline(entry: ContractEntry, target: str, warehouse: Warehouse) -> Resolved:
    loaded = entry.require()
    known = known_targets(entry.key, warehouse, candidate=target)
    candidate = next((k for k in known if k["target"] == target), None)
    if candidate is None:
        raise DecGuardError(f"{entry.key}: target {target!r} has not been evaluated yet")
    settings = baseline_settings(loaded)
    backend = backend_of(target)
    choice = choose_baseline(
        backend, version_of(target), known, settings=settings, created_at=candidate["created_at"]
    )
    if choice is None:
        return Resolved(candidate, None, no_baseline_reason(backend, target, settings), known)
    return Resolved(candidate, choice, choice.reason, known)


# -- the diff -------------------------------------------------------------------------------


@dataclass
class DiffOutcome:
    """What one materialisation of ``regression_diff`` compared and wrote."""

    target: str
    resolved: Resolved
    diff: Diff | None = None  # None: no baseline
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # table -> rows
    diff_path: Path | None = None
    sidecar: Path | None = None
    html: Path | None = None  # the page next to the diff (``diff --html``)

    @property
    def choice(self) -> BaselineChoice | None:
        return self.resolved.choice

    @property
    def baseline_target(self) -> str | None:
        return None if self.choice is None else str(self.choice.target["target"])

    @property
    def status(self) -> str:
        return NO_BASELINE if self.diff is None else self.diff.status

    @property
    def row(self) -> dict[str, Any]:
        """The ``diffs`` row."""
        return self.rows["diffs"][0]


def diff_target(entry: ContractEntry, target: str, step: Step) -> DiffOutcome:
    """Diff a target's newest evaluation against its baseline; the diff document (and the
    statistics sidecar) under ``report_files``, rows in ``diffs``, ``diff_changes``,
    ``diff_segments``, ``regression_checks`` and, with statistics, ``diff_intervals`` and
    ``diff_tests``. Without a baseline: a ``no_baseline`` row and passing check rows."""
    loaded = entry.require()
    wh = step.warehouse
    outcome = DiffOutcome(target, resolve_baseline(entry, target, wh))
    candidate = golden_of(entry, target, step)  # the run's report, built once
    evaluated = candidate.evaluated
    baseline_target = outcome.baseline_target
    baseline = None
    if baseline_target is not None:
        baseline = load_evaluated(entry, baseline_target, wh)
        outcome.diff = diff_reports(
            as_evaluated(
                golden_report(
                    entry, baseline_target, wh, evaluated=baseline, measures=False
                ).report,
                baseline,
            ),
            as_evaluated(candidate.report, evaluated),
            contract=loaded,
            baseline_path=evaluation_ref(entry.key, baseline_target, baseline.run["run_id"]),
            candidate_path=evaluation_ref(entry.key, target, evaluated.run["run_id"]),
            created_at=step.at.isoformat(timespec="seconds"),
        )
        _write_documents(outcome, wh.files_dir(entry.key, target), step)
    where = {"contract": entry.key, "target": target, "run_id": step.run_id, "recorded_at": step.at}
    base = {
        **where,
        "backend": evaluated.run["backend"],
        "model_version": evaluated.run["model_version"],
        "baseline_target": baseline_target,
    }
    base_run = None if baseline is None else baseline.run
    outcome.rows = _tables(base, outcome, loaded.contract.regression, evaluated.run, base_run)
    for table, rows in outcome.rows.items():
        wh.write(table, rows, **where)
    return outcome


def _write_documents(outcome: DiffOutcome, directory: Path, step: Step) -> None:
    """The diff document, with ``pipeline.statistics`` its sidecar, and its HTML page
    (``<stem>.diff.html``, as ``diff --html`` writes it) next to the run's report files."""
    diff = outcome.diff
    assert diff is not None
    outcome.diff_path = directory / f"{step.at:%Y%m%dT%H%M%S%fZ}_{step.run_id}.diff.json"
    write_document(outcome.diff_path, diff.document, what="diff")
    sidecar = diff_sidecar(diff)  # statistics and/or the calibration comparison
    if sidecar is not None:
        outcome.sidecar = statistics_path(outcome.diff_path)
        write_document(outcome.sidecar, sidecar, what="statistics")
    outcome.html = write_diff_html(
        # <stem>.diff.html (with_suffix would drop ".diff" and hit the report's own page)
        outcome.diff_path.with_name(outcome.diff_path.name.removesuffix(".json") + ".html"),
        diff.document,
        diff.statistics,
        flip_matrix=diff.flips(),
        source=outcome.diff_path.name,
    )


def _tables(
    base: dict[str, Any],
    outcome: DiffOutcome,
    regression: Regression,
    run: dict[str, Any],
    base_run: dict[str, Any] | None,
) -> dict[str, list[dict[str, Any]]]:
    """The rows of every table the outcome writes, by table."""
    resolved, diff = outcome.resolved, outcome.diff
    row = diffs_row(
        base,
        choice=resolved.choice,
        reason=resolved.reason,
        candidate_created_at=resolved.candidate["created_at"],
        status=outcome.status,
        run=run,
        base_run=base_run,
        diff=diff,
        diff_path=outcome.diff_path,
        sidecar=outcome.sidecar,
    )
    if diff is None:
        return {
            "diffs": [row],
            "regression_checks": no_baseline_check_rows(base, regression, resolved.reason),
        }
    tables = {
        "diffs": [row],
        "diff_changes": change_rows(base, diff),
        "diff_segments": segment_rows(base, diff),
        "regression_checks": regression_check_rows(base, diff),
    }
    if diff.statistics is not None:
        tables["diff_intervals"] = interval_rows(base, diff.statistics)
        tables["diff_tests"] = statistical_test_rows(base, diff.statistics)
    if diff.calibration is not None:
        tables["diff_calibration"] = diff_calibration_rows(base, diff.calibration)
    return tables


def as_evaluated(report: Report, evaluated: Evaluated) -> Report:
    """A report rebuilt from the warehouse, stamped as its evaluation ran: the hash of the
    contract it was evaluated under and the time it started (what the report file ``test``
    wrote then says; a diff shows both for each run)."""
    run = evaluated.run
    document = dict(report.document)
    document["contract"] = {**document["contract"], "hash": run["contract_hash"]}
    document["created_at"] = run["started_at"].isoformat(timespec="seconds")
    return Report(document, report.results, report.extensions)


# -- what the checks report -----------------------------------------------------------------


def check_rows(
    entry: ContractEntry, target: str, warehouse: Warehouse, run_id: str | None = None
) -> dict[tuple[str, str], dict[str, Any]]:
    """The regression checks of a target by (gate, level): those the diff of run ``run_id``
    wrote (the checks run in the same run as the asset), else the newest."""
    rows = run_rows(warehouse, "regression_checks", entry.key, target, run_id)
    if rows is None:
        raise DecGuardError(f"{entry.key}: target {target!r} has no regression diff yet")
    return {(r["gate"], r["level"]): r for r in rows}
