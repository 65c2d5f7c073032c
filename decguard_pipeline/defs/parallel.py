"""The runs of ``evaluate``, in this process or in N worker processes, within the instance's
per-server run limits (defs/limits.py).

Each work item is a chain of runs executed in order by one worker (a target: one run; a
contract's production days: one run per day, oldest first) and may wait for other items (the
production days wait for their contract's targets). An item starts when a worker is free and
Dagster's tag-limit counter, fed with the runs in progress (this evaluation's and, from the
instance, any other process's: the daemon's, another ``evaluate``'s), says its server has
room. A run of another process blocks an item for at most ``MAX_WAIT_S``: a run left STARTED
by a process that died on another host must not wedge every later evaluation.

The workers (defs/workers.py) are forked from the evaluation before it opens anything, or come
from a fork server; ``evaluate`` opens their pool early and passes it in."""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from dataclasses import dataclass, field
from typing import Any

import dagster as dg

from decguard_pipeline.defs import fork_server
from decguard_pipeline.defs.job_runs import Outcome
from decguard_pipeline.defs.limits import BACKEND_TAG, Tagged, limit_counter
from decguard_pipeline.defs.workers import open_pool, run_item

# Tag of every run of one `evaluate` invocation: its own runs are counted as they are
# submitted, not read back from the instance.
EVALUATION_TAG = "decguard/evaluation"
MAX_WAIT_S = float(os.environ.get("DECGUARD_LIMIT_WAIT_S", "900"))
POLL_S = 0.5
RECENT_RUNS = 100  # the runs read for how long each run took last time (newest first)


@dataclass(frozen=True)
class Run:
    job: str
    key: str  # partition key
    tags: dict[str, str]


@dataclass
class Item:
    """Runs for one worker, in order; ``after``: indexes of items that must finish first."""

    contract: str
    runs: list[Run]
    after: set[int] = field(default_factory=set)

    @property
    def tags(self) -> dict[str, str]:  # what the limits count: the tags of its runs
        merged: dict[str, str] = {}
        for run in self.runs:
            merged.update(run.tags)
        return merged


