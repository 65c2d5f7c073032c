"""The regression diff as a step (issue 4): what the ``regression_diff`` asset and its
checks call. No Dagster here.

The candidate is a target's newest evaluation; the baseline is another target of the same
contract chosen by ``core.diff.choose_baseline`` from what the warehouse knows (every evaluated
target, when it was first registered or evaluated, whether its newest golden requirement gates
passed). Both DecGuard reports are rebuilt from the warehouse (``steps.golden.golden_report``) and
compared exactly as ``decguard-pipeline diff BASELINE CANDIDATE -c CONTRACT`` compares them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from decguard_pipeline.core.contract import LoadedContract
from decguard_pipeline.core.contract.baseline import BaselineSettings
from decguard_pipeline.core.diff import BaselineChoice, Diff, choose_baseline, diff_reports
from decguard_pipeline.core.diff import sidecar_path as statistics_path
from decguard_pipeline.core.diff.baseline import DEFAULT_BACKEND
from decguard_pipeline.core.diff.gates import REGRESSION_GATES, configured_gates
from decguard_pipeline.core.errors import DecGuardError
from decguard_pipeline.core.gates import PASS
from decguard_pipeline.core.report.golden import Report
from decguard_pipeline.core.report.jsonio import write_document
from decguard_pipeline.core.report.render import preview
from decguard_pipeline.steps.base import Evaluated, Step, load_evaluated, run_rows
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.steps.golden import golden_report
from decguard_pipeline.steps.targets import backend_of
from decguard_pipeline.steps.verdict import approvals
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline.warehouse.rows.base import to_json
from decguard_pipeline.warehouse.schema.diff import COUNTS, DIFF_METRICS, SHIFT
from decguard_pipeline.warehouse.store import read_file

NO_BASELINE = "no_baseline"  # the ``diffs.status`` of a candidate with nothing to compare to
SOURCE = "regression"  # ``regression_checks.source``
PREVIEW_WIDTH = 70  # DecGuard's preview of an input in the diff's changes


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


def _partitions(warehouse: Warehouse, table: str, contract: str) -> dict[str, list[Path]]:
    """A contract's files of ``table`` by target, oldest first."""
    return warehouse.partitions(table, contract)


def _first_row(path: Path) -> dict[str, Any]:
    return read_file(path).slice(0, 1).to_pylist()[0]


def known_targets(contract: str, warehouse: Warehouse) -> list[dict[str, Any]]:
    """Every evaluated target of a contract as ``choose_baseline`` wants it.

    ``backend`` is the contract backend of the key; ``model_version`` is the key's version
    segment (unique per target, also when a backend reports no version and the key uses its
    model name); ``created_at`` is the target's first registration or first evaluation,
    whichever came first; ``requirements_passed`` is True when the target's newest evaluation
    was approved (its verdict: no failing requirement of any kind, ``steps/verdict.py``), or,
    before it has a verdict, when its newest golden gate results hold no failing
    requirement. Targets never evaluated cannot be a baseline (there is nothing to compare)
    and are left out.

    Reads only the first and newest files of each target's ``runs``, ``targets`` and
    ``gate_results`` partitions, so the cost grows with the contract's targets, not with the
    warehouse."""
    registered = _partitions(warehouse, "targets", contract)
    gates = _partitions(warehouse, "gate_results", contract)
    verdicts = approvals(contract, warehouse)
    known = []
    for directory, files in _partitions(warehouse, "runs", contract).items():
        newest = _first_row(files[-1])
        first_seen = [_first_row(files[0])["recorded_at"]]
        if directory in registered:
            first_seen.append(_first_row(registered[directory][0])["recorded_at"])
        checks = read_file(gates[directory][-1]).to_pylist() if directory in gates else []
        golden = [c for c in checks if c["source"] == "golden"]
        target = newest["target"]
        verdict = verdicts.get(target)
        if verdict is not None and verdict["evaluation_run_id"] == newest["run_id"]:
            passed = bool(verdict["approved"])
        else:
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


def _why_none(settings: BaselineSettings | None, target: str) -> str:
    backend = backend_of(target)
    if settings is not None and settings.target == target:
        return f"the pinned baseline target {target} is the candidate itself"
    if settings is not None and settings.target is not None:
        return f"pinned baseline target {settings.target} has not been evaluated yet"
    if settings is not None and settings.backend is not None:
        return f"backend {settings.backend!r} has no evaluated target whose requirements passed"
    if backend == DEFAULT_BACKEND:
        return f"no earlier version of backend {backend!r} whose requirements passed"
    return (
        f"no earlier version of backend {backend!r} and no target of the "
        f"{DEFAULT_BACKEND!r} backend whose requirements passed"
    )


