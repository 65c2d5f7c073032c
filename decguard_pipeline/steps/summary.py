"""The summary table the main job prints: per contract and target, the headline metrics, the
gates of the evaluation itself (golden, properties, guard) and the regression diff against the
chosen baseline; a note per thing a target's backend said beyond its numbers (a fallback it
took, a model version that is only the name asked for); then one line per contract and
production day checked."""

from __future__ import annotations

import json
from typing import Any

from decguard_pipeline.core.cache.summary import answers_cell
from decguard_pipeline.core.engine_notes import engine_notes
from decguard_pipeline.core.formatting import num
from decguard_pipeline.warehouse import Warehouse

# Check tables of the target's own evaluation; regression checks are shown apart.
EVALUATION_CHECKS = ("gate_results", "property_checks", "guard_checks")


def _checks(
    warehouse: Warehouse, table: str, contract: str, target: str, run_id: str
) -> list[dict[str, Any]]:
    rows = warehouse.read_run(table, contract, target, run_id)
    return [] if rows is None else rows.to_pylist()


def _broken(outcome: Any) -> str | None:
    """Why a run of the main job broke (not a gate), or None."""
    if outcome.run_id is None or outcome.errors:
        prefix = f"{outcome.contract}__"  # step keys are <contract>__<asset or check>
        return "; ".join(
            f"{step.removeprefix(prefix)}: {error}" for step, error in outcome.errors.items()
        )
    return None


def _names(checks: list[dict[str, Any]], status: str) -> list[str]:
    names: list[str] = []
    for check in checks:
        if check["status"] == status and check["gate"] not in names:
            names.append(check["gate"])
    return names


def _status(failed: list[str], warned: list[str]) -> str:
    return "fail" if failed else ("warn" if warned else "pass")


def summarise(warehouse: Warehouse, result: Any) -> list[dict[str, Any]]:
    """One row per target the main job ran, from the rows written by that very run: never
    another run's (an older one, or a parallel ``evaluate``'s)."""
    rows = []
    for outcome in result.outcomes:
        contract, target, run_id = outcome.contract, outcome.target, outcome.run_id
        row: dict[str, Any] = {"contract": contract, "target": target, "ran": True}
        broken = _broken(outcome)
        metrics = None if run_id is None else warehouse.read_run("metrics", *_at(outcome))
        if broken is not None or metrics is None:
            row["ran"] = False
            row["error"] = broken or "no metrics written"
            rows.append(row)
            continue
        values = {m["metric"]: m["value"] for m in metrics.to_pylist()}
        checks = [c for t in EVALUATION_CHECKS for c in _checks(warehouse, t, *_at(outcome))]
        row.update(
            accuracy=values.get("accuracy"),
            ece=values.get("ece"),
            coverage=values.get("coverage"),
            cost_per_1000=values.get("cost_per_1000"),  # with the backend's pricing
            unanimous=values.get("consistency_unanimous_share"),  # with pipeline.repeats
            failed=_names(checks, "fail"),
            warned=_names(checks, "warn"),
        )
        row["status"] = _status(row["failed"], row["warned"])
        run = _run_row(warehouse, outcome)
        cache = _cache_section(run)
        if cache is not None:  # the response cache was on: where the answers came from
            row["answers"] = answers_cell(cache)
            row["cache_warnings"] = cache.get("warnings") or []
        row["notes"] = _notes(run)
        diff = warehouse.read_run("diffs", *_at(outcome))
        regression = _checks(warehouse, "regression_checks", *_at(outcome))
        if diff is None or diff.num_rows == 0:
            row["regression"] = "-"
        elif not diff.to_pylist()[-1]["baseline_target"]:
            row["regression"] = "no baseline"
        else:
            baseline = diff.to_pylist()[-1]["baseline_target"]
            failed, warned = _names(regression, "fail"), _names(regression, "warn")
            verdict = _status(failed, warned).upper()
            detail = failed or warned
            row["regression"] = f"{verdict} vs {baseline}" + (
                f" ({', '.join(detail)})" if detail else ""
            )
        rows.append(row)
    return rows


def _run_row(warehouse: Warehouse, outcome: Any) -> dict[str, Any]:
    """The evaluation's ``runs`` row (empty when it wrote none)."""
    runs = warehouse.read_run("runs", *_at(outcome))
    return {} if runs is None or runs.num_rows == 0 else runs.to_pylist()[-1]


