"""A target's golden evaluation written by the golden steps, per-target parts run as the
evaluation step runs them, and the refund example served by a loopback model: for tests of
the features built on top (diff, properties)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from decguard_pipeline.defs.assets.base import TargetPart
from decguard_pipeline.defs.assets.verdict import EPHEMERAL
from decguard_pipeline.steps.base import Step
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.steps.golden import evaluate_target, score_target
from decguard_pipeline.steps.verdict import decide_target
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline_tests.support.loopback import Server

REFUND = Path(__file__).resolve().parents[2] / "data" / "contracts" / "refund"


def evaluate(entry: ContractEntry, target: str, warehouse: Warehouse, run_id: str) -> Step:
    """What the evaluate job's ``case_results`` and ``golden_metrics`` write for ``target``
    (``runs``, ``case_results``, ``metrics``, ``gate_results``, …), as run ``run_id``, and
    the verdict that completes the evaluation (from then on the target counts as evaluated
    by that run: warehouse/completion.py)."""
    step = Step(warehouse, run_id)
    evaluate_target(entry, target, step)
    score_target(entry, target, step)
    decide_target(entry, target, step)
    return step


def call_part(
    entry: ContractEntry, part: TargetPart, target: str, warehouse: Warehouse
) -> dict[str, Any]:
    """Run a per-target part as the evaluation step runs it (its step call, then its
    metadata; Dagster's run id of a direct invocation) and return its materialisation
    metadata as plain values."""
    assert part.run is not None
    metadata = part.metadata(part.run(entry, target, Step(warehouse, EPHEMERAL)))
    return {k: getattr(v, "value", v) for k, v in metadata.items()}


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


def execute_target(
    contracts: str | Path,
    target: str,
    warehouse_root: str | Path,
    *,
    instance: Any = None,
    selection: Any = None,
) -> Any:
    """The first contract's evaluate job for one target partition through Dagster
    (``execute_in_process``, an ephemeral instance unless given; ``selection``: an asset
    subset); the execution result, errors kept in it."""
    import dagster as dg

    from decguard_pipeline.definitions import build_definitions
    from decguard_pipeline.defs.job_runs import QUIET
    from decguard_pipeline.defs.jobs import job_name
    from decguard_pipeline.defs.partitions import targets_name
    from decguard_pipeline.steps.contracts import discover_contracts

    entries = discover_contracts(str(contracts))
    defs = build_definitions(entries, warehouse_root=str(warehouse_root))
    instance = instance or dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(targets_name(entries[0].key), [target])
    return defs.resolve_job_def(job_name(entries[0])).execute_in_process(
        instance=instance,
        partition_key=target,
        raise_on_error=False,
        run_config=QUIET,
        asset_selection=selection,
    )
