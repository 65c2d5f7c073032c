"""The summary table the main job prints: per contract and target, its verdict first (the
one ``core.verdict`` value the ``verdict`` asset stored), the headline metrics, where the
answers came from, the baseline it was compared with and every gate that does not hold with
its value and threshold; a note per thing a target's backend said beyond its numbers (a
fallback it took, a model version that is only the name asked for); then one line per
contract and production day checked."""

from __future__ import annotations

import json
from typing import Any

from decguard_pipeline.core.cache.summary import answers_cell
from decguard_pipeline.core.engine_notes import engine_notes
from decguard_pipeline.core.formatting import num, printable
from decguard_pipeline.core.verdict import from_row
from decguard_pipeline.warehouse import Warehouse

NONE = "-"


def _broken(outcome: Any) -> str | None:
    """Why a run of the main job broke (not a gate), or None."""
    if outcome.run_id is None or outcome.errors:
        prefix = f"{outcome.contract}__"  # step keys are <contract>__<asset or check>
        return "; ".join(
            f"{step.removeprefix(prefix)}: {error}" for step, error in outcome.errors.items()
        )
    return None


def _last(warehouse: Warehouse, table: str, outcome: Any) -> dict[str, Any] | None:
    rows = warehouse.read_run(table, *_at(outcome))
    return None if rows is None or rows.num_rows == 0 else rows.to_pylist()[-1]


def summarise(warehouse: Warehouse, result: Any) -> list[dict[str, Any]]:
    """One row per target the main job ran, from the rows written by that very run: never
    another run's (an older one, or a parallel ``evaluate``'s)."""
    rows = []
    for outcome in result.outcomes:
        contract, target, run_id = outcome.contract, outcome.target, outcome.run_id
        row: dict[str, Any] = {"contract": contract, "target": target, "ran": True}
        broken = _broken(outcome)
        stored = None if run_id is None or broken is not None else _last(
            warehouse, "verdicts", outcome
        )  # fmt: skip
        if broken is not None or stored is None:
            row["ran"] = False
            row["error"] = broken or "no verdict written"
            rows.append(row)
            continue
        metrics = warehouse.read_run("metrics", *_at(outcome))
        values = {} if metrics is None else {m["metric"]: m["value"] for m in metrics.to_pylist()}
        verdict = from_row(stored)
        row.update(
            verdict=verdict.status,
            headline=stored.get("headline") or verdict.headline(),
            gates=verdict.gate_texts(),
            accuracy=stored["accuracy"],
            ece=stored["ece"],
            coverage=stored["coverage"],
            cost_per_1000=stored["cost_per_1000"],  # with the backend's pricing
            unanimous=values.get("consistency_unanimous_share"),  # with pipeline.repeats
            baseline=_baseline(stored),
        )
        run = _run_row(warehouse, outcome)
        cache = _cache_section(run)
        if cache is not None:  # the response cache was on: where the answers came from
            row["answers"] = answers_cell(cache)
            row["cache_warnings"] = cache.get("warnings") or []
        row["notes"] = _notes(run)
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


def _cache_section(run: dict[str, Any]) -> dict[str, Any] | None:
    """The response cache's section of the evaluation this run made (None: cache off)."""
    text = run.get("cache_json")
    return None if text is None else json.loads(text)


def _baseline(stored: dict[str, Any]) -> str:
    """The target the regression gates compared with; ``none`` when there was nothing to
    compare, ``-`` when no diff ran."""
    if stored.get("regression_status") is None:
        return NONE
    return stored.get("baseline_target") or "none"


def _at(outcome: Any) -> tuple[str, str, str]:
    return outcome.contract, outcome.target, outcome.run_id


def _cost(value: float | None) -> str:
    return NONE if value is None else f"{value:.4g}"


def render_summary(rows: list[dict[str, Any]], result: Any) -> str:
    """The table: ``verdict`` first, then what was evaluated, its numbers, its baseline and
    every gate that does not hold (failing requirements first, warnings marked)."""
    ran = [r for r in rows if r["ran"]]
    width = max([len(r["target"]) for r in rows] + [6])
    cwidth = max([len(r["contract"]) for r in rows] + [8])
    bwidth = max([len(r["baseline"]) for r in ran] + [8])
    # the API cost per 1,000 decisions, when some target's backend has pricing
    priced = any(r.get("cost_per_1000") is not None for r in ran)
    cost_head = f"{'cost/1k':<8}  " if priced else ""
    # the share of cases answered the same in every ask, when some contract has repeats
    repeated = any(r.get("unanimous") is not None for r in ran)
    unanimous_head = f"{'unanimous':<9}  " if repeated else ""
    # where the answers came from, when a target's evaluation used the response cache
    awidth = max([len(r.get("answers") or "") for r in ran] + [0])
    answers_head = f"{'answers':<{awidth}}  " if awidth else ""
    lines = [
        f"{'verdict':<7}  {'contract':<{cwidth}}  {'target':<{width}}  accuracy  ECE    "
        f"coverage  {cost_head}{unanimous_head}{answers_head}{'baseline':<{bwidth}}  "
        "gates not holding"
    ]
    for r in rows:
        word = r["verdict"].upper() if r["ran"] else "ERROR"
        head = f"{word:<7}  {r['contract']:<{cwidth}}  {r['target']:<{width}}  "
        if not r["ran"]:
            lines.append(head + r["error"])
            continue
        cost = f"{_cost(r['cost_per_1000']):<8}  " if priced else ""
        unanimous = f"{num(r['unanimous']):<9}  " if repeated else ""
        answers = f"{r.get('answers') or NONE:<{awidth}}  " if awidth else ""
        lines.append(
            head + f"{num(r['accuracy']):<8}  {num(r['ece']):<5}  {num(r['coverage']):<8}  "
            f"{cost}{unanimous}{answers}{r['baseline']:<{bwidth}}  "
            f"{', '.join(r['gates']) or NONE}"
        )
    for r in rows:
        for note in r.get("notes") or ():
            lines.append(f"note     {r['contract']}/{r['target']}: {note}")
    for contract, backend, why in result.skipped:
        lines.append(f"skipped  {contract}/{backend}: {why}")
    for contract, error in result.broken:
        lines.append(f"BROKEN   {contract}: {error}")
    # errors may quote what a model server said
    return printable("\n".join(lines), lines=True)


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