@dataclass
class Resolved:
    candidate: dict[str, Any]  # the candidate's entry in ``known``
    choice: BaselineChoice | None
    reason: str  # why this baseline, or why there is none
    known: list[dict[str, Any]]


def resolve_baseline(entry: ContractEntry, target: str, warehouse: Warehouse) -> Resolved:
    loaded = entry.require()
    known = known_targets(entry.key, warehouse)
    candidate = next((k for k in known if k["target"] == target), None)
    if candidate is None:
        raise DecGuardError(f"{entry.key}: target {target!r} has not been evaluated yet")
    settings = baseline_settings(loaded)
    choice = choose_baseline(
        backend_of(target),
        version_of(target),
        known,
        settings=settings,
        created_at=candidate["created_at"],
    )
    reason = choice.reason if choice is not None else _why_none(settings, target)
    return Resolved(candidate, choice, reason, known)


# -- the diff -------------------------------------------------------------------------------


@dataclass
class DiffOutcome:
    """What one materialisation of ``regression_diff`` compared and wrote."""

    target: str
    resolved: Resolved
    diff: Diff | None  # None: no baseline
    row: dict[str, Any]  # the ``diffs`` row
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # table -> rows
    diff_path: Path | None = None
    sidecar: Path | None = None

    @property
    def choice(self) -> BaselineChoice | None:
        return self.resolved.choice

    @property
    def baseline_target(self) -> str | None:
        return None if self.choice is None else str(self.choice.target["target"])

    @property
    def status(self) -> str:
        return NO_BASELINE if self.diff is None else self.diff.status


def diff_target(entry: ContractEntry, target: str, step: Step) -> DiffOutcome:
    """Diff a target's newest evaluation against its baseline; the diff document (and the
    statistics sidecar) under ``report_files``, rows in ``diffs``, ``diff_changes``,
    ``diff_segments``, ``regression_checks`` and, with statistics, ``diff_intervals`` and
    ``diff_tests``. Without a baseline: a ``no_baseline`` row and passing check rows."""
    loaded = entry.require()
    wh = step.warehouse
    resolved = resolve_baseline(entry, target, wh)
    evaluated = load_evaluated(entry, target, wh, step.run_id)
    base = {
        "contract": entry.key,
        "target": target,
        "run_id": step.run_id,
        "recorded_at": step.at,
        "backend": evaluated.run["backend"],
        "model_version": evaluated.run["model_version"],
        "baseline_target": None,
    }
    choice = resolved.choice
    if choice is None:
        outcome = DiffOutcome(target, resolved, None, {})
        outcome.row = _diffs_row(base, outcome, evaluated.run, None)
        outcome.rows = {
            "diffs": [outcome.row],
            "regression_checks": _no_baseline_checks(base, loaded, resolved.reason),
        }
    else:
        baseline_target = str(choice.target["target"])
        base["baseline_target"] = baseline_target
        base_eval = load_evaluated(entry, baseline_target, wh)
        diff = diff_reports(
            as_evaluated(
                golden_report(entry, baseline_target, wh, evaluated=base_eval).report, base_eval
            ),
            as_evaluated(golden_report(entry, target, wh, evaluated=evaluated).report, evaluated),
            contract=loaded,
            baseline_path=evaluation_ref(entry.key, baseline_target, base_eval.run["run_id"]),
            candidate_path=evaluation_ref(entry.key, target, evaluated.run["run_id"]),
            created_at=step.at.isoformat(timespec="seconds"),
        )
        outcome = DiffOutcome(target, resolved, diff, {})
        directory = wh.partition_dir("report_files", entry.key, target)
        outcome.diff_path = directory / f"{step.at:%Y%m%dT%H%M%S%fZ}_{step.run_id}.diff.json"
        write_document(outcome.diff_path, diff.document, what="diff")
        if diff.statistics is not None:
            outcome.sidecar = statistics_path(outcome.diff_path)
            write_document(outcome.sidecar, diff.statistics, what="statistics")
        outcome.row = _diffs_row(base, outcome, evaluated.run, base_eval.run)
        outcome.rows = {
            "diffs": [outcome.row],
            "diff_changes": _change_rows(base, diff),
            "diff_segments": _segment_rows(base, diff),
            "regression_checks": _check_rows(base, diff),
        }
        if diff.statistics is not None:
            outcome.rows["diff_intervals"] = _interval_rows(base, diff.statistics)
            outcome.rows["diff_tests"] = _test_rows(base, diff.statistics)
    where = {"contract": entry.key, "target": target, "run_id": step.run_id, "recorded_at": step.at}
    for table, rows in outcome.rows.items():
        wh.write(table, rows, **where)
    return outcome


