"""The runs of ``evaluate``. A work item is a chain of target-job runs executed in order (a
target: one run; a contract's production days: one run per day, oldest first), each with
``execute_in_process`` (defs/job_runs.py). An item may wait for others: a contract's other
targets wait for its default target, their regression baseline; production days wait for the
contract's targets.

* ``--workers 1``: the items one after the other in this process, each after those it waits
  for, the longest chains first (``in_order``).
* ``--workers N``: one run of a ``decguard_evaluate`` job built for the items, one op per item,
  waiting for the ops of the items it comes after (``In(Nothing)`` dependencies), on
  Dagster's multiprocess executor: ``max_concurrent: N``, its processes started from a fork
  server that preloads the pipeline and the instance once (``preload_modules``). The op of a
  target on a model server is tagged ``decguard/backend=<host:port>`` (defs/limits.py) and the
  executor applies the instance's ``run_queue.tag_concurrency_limits`` to those tags (one op
  per server at a time by default): the limits the run queue applies to the runs the daemon
  launches. The target runs carry the same tag, so the run queue counts them too. Ops are
  ordered by ``dagster/priority``: the longest chains first (``priorities``), so a long
  chain does not start last while the other process is idle.

The job is reconstructable (``build_reconstructable_job``): its plan travels to the
executor's processes as JSON, the definitions factory named in it, and each process builds
the definitions of the evaluation's contracts."""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import dagster as dg

from decguard_pipeline.core import processes
from decguard_pipeline.defs.job_runs import QUIET, Outcome, run_job
from decguard_pipeline.defs.limits import BACKEND_TAG

JOB_NAME = "decguard_evaluate"
EVALUATION_TAG = "decguard/evaluation"  # a target run's tag: the run of the job that ran it
PRIORITY_TAG = "dagster/priority"
# what every executor process needs, imported once by the fork server (the instance's
# storages last: defs/executor_preload.py)
PRELOAD = [
    __name__,
    "decguard_pipeline.definitions",
    "decguard_pipeline.steps.golden",
    "decguard_pipeline.steps.properties",
    "decguard_pipeline.warehouse",
    "decguard_pipeline.backends.openai",
    "decguard_pipeline.core.report.verify",
    "pandas",
    "pyarrow.dataset",
    "httpx",
    "aiohttp",
    "decguard_pipeline.defs.executor_preload",
]


@dataclass(frozen=True)
class Run:
    job: str
    key: str  # partition key
    tags: dict[str, str]


@dataclass
class Item:
    """Runs for one op, in order; ``after``: indexes of items that must finish first."""

    contract: str
    runs: list[Run]
    after: set[int] = field(default_factory=set)

    @property
    def tags(self) -> dict[str, str]:  # what the limits count: the tags of its runs
        merged: dict[str, str] = {}
        for run in self.runs:
            merged.update(run.tags)
        return merged

    def to_json(self) -> dict[str, Any]:
        runs = [{"job": r.job, "key": r.key, "tags": r.tags} for r in self.runs]
        return {"contract": self.contract, "runs": runs, "after": sorted(self.after)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Item:
        runs = [Run(r["job"], r["key"], dict(r["tags"])) for r in data["runs"]]
        return cls(data["contract"], runs, set(data["after"]))


@dataclass(frozen=True)
class Plan:
    """What the job is built from; JSON all through (``build_reconstructable_job``)."""

    items: list[dict[str, Any]]
    workers: int
    contracts: str | None  # discover_contracts' spec
    warehouse_root: str
    limits: list[dict[str, Any]]
    factory: str  # "module:function" building the definitions (definitions.build_definitions)
    evaluation_pid: int  # the process of the evaluation, which the ops' processes end with


# The definitions of this process's evaluation: given by ``evaluate``, built once in each
# executor process (keyed by what they are built from).
_DEFINITIONS: dict[tuple[str | None, str], Any] = {}


def _end_with_the_evaluation(pid: int) -> None:
    """End this op process when the evaluation (process ``pid``) is gone, kill -9 included,
    rather than finish its runs for nobody. Its runs are then marked failed by the next
    evaluation (``instance.fail_dead_runs``) or the daemon's ``dead_runs`` sensor."""

    def watch() -> None:
        while processes.running(pid):
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="end-with-the-evaluation").start()


def factory_name(build: Callable[..., Any]) -> str:
    return f"{build.__module__}:{build.__qualname__}"


FACTORY_ENV = "DECGUARD_EVALUATION_FACTORY"  # what the fork server builds ahead (see below)
ROOT_ENV = "DECGUARD_EVALUATION_WAREHOUSE"  # ... and on which warehouse
_started: set[int] = set()  # the processes whose first op set them up


