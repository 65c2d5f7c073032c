"""The worker processes of ``evaluate --workers N`` (defs/parallel.py hands them their items).

Where a worker comes from (``fork_server.start_method``):

* **Linux: forked from the evaluation itself, early.** :func:`open_pool` runs right after
  ``evaluate`` found its contracts and started the demo server's process: it imports what
  runs need (``fork_server.WORKER_MODULES``, and matplotlib when a contract has a guard) and
  forks the workers at once, *before* the evaluation opens its instance or any other
  connection, while it has no thread but its main one. A forked worker shares no SQLite or
  PostgreSQL connection and no lock held by another thread. Each worker then pays a fork
  and its definitions (~30 ms). The imports are paid once: the fork server was a second
  interpreter importing the same modules (~1.3 s of CPU) beside the evaluation's own, and
  forked the first worker only when it was done. Should a thread be running by then (a
  library that starts one on import), the workers come from the fork server instead; so do
  those of a pool opened once the instance is open (``parallel.run_items`` without one).
* **Other POSIX systems: from the fork server** (defs/fork_server.py), which ``evaluate``
  starts first thing so its imports run beside its own. Workers take the evaluation's
  environment and working directory, not the fork server's.
* **Elsewhere: spawned**, each importing everything itself.

A worker opens the instance (``$DAGSTER_HOME``) as the evaluation does (whichever comes first
creates a new one, under a lock) and dies with the evaluation (kill -9 included): it watches
the evaluation's pid."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from decguard_pipeline.core import collector, processes
from decguard_pipeline.defs import fork_server

# what a guarded evaluation's workers draw with (the guard's pictures, steps/pictures.py)
PICTURE_MODULES = ["matplotlib.figure", "matplotlib.backends.backend_agg"]

_WORKER: dict[str, Any] = {}


def _die_with(parent: int) -> None:
    """End this worker when the evaluation that started it is gone (kill -9 included). The
    worker's own parent is the evaluation, or the fork server."""
    started_by = os.getppid()
    while True:
        if os.getppid() != started_by or not processes.running(parent):
            os._exit(1)
        time.sleep(0.5)


def _start_worker(
    parent: int,
    build: Callable[..., Any],
    entries: list[Any],
    warehouse_root: str,
    environ: dict[str, str],
    cwd: str,
) -> None:
    import warnings

    import dagster as dg

    from decguard_pipeline.defs.instance import open_for_runs

    os.environ.clear()  # the evaluation's environment, not the fork server's
    os.environ.update(environ)
    os.chdir(cwd)
    warnings.filterwarnings("ignore", category=dg.PreviewWarning)
    warnings.filterwarnings("ignore", category=dg.BetaWarning)
    # what the worker was forked with lives as long as it does: out of its collections (and
    # its pages stay shared); a worker forked from the evaluation had its collector paused
    collector.hold_for_life()
    threading.Thread(target=_die_with, args=(parent,), daemon=True).start()
    try:
        _WORKER["defs"] = build(entries, warehouse_root=warehouse_root)
        # as the evaluation opens it (the first to open a new instance creates it, under a
        # lock); tuned and capturing to files for the worker's life
        _WORKER["instance"], _ = open_for_runs()  # tuned until the worker ends
    except Exception as exc:  # each item this worker takes fails with it; an initializer
        _WORKER["broken"] = exc  # that raised would print a traceback and break the pool


def run_item(item: Any, defs: Any = None, instance: Any = None) -> list[Any]:
    """The outcomes of an item's runs (``parallel.Item``; in a worker: its definitions and
    instance)."""
    from decguard_pipeline.defs.job_runs import run_job

    if defs is None and "broken" in _WORKER:
        raise _WORKER["broken"]  # the scheduler reports it as the item's error
    defs = defs if defs is not None else _WORKER["defs"]
    instance = instance if instance is not None else _WORKER["instance"]
    return [
        run_job(defs.resolve_job_def(r.job), instance, item.contract, r.key, r.tags)
        for r in item.runs
    ]


def _import(modules: Iterable[str]) -> None:
    for name in modules:  # as the fork server does: one that fails, a worker imports if needed
        with contextlib.suppress(ImportError):
            __import__(name)


def open_pool(
    workers: int,
    build: Callable[..., Any],
    entries: list[Any],
    warehouse_root: str,
    *,
    pictures: bool = False,
    method: str | None = None,
) -> ProcessPoolExecutor:
    """``workers`` worker processes, each with the definitions ``build`` makes. Forked at
    once when they are forked from this process (``method`` ``fork``; see the module), so
    call it before opening the instance; ``pictures``: the guard's modules too.
    ``$DAGSTER_HOME`` must be set already (``instance.ensure_dagster_home``)."""
    method = method or fork_server.start_method()
    if method == "fork":
        _import([*fork_server.WORKER_MODULES, *(PICTURE_MODULES if pictures else [])])
        if threading.active_count() > 1:  # after the imports: one of them may start a thread
            method = "forkserver" if fork_server.available() else "spawn"
    if method == "forkserver":
        fork_server.start_early(workers, method=method)  # if it was not already
    pool = ProcessPoolExecutor(
        workers,
        mp_context=multiprocessing.get_context(method),
        initializer=_start_worker,
        initargs=(os.getpid(), build, entries, warehouse_root, dict(os.environ), os.getcwd()),
    )
    if method == "fork":
        # the first submission forks every worker, before anything else is opened here
        pool.submit(os.getpid)
    return pool
