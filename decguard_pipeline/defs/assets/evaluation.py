"""A contract's evaluation of one target as ONE Dagster step: every asset partitioned by target
(the golden chain, the features' parts, the verdict and the approval) is a spec of one
subsettable multi-asset, and every gate of theirs a check spec of it.

Dagster's bookkeeping is per step (its start and success events, its context, its look-up of
the inputs' data versions), per asset, per check and per event; one step per target keeps
every asset key, dependency edge, description, kind, code version, check and metadata the UI
shows and drops the per-step part (a target run is 3 steps, not one per asset:
docs/performance.md). It runs the selected parts in dependency order, handing them one
``steps.base.TargetRun``: the evaluation, the target's report and the backend are made once
for every part (a part run alone reads the evaluation back once). A part that raises stops the
parts after it that depend on it; the independent ones still run and are recorded; the step
then fails with one error naming each broken part and its own error (``job_runs`` reads them
back per part).

(No ``from __future__ import annotations``: Dagster reads the context annotations.)"""

import traceback
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from typing import Any

import dagster as dg

from decguard_pipeline.defs.assets.base import (
    TargetPart,
    asset_key,
    code_version,
    one_transaction,
    step_of,
)
from decguard_pipeline.defs.error_text import error_text
from decguard_pipeline.defs.gate_checks import check_results, check_specs
from decguard_pipeline.defs.partitions import targets_partitions
from decguard_pipeline.defs.resources import WarehouseResource
from decguard_pipeline.defs.site_links import contract_link, part_link
from decguard_pipeline.steps.base import TargetRun
from decguard_pipeline.steps.contracts import ContractEntry

FAILED_PARTS = "decguard/failed_parts"  # the step failure's metadata: {part: its error}
EVALUATION = "evaluation"  # the step's name: <contract>__evaluation


# one unit of work: (name, names it depends on, the call yielding its events)
Work = tuple[str, Iterable[str], Callable[[], Iterator[Any]]]


def run_in_order(work: list[Work], log: Any) -> Iterator[Any]:
    """Each unit in order, unless one it depends on broke; then one failure naming every
    broken unit (the first one's traceback as the cause)."""
    failed: dict[str, BaseException] = {}
    blocked: set[str] = set()
    for name, deps, call in work:
        if any(d in failed or d in blocked for d in deps):
            blocked.add(name)
            continue
        try:
            yield from call()
        except Exception as exc:
            failed[name] = exc
            log.error(f"{name} failed: {error_text(exc)}")
    if failed:
        raise _failure(failed, blocked) from next(iter(failed.values()))


def _failure(failed: dict[str, BaseException], blocked: set[str]) -> dg.Failure:
    """One failure for the step: the UI shows every broken part's whole message and
    traceback; ``FAILED_PARTS`` has each one's error in one line (``evaluate``'s summary)."""
    lines = [f"{name}: {_message(exc)}" for name, exc in failed.items()]
    if blocked:
        lines.append("not run (after a broken part): " + ", ".join(sorted(blocked)))
    return dg.Failure(
        description="\n".join(lines),
        metadata={
            FAILED_PARTS: dg.MetadataValue.json(
                {name: error_text(exc) for name, exc in failed.items()}
            ),
            **{
                f"traceback {name}": dg.MetadataValue.md(
                    "```\n" + "".join(traceback.format_exception(exc)) + "```"
                )
                for name, exc in failed.items()
            },
        },
    )


def _message(exc: BaseException) -> str:
    text = exc.description if isinstance(exc, dg.Failure) else str(exc)
    return (text or "").strip() or type(exc).__name__