def _build(factory: str, contracts: str | None, warehouse_root: str) -> Any:
    import importlib

    from decguard_pipeline.steps.contracts import discover_contracts

    module, name = factory.split(":")
    build = getattr(importlib.import_module(module), name)
    return build(discover_contracts(contracts), warehouse_root=warehouse_root)


def preload_definitions() -> None:
    """The definitions of the evaluation, built in the executor's fork server
    (defs/executor_preload.py), whose environment is the evaluation's: every op process
    forked from it has them. Opens no connection (a forked process must not share one)."""
    factory = os.environ.get(FACTORY_ENV)
    if factory:
        from decguard_pipeline.warehouse import Warehouse

        contracts = os.environ.get("DECGUARD_CONTRACTS")
        root = os.environ.get(ROOT_ENV) or str(Warehouse().root)
        _DEFINITIONS[(contracts, root)] = _build(factory, contracts, root)


def _definitions(plan: Plan) -> Any:
    if os.getpid() not in _started:  # an executor process: its first op
        from decguard_pipeline.defs.sqlite_commits import cheaper_commits

        _started.add(os.getpid())
        cheaper_commits()  # as the evaluation's own process commits (defs/sqlite_commits.py)
        _end_with_the_evaluation(plan.evaluation_pid)
    key = (plan.contracts, plan.warehouse_root)
    if key not in _DEFINITIONS:
        _DEFINITIONS[key] = _build(plan.factory, plan.contracts, plan.warehouse_root)
    return _DEFINITIONS[key]


def op_name(index: int, item: Item) -> str:
    what = item.runs[0].key.split("@", 1)[0] if len(item.runs) == 1 else "production"
    return re.sub(r"[^A-Za-z0-9_]", "_", f"{item.contract}__{what}_{index}")


def _op(index: int, item: Item, plan: Plan, priority: int) -> dg.OpDefinition:
    tags = {k: v for k, v in item.tags.items() if k == BACKEND_TAG}

    def run_op(context) -> list[Outcome]:  # type: ignore[no-untyped-def]  (Dagster reads it)
        mark = {EVALUATION_TAG: context.run_id}
        return run_item(item, _definitions(plan), context.instance, mark)

    return dg.op(
        name=op_name(index, item),
        ins={f"after_{j}": dg.In(dg.Nothing) for j in sorted(item.after)},
        out=dg.Out(list),
        tags={**tags, PRIORITY_TAG: str(priority)},
        description=", ".join(f"{r.job} {r.key}" for r in item.runs),
    )(run_op)


def run_item(
    item: Item, defs: Any, instance: dg.DagsterInstance, tags: dict[str, str] | None = None
) -> list[Outcome]:
    """An item's runs, in order, in this process."""
    return [
        run_job(
            defs.resolve_job_def(r.job), instance, item.contract, r.key, {**r.tags, **(tags or {})}
        )
        for r in item.runs
    ]


def build_job(plan: Plan) -> dg.JobDefinition:
    """The ``decguard_evaluate`` job of ``plan``: one op per item."""
    items = [Item.from_json(i) for i in plan.items]
    ranks = priorities(items)
    ops = [_op(i, item, plan, ranks[i]) for i, item in enumerate(items)]
    deps = {
        ops[i].name: {f"after_{j}": dg.DependencyDefinition(ops[j].name) for j in item.after}
        for i, item in enumerate(items)
    }
    executor = dg.multiprocess_executor.configured(
        {
            "max_concurrent": plan.workers,
            "tag_concurrency_limits": plan.limits,
            "start_method": {"forkserver": {"preload_modules": PRELOAD}},
        }
    )
    graph = dg.GraphDefinition(name=JOB_NAME, node_defs=ops, dependencies=deps)
    return graph.to_job(
        executor_def=executor,
        description="The runs of one `decguard-pipeline evaluate`: one op per target "
        "(and per contract's production days), each executing its target-job runs.",
    )


def reconstruct(plan: dict[str, Any]) -> dg.JobDefinition:
    """``build_job`` from the plan's JSON (in each process of the multiprocess executor)."""
    return build_job(Plan(**plan))


def run_limits(instance: dg.DagsterInstance) -> list[dict[str, Any]]:
    """The instance's ``run_queue.tag_concurrency_limits`` (none without a run queue)."""
    try:
        queue = instance.get_concurrency_config().run_queue_config
    except Exception:  # an instance without a run queue: no tag limits to apply
        return []
    return list(queue.tag_concurrency_limits or []) if queue is not None else []


