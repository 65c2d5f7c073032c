"""What every feature's assets share: asset keys, the code version that marks them stale when
the contract changes, and the per-target part whose body is one step call.

(No ``from __future__ import annotations`` in modules with Dagster-decorated functions:
Dagster reads the context annotations at definition time.)"""

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import dagster as dg

from decguard_pipeline.core.product import __version__
from decguard_pipeline.defs.gate_checks import PartGates
from decguard_pipeline.defs.resources import WarehouseResource
from decguard_pipeline.steps.base import Step, TargetRun
from decguard_pipeline.steps.contracts import ContractEntry


def asset_key(entry: ContractEntry, name: str) -> dg.AssetKey:
    return dg.AssetKey([entry.key, name])


def code_version(entry: ContractEntry) -> str:
    """Every asset of a contract carries the contract's hash in its code version: editing the
    contract marks their materialisations stale in the UI (and the sensor re-requests them)."""
    return f"{__version__}-{entry.require().hash.removeprefix('sha256:')[:12]}"


def step_of(
    context: dg.AssetExecutionContext,
    warehouse: WarehouseResource,
    shared: TargetRun | None = None,
) -> Step:
    """Where an asset body writes: the warehouse and the run's id (Dagster's ``EPHEMERAL``
    when a test calls the asset as a plain function, where ``context.run`` is not set);
    ``shared``: what the parts of one target run hand each other."""
    return Step(warehouse.get(), context.op_execution_context.run_id, shared=shared)


@contextlib.contextmanager
def one_transaction(warehouse: WarehouseResource) -> Iterator[None]:
    """Everything a step writes to the warehouse, across its parts and tables, in one
    transaction: a reader sees all of it or none, and a step killed midway leaves nothing.
    A step whose part broke ends with ``dg.Failure`` naming it: what its other parts wrote
    (and Dagster recorded as materialised) is committed first."""
    failure = None
    with warehouse.get().transaction():
        try:
            yield
        except dg.Failure as exc:
            failure = exc
    if failure is not None:
        raise failure


PARQUET = frozenset({"python", "parquet"})


@dataclass(frozen=True)
class TargetPart:
    """One asset partitioned by target, as a part of the contract's evaluation step
    (``defs/assets/evaluation.py``): its body is one step call whose result ``metadata``
    shows, its gates are its asset checks. A feature's part comes after ``case_results``
    (the default ``deps``, names of other parts; not after the golden gates, so a candidate
    failing them is still measured).

    A *derived* part has no step: ``derive`` makes its result from the result of its first
    dep, or None when it is not materialised (the spec is skippable: ``approved_target``).
    ``after`` runs once the part is materialised (the verdict tags the run)."""

    name: str
    run: Callable[[ContractEntry, str, Step], Any] | None
    metadata: Callable[[Any], dict[str, Any]]
    description: str
    kinds: frozenset[str] = PARQUET
    deps: tuple[str, ...] = ("case_results",)
    gates: PartGates | None = None
    derive: Callable[[Any], Any | None] | None = None
    after: Callable[[dg.AssetExecutionContext, str, Any], None] | None = None
    versioned: bool = True  # carries the contract's code version (not a broken part)


def broken_part(name: str, heading: str, error: str) -> TargetPart:
    """Settings that do not fit: the part says why and fails when run."""

    def fail(entry: ContractEntry, target: str, step: Step) -> Any:
        raise dg.Failure(description=error)

    return TargetPart(
        name,
        run=fail,
        metadata=lambda done: {},
        description=f"{heading}:\n\n{error}",
        kinds=frozenset(),
        versioned=False,
    )