def in_dependency_order(parts: list[TargetPart]) -> list[TargetPart]:
    """Each part after the parts it depends on, otherwise in the given order."""
    names = {p.name for p in parts}
    ordered: list[TargetPart] = []
    placed: set[str] = set()
    while len(ordered) < len(parts):
        ready = [p for p in parts if p.name not in placed
                 and all(d in placed or d not in names for d in p.deps)]  # fmt: skip
        if not ready:
            raise ValueError(f"cyclic parts: {sorted(names - placed)}")
        ordered.append(ready[0])
        placed.add(ready[0].name)
    return ordered


def evaluation_asset(entry: ContractEntry, parts: list[TargetPart]) -> dg.AssetsDefinition:
    """The contract's per-target parts as one subsettable multi-asset."""
    parts = in_dependency_order(parts)
    partitions, version = targets_partitions(entry.key), code_version(entry)
    by_name = {p.name: p for p in parts}
    keys = {p.name: asset_key(entry, p.name) for p in parts}

    def dep_key(name: str) -> dg.AssetKey:
        return keys.get(name) or asset_key(entry, name)

    specs = [
        dg.AssetSpec(
            keys[p.name],
            deps=[dep_key(d) for d in p.deps],
            description=p.description,
            group_name=entry.key,
            code_version=version if p.versioned else None,
            kinds=set(p.kinds),
            partitions_def=partitions,
            skippable=p.derive is not None,
            metadata=contract_link(entry.key),
        )
        for p in parts
    ]
    checks = [
        spec
        for p in parts
        if p.gates is not None
        for spec in check_specs(keys[p.name], p.gates.gates, partitions)
    ]

    @dg.multi_asset(
        name=f"{entry.key}__{EVALUATION}",
        specs=specs,
        check_specs=checks,
        can_subset=True,
        description=f"Every asset of one target of {entry.path}, in one step.",
    )
    def evaluation(
        context: dg.AssetExecutionContext, warehouse: WarehouseResource
    ) -> Iterator[Any]:
        target, run_id = context.partition_key, context.op_execution_context.run_id
        selected = {k.path[-1] for k in context.selected_asset_keys}
        checked = {(k.asset_key.path[-1], k.name) for k in context.selected_asset_check_keys}
        # a derived part needs the part it is derived from, materialised or not
        needed = selected | {p.deps[0] for p in parts if p.derive and p.name in selected}
        done: dict[str, Any] = {}
        # the evaluation, its report and the backend, made once for the parts of this run
        shared = TargetRun()

        def materialise(part: TargetPart) -> Iterator[Any]:
            if part.derive is not None:
                done[part.name] = result = part.derive(done[part.deps[0]])
                if result is None:
                    return
            else:
                # a Step (and its timestamp) per part, as when each was a step of its own
                step = step_of(context, warehouse, shared)
                assert part.run is not None
                done[part.name] = result = part.run(entry, target, step)
            if part.name in selected:
                metadata = {
                    **part.metadata(result),
                    **part_link(entry.key, target, part.name, result),
                }
                yield dg.MaterializeResult(asset_key=keys[part.name], metadata=metadata)
            if part.after is not None:  # also for a part run only for a derived one
                part.after(context, target, result)

        def check(part: TargetPart) -> Iterator[Any]:
            assert part.gates is not None
            rows = part.gates.load(entry, target, warehouse.get(), run_id)
            yield from check_results(
                entry, keys[part.name], part.gates.gates, rows, context.log,
                result=part.gates.result, selected=lambda name: (part.name, name) in checked,
            )  # fmt: skip

        work: list[Work] = []
        for p in parts:
            if p.name in needed:
                work.append((p.name, [d for d in p.deps if d in by_name], partial(materialise, p)))
            if p.gates is not None and any(name == p.name for name, _ in checked):
                # the checks read what the part stored (without it, its newest rows: a check
                # run alone from the UI); failing, they stop nothing after the part
                after = [p.name] if p.name in needed else []
                work.append((f"{p.name} checks", after, partial(check, p)))
        try:
            with one_transaction(warehouse):
                yield from run_in_order(work, context.log)
        finally:
            shared.close()

    return evaluation