class InlineExecutor(Executor):
    """Runs each submitted call at once, in this process (``--workers 1``)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:
            future.set_exception(exc)
        return future


# -- the scheduler -----------------------------------------------------------------------------


def _limits(instance: dg.DagsterInstance) -> list[dict[str, Any]]:
    try:
        queue = instance.get_concurrency_config().run_queue_config
    except Exception:  # an instance without a run queue: no tag limits to apply
        return []
    return list(queue.tag_concurrency_limits or []) if queue is not None else []


def _others_in_progress(instance: dg.DagsterInstance, marker: str) -> list[dg.DagsterRun]:
    from dagster._core.storage.dagster_run import ACTIVE_RUN_STATUSES

    runs = instance.get_runs(filters=dg.RunsFilter(statuses=list(ACTIVE_RUN_STATUSES)))
    return [r for r in runs if r.tags.get(EVALUATION_TAG) != marker]


def _marked(run: Run, marker: str) -> Run:
    return Run(run.job, run.key, {**run.tags, EVALUATION_TAG: marker})


def _failed(item: Item, exc: BaseException) -> list[Any]:
    """Outcomes for an item whose worker broke (e.g. the process died): an error, no run."""
    why = f"the worker process failed: {type(exc).__name__}: {exc}"
    return [Outcome(item.contract, r.key, False, None, errors={"run": why}) for r in item.runs]


def run_items(
    items: Sequence[Item],
    instance: dg.DagsterInstance,
    *,
    workers: int,
    defs: Any,
    build: Callable[..., Any] | None = None,
    entries: list[Any],
    warehouse_root: str,
    pool: Executor | None = None,
    log: Callable[[str], None] = lambda text: print(text, file=sys.stderr),
) -> list[list[Any]]:
    """The outcomes of every item, in item order. ``pool``: the workers when ``workers`` > 1
    (``workers.open_pool``, shut down here), else a pool is opened now (from the fork
    server: ``instance`` is open)."""
    marker = uuid.uuid4().hex[:12]
    items = [Item(i.contract, [_marked(r, marker) for r in i.runs], i.after) for i in items]
    limits = _limits(instance)
    if workers <= 1:
        executor: Executor = InlineExecutor()
        call: Callable[[Item], list[Any]] = lambda item: run_item(item, defs, instance)  # noqa: E731
    elif pool is not None:
        executor, call = pool, run_item
    else:
        if build is None:
            raise ValueError("workers > 1 needs build (the definitions factory of each worker)")
        # this process has its instance (connections) open by now: never forked from it
        late = "forkserver" if fork_server.available() else "spawn"
        executor = open_pool(workers, build, entries, warehouse_root, method=late)
        call = run_item
    results: dict[int, list[Any]] = {}
    try:
        _schedule(items, instance, workers, limits, marker, executor, call, results, log)
    finally:
        if workers > 1:
            fork_server.stop()
    return [results[i] for i in range(len(items))]


def _schedule(
    items: list[Item],
    instance: dg.DagsterInstance,
    workers: int,
    limits: list[dict[str, Any]],
    marker: str,
    executor: Executor,
    call: Callable[[Item], list[Any]],
    results: dict[int, list[Any]],
    log: Callable[[str], None],
) -> None:
    """Every item submitted to ``executor`` once what it waits for is done and the limits
    allow; its outcomes (or its worker's failure) in ``results``."""
    pending = list(range(len(items)))
    if workers > 1:
        pending = first_the_long_chains(items, last_durations(instance, items))
    running: dict[Future[Any], int] = {}
    waiting_since: dict[int, float] = {}
    with executor:
        while pending or running:
            others = _others_in_progress(instance, marker) if limits else []
            mine = [Tagged(items[i].tags) for i in running.values()]
            counter = limit_counter(limits, [*others, *mine])
            for i in list(pending):
                if len(running) >= max(workers, 1):
                    break
                if not items[i].after <= results.keys():
                    continue
                tagged = Tagged(items[i].tags)
                if counter.is_blocked(tagged) and not _may_start_anyway(
                    i, items[i], limits, others, mine, waiting_since, log
                ):
                    continue
                counter.update_counters_with_launched_item(tagged)
                mine.append(tagged)
                pending.remove(i)
                running[executor.submit(call, items[i])] = i
            if not running:
                time.sleep(POLL_S)
                continue
            done, _ = wait(running, timeout=POLL_S if pending else None,
                           return_when=FIRST_COMPLETED)  # fmt: skip
            for future in done:
                i = running.pop(future)
                error = future.exception()
                results[i] = _failed(items[i], error) if error else future.result()


def first_the_long_chains(
    items: Sequence[Item], took: Mapping[tuple[str, str], float] | None = None
) -> list[int]:
    """The order in which workers take the items (each still waits for its ``after``): the
    longest chains of runs that cannot overlap first, so that they do not end up run one
    after the other while the other workers are idle. A chain: an item and the items
    waiting for it (a contract's other targets and production days wait for its default
    target), or the items on one model server (one run at a time). ``took``: how long each
    (job, partition) ran last time (1 s when unknown). Otherwise in the given order."""
    took = took or {}

    def cost(item: Item) -> float:
        return sum(took.get((r.job, r.key), 1.0) for r in item.runs)

    waiting: dict[int, list[int]] = {i: [] for i in range(len(items))}
    for i, item in enumerate(items):
        for j in item.after:
            waiting[j].append(i)
    chain: dict[int, float] = {}

    def chain_of(i: int) -> float:
        if i not in chain:
            chain[i] = cost(items[i]) + max((chain_of(j) for j in waiting[i]), default=0.0)
        return chain[i]

    on_server: dict[str, float] = {}
    for item in items:
        server = item.tags.get(BACKEND_TAG)
        if server is not None:
            on_server[server] = on_server.get(server, 0.0) + cost(item)

    def weight(i: int) -> float:
        server = items[i].tags.get(BACKEND_TAG)
        return max(chain_of(i), on_server.get(server, 0.0) if server is not None else 0.0)

    return sorted(range(len(items)), key=lambda i: (-weight(i), i))


def last_durations(
    instance: dg.DagsterInstance, items: Sequence[Item]
) -> dict[tuple[str, str], float]:
    """How long each of these runs took the last time it ran (one query; none on error)."""
    jobs = {r.job for item in items for r in item.runs}
    try:
        records = instance.get_run_records(
            filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.SUCCESS]),
            limit=RECENT_RUNS,
        )
    except Exception:  # the order is a guess: never a reason to fail
        return {}
    took: dict[tuple[str, str], float] = {}
    for record in records:  # newest first
        run = record.dagster_run
        key = (run.job_name, run.tags.get("dagster/partition", ""))
        if run.job_name in jobs and key not in took and record.start_time and record.end_time:
            took[key] = record.end_time - record.start_time
    return took


def _may_start_anyway(
    index: int,
    item: Item,
    limits: list[dict[str, Any]],
    others: list[dg.DagsterRun],
    mine: list[Tagged],
    since: dict[int, float],
    log: Callable[[str], None],
) -> bool:
    """Whether a blocked item may start anyway: only when what blocks it is other processes'
    runs, and it has waited ``MAX_WAIT_S`` for them (said once when it starts waiting)."""
    if limit_counter(limits, mine).is_blocked(Tagged(item.tags)):
        return False  # blocked by this evaluation's own runs, which always finish
    server = item.tags.get(BACKEND_TAG)
    if index not in since:
        since[index] = time.monotonic()
        ids = ", ".join(r.run_id for r in others if r.tags.get(BACKEND_TAG) == server)
        log(f"{item.contract}: waiting for run(s) of another process on {server}: {ids}")
    if time.monotonic() - since[index] < MAX_WAIT_S:
        return False
    log(f"{item.contract}: started after waiting {MAX_WAIT_S:.0f} s although other runs on "
        f"{server} are still in progress (run_queue.tag_concurrency_limits)")  # fmt: skip
    return True
