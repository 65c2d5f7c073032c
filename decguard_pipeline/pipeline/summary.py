"""The summary table the main job prints: contract, target, accuracy, ECE, coverage, gates."""

from __future__ import annotations

from typing import Any

from decguard_pipeline.core.report.render import num
from decguard_pipeline.warehouse import Warehouse


def summarise(warehouse: Warehouse, result: Any) -> list[dict[str, Any]]:
    rows = []
    for outcome in result.outcomes:
        row: dict[str, Any] = {
            "contract": outcome.contract,
            "target": outcome.target,
            "ran": True,
            "status": None,
            "failed": [],
        }
        metrics = warehouse.read_latest("metrics", outcome.contract, outcome.target)
        gates = warehouse.read_latest("gate_results", outcome.contract, outcome.target)
        if metrics is None or gates is None:
            row["ran"] = False
            row["error"] = ", ".join(outcome.failed_steps) or "no results"
            rows.append(row)
            continue
        values = {m["metric"]: m["value"] for m in metrics.to_pylist()}
        checks = gates.to_pylist()
        row.update(
            accuracy=values.get("accuracy"),
            ece=values.get("ece"),
            coverage=values.get("coverage"),
            failed=[c["gate"] for c in checks if c["status"] == "fail"],
            warned=[c["gate"] for c in checks if c["status"] == "warn"],
        )
        row["status"] = "fail" if row["failed"] else ("warn" if row["warned"] else "pass")
        rows.append(row)
    return rows


def render_summary(rows: list[dict[str, Any]], result: Any) -> str:
    width = max([len(r["target"]) for r in rows] + [6])
    cwidth = max([len(r["contract"]) for r in rows] + [8])
    lines = [f"{'contract':<{cwidth}}  {'target':<{width}}  accuracy  ECE    coverage  gates"]
    for r in rows:
        head = f"{r['contract']:<{cwidth}}  {r['target']:<{width}}  "
        if not r["ran"]:
            lines.append(head + f"ERROR: run failed ({r['error']})")
            continue
        gates = r["status"].upper()
        if r["failed"]:
            gates += f" ({', '.join(r['failed'])})"
        elif r["warned"]:
            gates += f" ({', '.join(r['warned'])})"
        lines.append(
            head + f"{num(r['accuracy']):<8}  {num(r['ece']):<5}  {num(r['coverage']):<8}  {gates}"
        )
    for contract, backend, why in result.skipped:
        lines.append(f"skipped  {contract}/{backend}: {why}")
    for contract, error in result.broken:
        lines.append(f"BROKEN   {contract}: {error}")
    return "\n".join(lines)