def _failed(item: Item, why: str) -> list[Outcome]:
    """Outcomes for an item whose op broke (e.g. its process died): an error, no run."""
    return [Outcome(item.contract, r.key, False, None, errors={"run": why}) for r in item.runs]


def _step_error(result: Any, name: str) -> str:
    for event in result.all_events:
        if event.is_step_failure and event.step_key == name:
            error = event.step_failure_data.error
            return "its op failed" if error is None else f"{error.cls_name}: {error.message}"
    return "its op did not run (an op it waits for failed)"


def run_items(
    items: Sequence[Item],
    instance: dg.DagsterInstance,
    *,
    workers: int,
    defs: Any,
    build: Callable[..., Any] | None,
    contracts: str | None,
    warehouse_root: str,
    tags: dict[str, str],
    log: Callable[[str], None] | None = None,
) -> list[list[Outcome]]:
    """The outcomes of every item, in item order. ``workers`` 1: one item after the other in
    this process (each after the items it waits for, the longest chains first), each target a
    run of its own as always; more: the ops of one run of ``decguard_evaluate`` on Dagster's
    multiprocess executor. ``defs``: the caller's definitions; ``build`` (a module-level
    function, ``definitions.build_definitions``) builds them in the executor's processes."""
    if not items:
        return []
    if workers <= 1:
        done: dict[int, list[Outcome]] = {}
        for i in in_order(items):
            done[i] = run_item(items[i], defs, instance)
        return [done[i] for i in range(len(items))]
    if workers > 1 and build is None:
        raise ValueError("workers > 1 needs build (the definitions factory of each process)")
    plan = Plan(
        items=[i.to_json() for i in items],
        workers=workers,
        contracts=contracts,
        warehouse_root=warehouse_root,
        limits=run_limits(instance),
        factory="" if build is None else factory_name(build),
        evaluation_pid=os.getpid(),
    )
    _DEFINITIONS[(contracts, warehouse_root)] = defs  # this process's ops use the caller's
    _started.add(os.getpid())
    os.environ[FACTORY_ENV] = plan.factory  # for the fork server the executor starts
    os.environ[ROOT_ENV] = warehouse_root
    names = [op_name(i, item) for i, item in enumerate(items)]
    job = dg.build_reconstructable_job(__name__, "reconstruct", (plan.__dict__,))
    with dg.execute_job(
        job, instance=instance, run_config=QUIET, tags=tags, raise_on_error=False
    ) as result:
        return _outcomes(result, items, names)


def _outcomes(result: Any, items: Sequence[Item], names: list[str]) -> list[list[Outcome]]:
    succeeded = {e.step_key for e in result.all_events if e.is_step_success}
    return [
        result.output_for_node(name)
        if name in succeeded
        else _failed(item, _step_error(result, name))
        for item, name in zip(items, names, strict=True)
    ]


def in_order(items: Sequence[Item]) -> list[int]:
    """The items one after the other: by ``priorities``, each after the items it waits for."""
    ranks = priorities(items)
    pending = sorted(range(len(items)), key=lambda i: -ranks[i])
    order: list[int] = []
    while pending:
        ready = next(i for i in pending if items[i].after <= set(order))
        pending.remove(ready)
        order.append(ready)
    return order


def priorities(items: Sequence[Item]) -> list[int]:
    """Each item's ``dagster/priority`` (higher first): the longest chains of runs that cannot
    overlap first. A chain: an item and the items waiting for it (a contract's other targets
    and production days wait for its default target), or the items on one model server (one
    run at a time). Ties keep the given order."""
    waiting: dict[int, list[int]] = {i: [] for i in range(len(items))}
    for i, item in enumerate(items):
        for j in item.after:
            waiting[j].append(i)
    chain: dict[int, int] = {}

    def chain_of(i: int) -> int:
        if i not in chain:
            chain[i] = len(items[i].runs) + max((chain_of(j) for j in waiting[i]), default=0)
        return chain[i]

    on_server: dict[str, int] = {}
    for item in items:
        server = item.tags.get(BACKEND_TAG)
        if server is not None:
            on_server[server] = on_server.get(server, 0) + len(item.runs)

    def weight(i: int) -> int:
        server = items[i].tags.get(BACKEND_TAG)
        return max(chain_of(i), on_server.get(server, 0) if server is not None else 0)

    order = sorted(range(len(items)), key=lambda i: (-weight(i), i))
    rank = {i: len(items) - position for position, i in enumerate(order)}
    return [rank[i] for i in range(len(items))]
