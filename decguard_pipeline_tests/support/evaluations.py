"""A target's golden evaluation written by the golden steps, Dagster assets called as plain
functions, and the refund example served by a loopback model: for tests of the features built
on top (diff, properties)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import dagster as dg

from decguard_pipeline.defs.resources import WarehouseResource
from decguard_pipeline.steps.base import Step
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.steps.golden import evaluate_target, score_target
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline_tests.support.loopback import Server

REFUND = Path(__file__).resolve().parents[2] / "data" / "contracts" / "refund"


def evaluate(entry: ContractEntry, target: str, warehouse: Warehouse, run_id: str) -> Step:
    """What the evaluate job's ``case_results`` and ``golden_metrics`` write for ``target``
    (``runs``, ``case_results``, ``metrics``, ``gate_results``, …), as run ``run_id``."""
    step = Step(warehouse, run_id)
    evaluate_target(entry, target, step)
    score_target(entry, target, step)
    return step


def call_asset(asset: dg.AssetsDefinition, target: str, warehouse: Warehouse) -> dict[str, Any]:
    """Call a per-target asset directly (``build_asset_context``, the warehouse as its
    resource) and return its materialisation metadata as plain values."""
    context = dg.build_asset_context(
        partition_key=target, resources={"warehouse": WarehouseResource(root=str(warehouse.root))}
    )
    result = asset(context)
    assert isinstance(result, dg.MaterializeResult)
    return {k: getattr(v, "value", v) for k, v in (result.metadata or {}).items()}


def refund_over_http(folder: Path, server: Server, settings: str) -> Path:
    """The refund example's decision and cases with ``server`` (a loopback model) as its
    ``http`` backend, and the contract lines ``settings`` (evaluation, fuzz, properties);
    returns the contract's path."""
    folder.mkdir(parents=True)
    shutil.copy(REFUND / "cases.jsonl", folder / "cases.jsonl")
    path = folder / "decguard.yaml"
    path.write_text(
        'schema_version: "0.1"\n'
        "decision: {name: refund_request, type: choice, options: [refund, reject, review]}\n"
        f"backend: {{provider: http, url: '{server.url}', health_url: '{server.health_url}'}}\n"
        "dataset: cases.jsonl\n" + settings
    )
    return path