def as_evaluated(report: Report, evaluated: Evaluated) -> Report:
    """A report rebuilt from the warehouse, stamped as its evaluation ran: the hash of the
    contract it was evaluated under and the time it started (what the report file ``test``
    wrote then says; a diff shows both for each run)."""
    run = evaluated.run
    document = dict(report.document)
    document["contract"] = {**document["contract"], "hash": run["contract_hash"]}
    document["created_at"] = run["started_at"].isoformat(timespec="seconds")
    return Report(document, report.results, report.extensions)


def _moment(value: Any) -> datetime | None:
    return value if isinstance(value, datetime) else None


def _diffs_row(
    base: dict[str, Any],
    outcome: DiffOutcome,
    run: dict[str, Any],
    base_run: dict[str, Any] | None,
) -> dict[str, Any]:
    resolved, diff = outcome.resolved, outcome.diff
    choice = resolved.choice
    row: dict[str, Any] = {
        **base,
        "candidate_run_id": run["run_id"],
        "baseline_backend": None if base_run is None else base_run["backend"],
        "baseline_model_version": None if base_run is None else base_run["model_version"],
        "baseline_run_id": None if base_run is None else base_run["run_id"],
        "baseline_rule": None if choice is None else choice.rule,
        "baseline_reason": resolved.reason,
        "baseline_created_at": None if choice is None else _moment(choice.target["created_at"]),
        "candidate_created_at": _moment(resolved.candidate["created_at"]),
        "status": outcome.status,
        "candidate_dataset_hash": run["dataset_hash"],
        "has_statistics": False,
        "diff_path": None if outcome.diff_path is None else str(outcome.diff_path),
        "sidecar_path": None if outcome.sidecar is None else str(outcome.sidecar),
    }
    if diff is None:
        return row
    doc = diff.document
    worst = diff.worst_segment
    row.update(
        {
            "exit_code": doc["exit_code"],
            "same_dataset": doc["same_dataset"],
            "baseline_dataset_hash": doc["baseline"]["dataset"]["hash"],
            "candidate_dataset_hash": doc["candidate"]["dataset"]["hash"],
            "segment_by": list(diff.regression.segment_by),
            **{name: doc["counts"][name] for name in COUNTS},
            **{name: doc["shift"][name] for name in SHIFT},
            **{
                f"{metric}_{side}": doc["metrics"][metric][side]
                for metric in DIFF_METRICS
                for side in ("baseline", "candidate", "delta")
            },
            "worst_segment_key": None if worst is None else worst["key"],
            "worst_segment_value": None if worst is None else worst["value"],
            "worst_segment_accuracy_drop": None if worst is None else worst["accuracy_drop"],
            "n_changes": len(doc["changes"]),
            "has_statistics": diff.statistics is not None,
        }
    )
    return row


def _change_rows(base: dict[str, Any], diff: Diff) -> list[dict[str, Any]]:
    return [
        {
            **base,
            "position": i,
            "case_id": c["case_id"],
            "kind": c["kind"],
            "input_preview": preview(c["input"], PREVIEW_WIDTH),
            "input_json": to_json(c["input"]),
            "expected": c["expected"],
            "baseline_selected": c["baseline_selected"],
            "candidate_selected": c["candidate_selected"],
            "baseline_confidence": c["baseline_confidence"],
            "candidate_confidence": c["candidate_confidence"],
            "tv_distance": c["tv_distance"],
            "error": c["error"],
        }
        for i, c in enumerate(diff.document["changes"])
    ]


_SEGMENT_FIELDS = (
    "matched", "compared", "baseline_accuracy", "candidate_accuracy", "accuracy_drop",
    "answer_flip_rate", "gated",
)  # fmt: skip


