"""Register targets: discover each backend's current version, record it when it changed, and
tell whether a target was already evaluated (a run reached its verdict) on the contract and
data as they are now."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from decguard_pipeline.core.guard.extension import guard_enabled
from decguard_pipeline.steps.base import Step
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.steps.golden import load_golden, record_target
from decguard_pipeline.steps.targets import Target, discover_targets
from decguard_pipeline.warehouse import Warehouse


@dataclass
class Discovered:
    targets: list[Target] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    recorded: list[str] = field(default_factory=list)  # keys of targets new or changed


def discover_and_record(
    entry: ContractEntry, warehouse: Warehouse, *, run_id: str, backends: list[str] | None = None
) -> Discovered:
    """Current targets of a contract's backends (the first golden case is the canary), each
    recorded in the ``targets`` table when new or changed; unusable backends are skipped
    with the reason."""
    loaded = entry.require()
    data = load_golden(entry) if loaded.contract.dataset is not None else None
    canary = data.inputs[0] if data is not None and len(data) else None
    targets, skipped = discover_targets(loaded, canary_input=canary, backends=backends)
    step = Step(warehouse, run_id)
    with warehouse.transaction(), warehouse.snapshot():  # one read, one commit for them all
        recorded = [t.key for t in targets if record_target(entry, t, step)]
    return Discovered(targets, skipped, recorded)


@dataclass(frozen=True)
class Inputs:
    """What an evaluation of a contract depends on besides the model, as the warehouse
    records it: ``runs.contract_hash``, ``runs.dataset_hash`` and, for the guard's other
    suites, ``guard_suites.dataset_hash``."""

    contract_hash: str
    dataset_hash: str | None
    suite_hashes: frozenset[str]


def _file_hash(path: Path) -> str:
    with path.open("rb") as handle:
        return "sha256:" + hashlib.file_digest(handle, "sha256").hexdigest()


def current_inputs(entry: ContractEntry) -> Inputs:
    """The contract, its golden dataset and (when the guard runs them) its suites, as they
    are on disk now."""
    loaded = entry.require()
    contract = loaded.contract
    dataset = _file_hash(loaded.resolve(contract.dataset)) if contract.dataset else None
    suites: frozenset[str] = frozenset()
    if guard_enabled(contract) and contract.pipeline is not None and contract.pipeline.suites:
        suites = frozenset(_file_hash(loaded.resolve(p)) for p in contract.pipeline.suites.values())
    return Inputs(loaded.hash, dataset, suites)


@dataclass(frozen=True)
class Evaluations:
    """What the runs of a target on the current inputs came to."""

    evaluated: bool  # one of them evaluated it (see :func:`evaluations`)
    failed: int  # runs that wrote their runs row but ended without evaluating it


def evaluations(
    entry: ContractEntry, target: str, warehouse: Warehouse, inputs: Inputs
) -> Evaluations:
    """Whether some run already evaluated ``target`` on ``inputs`` (whoever started it:
    ``evaluate``, the sensor, a schedule, the UI): it reached its verdict (a run killed or
    broken before that left rows, but did not evaluate the target: warehouse/completion.py),
    its ``runs`` row has the same contract and dataset hashes, it decided at least one case
    (a backend that failed on every case is worth asking again) and, when suites are
    evaluated too, its ``guard_suites`` rows hold every suite's hash. Else, how many runs
    on these contract and dataset hashes ended without it (no verdict, or no case decided)."""
    with warehouse.snapshot():  # its reads together
        done = warehouse.completed_runs(entry.key, target)
        runs = warehouse.rows(
            "runs",
            "contract = $c AND target = $t",
            {"c": entry.key, "t": target},
            order="recorded_at DESC, run_id DESC",  # newest first: usually the latest
        )
        failed = 0
        for run in runs.to_pylist():
            if (run["contract_hash"], run["dataset_hash"]) != (
                inputs.contract_hash,
                inputs.dataset_hash,
            ):
                continue
            n_cases, n_errored = run["n_cases"] or 0, run["n_errored"] or 0
            if run["run_id"] not in done or (n_cases and n_errored >= n_cases):
                failed += 1
                continue
            if inputs.suite_hashes:
                suites = warehouse.read_run("guard_suites", entry.key, target, run["run_id"])
                hashes = [] if suites is None else suites.column("dataset_hash").to_pylist()
                measured = set(hashes)
                if not inputs.suite_hashes <= measured:
                    continue
            return Evaluations(True, failed)
        return Evaluations(False, failed)


def evaluated(entry: ContractEntry, target: str, warehouse: Warehouse, inputs: Inputs) -> bool:
    """Whether some run already evaluated ``target`` on ``inputs`` (:func:`evaluations`)."""
    return evaluations(entry, target, warehouse, inputs).evaluated
