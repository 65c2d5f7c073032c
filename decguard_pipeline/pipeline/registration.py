"""Register targets: discover each backend's current version and record it."""

from __future__ import annotations

from dataclasses import dataclass, field

from decguard_pipeline.pipeline import steps
from decguard_pipeline.pipeline.contracts import ContractEntry
from decguard_pipeline.pipeline.targets import Target, discover_targets
from decguard_pipeline.warehouse import Warehouse


@dataclass
class Discovered:
    targets: list[Target] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


def discover_and_record(
    entry: ContractEntry, warehouse: Warehouse, *, run_id: str, backends: list[str] | None = None
) -> Discovered:
    """Current targets of a contract's backends (the first golden case is the canary), each
    recorded in the ``targets`` table; unusable backends are skipped with the reason."""
    loaded = entry.require()
    data = steps.load_golden(entry) if loaded.contract.dataset is not None else None
    canary = data.inputs[0] if data is not None and len(data) else None
    targets, skipped = discover_targets(loaded, canary_input=canary, backends=backends)
    step = steps.Step(warehouse, run_id)
    for target in targets:
        steps.record_target(entry, target, step)
    return Discovered(targets, skipped)