def _notes(run: dict[str, Any]) -> list[str]:
    """What the run's backend said beyond its numbers (fallbacks, a version that is only
    the name asked for), from its ``runs`` row."""
    raw = run.get("backend_details_json")
    try:
        details = json.loads(raw) if raw else None
    except ValueError:
        return []
    return engine_notes(details)


def _at(outcome: Any) -> tuple[str, str, str]:
    return outcome.contract, outcome.target, outcome.run_id


def _cache_section(run: dict[str, Any]) -> dict[str, Any] | None:
    """The response cache's section of the evaluation this run made (None: cache off)."""
    text = run.get("cache_json")
    return None if text is None else json.loads(text)


def _gates(row: dict[str, Any]) -> str:
    detail = row["failed"] or row["warned"]
    return row["status"].upper() + (f" ({', '.join(detail)})" if detail else "")


def _cost(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def render_summary(rows: list[dict[str, Any]], result: Any) -> str:
    width = max([len(r["target"]) for r in rows] + [6])
    cwidth = max([len(r["contract"]) for r in rows] + [8])
    gwidth = max([len(_gates(r)) for r in rows if r["ran"]] + [5])
    # the API cost per 1,000 decisions, when some target's backend has pricing
    priced = any(r.get("cost_per_1000") is not None for r in rows)
    cost_head = f"{'cost/1k':<8}  " if priced else ""
    # the share of cases answered the same in every ask, when some contract has repeats
    repeated = any(r.get("unanimous") is not None for r in rows)
    unanimous_head = f"{'unanimous':<9}  " if repeated else ""
    # where the answers came from, when a target's evaluation used the response cache
    awidth = max([len(r.get("answers") or "") for r in rows if r["ran"]] + [0])
    answers_head = f"{'answers':<{awidth}}  " if awidth else ""
    lines = [
        f"{'contract':<{cwidth}}  {'target':<{width}}  accuracy  ECE    coverage  "
        f"{cost_head}{unanimous_head}{answers_head}{'gates':<{gwidth}}  regression"
    ]
    for r in rows:
        head = f"{r['contract']:<{cwidth}}  {r['target']:<{width}}  "
        if not r["ran"]:
            lines.append(head + f"ERROR: {r['error']}")
            continue
        cost = f"{_cost(r['cost_per_1000']):<8}  " if priced else ""
        unanimous = f"{num(r['unanimous']):<9}  " if repeated else ""
        answers = f"{r.get('answers') or '-':<{awidth}}  " if awidth else ""
        lines.append(
            head + f"{num(r['accuracy']):<8}  {num(r['ece']):<5}  {num(r['coverage']):<8}  "
            f"{cost}{unanimous}{answers}{_gates(r):<{gwidth}}  {r['regression']}"
        )
    for r in rows:
        for note in r.get("notes") or ():
            lines.append(f"note     {r['contract']}/{r['target']}: {note}")
    for contract, backend, why in result.skipped:
        lines.append(f"skipped  {contract}/{backend}: {why}")
    for contract, error in result.broken:
        lines.append(f"BROKEN   {contract}: {error}")
    return "\n".join(lines)


def summarise_production(warehouse: Warehouse, result: Any) -> list[dict[str, Any]]:
    """Per production day the main job checked: status, accuracy and drift of the check that
    very run wrote."""
    from decguard_pipeline.steps.production.schedule import summary_row

    rows = []
    for outcome in getattr(result, "production", []):
        broken = _broken(outcome)
        row = None
        if broken is None:
            row = summary_row(outcome.contract, outcome.target, warehouse, outcome.run_id)
        if row is None:
            error = broken or "no check written"
            row = {"contract": outcome.contract, "day": outcome.target, "error": error}
        rows.append({**row, "ran": "error" not in row})
    return rows


def render_production(rows: list[dict[str, Any]]) -> str:
    cwidth = max([len(r["contract"]) for r in rows] + [8])
    lines = [f"{'contract':<{cwidth}}  production day  status  accuracy  drift TV  baseline"]
    for r in rows:
        head = f"{r['contract']:<{cwidth}}  {r['day']:<14}  "
        if not r["ran"]:
            lines.append(head + f"ERROR: {r['error']}")
            continue
        baseline = r["baseline"] or "none"
        lines.append(
            head + f"{r['status'].upper():<6}  {num(r['accuracy']):<8}  "
            f"{num(r['confidence_tv_distance']):<8}  {baseline} ({r['baseline_rule']})"
        )
    return "\n".join(lines)