def _segment_rows(base: dict[str, Any], diff: Diff) -> list[dict[str, Any]]:
    worst = diff.worst_segment
    return [
        {
            **base,
            "position": i,
            "segment_key": s["key"],
            "segment_value": s["value"],
            **{k: s[k] for k in _SEGMENT_FIELDS},
            "is_worst": s is worst,
        }
        for i, s in enumerate(diff.document["segments"])
    ]


def _check_rows(base: dict[str, Any], diff: Diff) -> list[dict[str, Any]]:
    """The diff's checks (as the gate modes decided them), with how each was judged."""
    records = diff.statistics["gates"] if diff.statistics is not None else None
    rows = []
    for i, check in enumerate(diff.document["checks"]):
        rec = records[i] if records is not None else None
        segment = rec.get("segment") if rec is not None else None
        rows.append(
            {
                **base,
                "source": SOURCE,
                **check,
                "mode": "point" if rec is None else rec["mode"],
                "p_value": None if rec is None else rec["p_value"],
                "alpha": None if rec is None else rec["alpha"],
                "ci_low": None if rec is None else rec["low"],
                "ci_high": None if rec is None else rec["high"],
                "confidence": None if rec is None else rec["confidence"],
                "test": None if rec is None else rec["test"],
                "segment_key": None if segment is None else segment["key"],
                "segment_value": None if segment is None else segment["value"],
            }
        )
    return rows


def no_baseline_message(reason: str) -> str:
    return f"no baseline: {reason}; nothing to compare, the gate holds"


def _no_baseline_checks(
    base: dict[str, Any], loaded: LoadedContract, reason: str
) -> list[dict[str, Any]]:
    """Every regression gate passes when there is nothing to compare against."""
    limits = {(g, lvl): limit for g, limit, lvl in configured_gates(loaded.contract.regression)}
    return [
        {
            **base,
            "source": SOURCE,
            "gate": gate,
            "level": level,
            "metric": REGRESSION_GATES[gate],
            "comparison": "<=",
            "threshold": limits[(gate, level)],
            "value": None,
            "status": PASS,
            "message": no_baseline_message(reason),
            "mode": None,
        }
        for gate, level in regression_gates(loaded)
    ]


def _blocks(statistics: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """``(segment columns, block)``: the whole diff, then every segment."""
    out = [({"segment_key": None, "segment_value": None, "gated": None}, statistics["overall"])]
    out += [
        ({"segment_key": s["key"], "segment_value": s["value"], "gated": s["gated"]}, s)
        for s in statistics["segments"]
    ]
    return out


def _interval_rows(base: dict[str, Any], statistics: dict[str, Any]) -> list[dict[str, Any]]:
    confidence = statistics["settings"]["confidence"]
    rows = []
    for where, block in _blocks(statistics):
        common = {**base, **where, "matched": block["matched"], "confidence": confidence}
        for metric, sides in block["metrics"].items():
            for side in ("baseline", "candidate", "delta"):
                entry = sides[side]
                rows.append(
                    {
                        **common,
                        "metric": metric,
                        "side": side,
                        "value": entry["value"],
                        "low": entry["low"],
                        "high": entry["high"],
                        "method": entry["method"],
                        "p_value_candidate_worse": entry.get("p_value_candidate_worse"),
                        "test": entry.get("test"),
                    }
                )
        for metric, entry in block["shift"].items():
            rows.append(
                {
                    **common,
                    "metric": metric,
                    "side": "shift",
                    "value": entry["value"],
                    "low": entry["low"],
                    "high": entry["high"],
                    "method": entry["method"],
                    "p_value_candidate_worse": None,
                    "test": None,
                }
            )
    return rows


def _test_rows(base: dict[str, Any], statistics: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for where, block in _blocks(statistics):
        common = {**base, **where, "matched": block["matched"], "compared": block["compared"]}
        mc, err = block["mcnemar"], block["errors"]
        rows.append(
            {
                **common,
                "test": "mcnemar_exact",
                "n_pairs": mc["n_pairs"],
                "baseline_only": mc["baseline_only_correct"],
                "candidate_only": mc["candidate_only_correct"],
                "p_value": mc["p_value"],
                "p_value_candidate_worse": mc["p_value_candidate_worse"],
            }
        )
        rows.append(
            {
                **common,
                "test": "sign_test_exact",
                "n_pairs": err["newly_errored"] + err["recovered"],
                "baseline_only": err["newly_errored"],
                "candidate_only": err["recovered"],
                "p_value": err["p_value"],
                "p_value_candidate_worse": err["p_value_candidate_worse"],
            }
        )
    return rows


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
