"""The main job: register every contract's current targets and materialise all their assets
and checks through Dagster on a persistent instance (what ``decguard-pipeline evaluate`` and
``make run`` do)."""

import uuid
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field

import dagster as dg

from decguard_pipeline.core.contract.model import DEFAULT_BACKEND
from decguard_pipeline.defs import fork_server, parallel
from decguard_pipeline.defs.job_runs import Outcome
from decguard_pipeline.defs.jobs import job_name
from decguard_pipeline.defs.limits import backend_tags
from decguard_pipeline.defs.partitions import targets_partitions
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.steps.registration import discover_and_record
from decguard_pipeline.steps.targets import backend_of
from decguard_pipeline.warehouse import Warehouse


@dataclass
class MainJobResult:
    outcomes: list[Outcome] = field(default_factory=list)
    skipped: list[tuple[str, str, str]] = field(default_factory=list)  # contract, backend, why
    broken: list[tuple[str, str]] = field(default_factory=list)  # contract, error
    production: list[Outcome] = field(default_factory=list)  # target = the day checked


def _problem(exc: Exception) -> str:
    from decguard_pipeline.core.errors import DecGuardError

    return str(exc) if isinstance(exc, DecGuardError) else f"{type(exc).__name__}: {exc}"


def evaluate_all(
    defs: dg.Definitions,
    entries: list[ContractEntry],
    instance: dg.DagsterInstance,
    warehouse: Warehouse,
    *,
    backends: list[str] | None = None,
    workers: int = 1,
    build: Callable[..., dg.Definitions] | None = None,
    pool: Executor | None = None,
) -> MainJobResult:
    """Every contract: its targets registered, then their runs (and its production days) in
    ``workers`` processes within the per-server run limits (defs/parallel.py). A contract
    that cannot be evaluated (broken file, missing dataset, ...) is reported in ``broken``
    and the others still run. ``build`` (``definitions.build_definitions``) makes each worker
    process's definitions when ``workers`` > 1; ``pool``: those workers, when the caller
    opened them already (``workers.open_pool``: before the instance)."""
    fork_server.start_early(workers)  # unless evaluate did: its imports beside our work
    out = MainJobResult()
    items: list[parallel.Item] = []
    production: list[bool] = []  # per item: a production chain, else a target
    for entry in entries:
        if not entry.ok:
            out.broken.append((entry.key, entry.error or ""))
            continue
        try:
            first = len(items)
            keys = register_targets(entry, instance, warehouse, out, backends=backends)
            items += target_items(entry, keys, first)
            days = production_item(entry, after=set(range(first, len(items))))
        except Exception as exc:
            del items[first:]
            out.broken.append((entry.key, _problem(exc)))
            continue
        production += [False] * (len(items) - first)
        if days is not None:
            items.append(days)
            production.append(True)
    results = parallel.run_items(
        items, instance, workers=workers, defs=defs, build=build, entries=entries,
        warehouse_root=str(warehouse.root), pool=pool,
    )  # fmt: skip
    for is_production, outcomes in zip(production, results, strict=True):
        (out.production if is_production else out.outcomes).extend(outcomes)
    return out


def register_targets(
    entry: ContractEntry,
    instance: dg.DagsterInstance,
    warehouse: Warehouse,
    out: MainJobResult,
    *,
    backends: list[str] | None = None,
) -> list[str]:
    """Discover and record the contract's current targets, add the new ones as partitions;
    their keys."""
    names = [b for b in entry.require().contract.backend_names() if not backends or b in backends]
    found = discover_and_record(
        entry, warehouse, run_id=f"register-{uuid.uuid4().hex[:12]}", backends=names
    )
    out.skipped += [(entry.key, b, why) for b, why in found.skipped.items()]
    keys = [t.key for t in found.targets]
    partitions = targets_partitions(entry.key).name
    known = set(instance.get_dynamic_partitions(partitions))
    new = [k for k in keys if k not in known]
    if new:
        instance.add_dynamic_partitions(partitions, new)
    return keys


def target_items(entry: ContractEntry, keys: list[str], first: int) -> list[parallel.Item]:
    """One item per target (``first``: the index of the first one). The other backends wait
    for the default backend's target: it is their regression baseline, and a diff must not
    depend on which worker finished first."""
    items = []
    baseline = {first + i for i, key in enumerate(keys) if backend_of(key) == DEFAULT_BACKEND}
    for key in keys:
        # few tags, so the verdict's shows: the target is the run's partition tag
        tags = {"decguard/trigger": "evaluate", **backend_tags(entry, key)}
        after = set() if backend_of(key) == DEFAULT_BACKEND else baseline
        items.append(parallel.Item(entry.key, [parallel.Run(job_name(entry), key, tags)], after))
    return items


def production_item(entry: ContractEntry, after: set[int]) -> parallel.Item | None:
    """The contract's production job for every day that has a records file, oldest first
    (so each day's baseline, the day before, is ingested first), after its targets."""
    from decguard_pipeline.defs.assets import production as production_assets

    days = production_assets.production_days(entry)
    if not days:
        return None
    job = production_assets.job_name(entry)
    # the day is the run's partition tag
    runs = [parallel.Run(job, day, {"decguard/trigger": "evaluate"}) for day in days]
    return parallel.Item(entry.key, runs, after)


def run_production_days(
    defs: dg.Definitions, entry: ContractEntry, instance: dg.DagsterInstance
) -> list[Outcome]:
    """The contract's production days, run in this process (oldest first)."""
    item = production_item(entry, set())
    return [] if item is None else parallel.run_item(item, defs, instance)
