"""The fork server ``evaluate``'s workers are forked from where they are not forked from the
evaluation itself (defs/workers.py: POSIX systems other than Linux, or a thread running): a
fresh interpreter, with no connection and no thread, that imports Dagster and the pipeline
once (``WORKER_MODULES``). Started as early as ``evaluate`` knows it will need workers, so
that its imports run beside the evaluation's own; stopped at the end of the evaluation's runs.

This module imports nothing heavy: ``evaluate`` starts the server before importing Dagster."""

from __future__ import annotations

import multiprocessing
import sys

# What the workers import before or during their runs, imported once: by the fork server, or
# by `evaluate` itself before it forks them (defs/workers.py). A module missing here is
# imported by each worker that needs it; one that fails to import is skipped. Listed from a
# profile of `evaluate --workers 2`.
WORKER_MODULES = [
    "decguard_pipeline.definitions",
    "decguard_pipeline.defs.parallel",
    "decguard_pipeline.steps.golden",
    "decguard_pipeline.steps.properties",
    "decguard_pipeline.warehouse",
    "decguard_pipeline.backends.openai",
    "decguard_pipeline.core.report.verify",
    # the instance each worker opens: its storages and their migrations
    "dagster._core.storage.legacy_storage",
    "dagster._core.storage.event_log.sqlite.consolidated_sqlite_event_log",
    "dagster._core.storage.runs.sqlite.sqlite_run_storage",
    "dagster._core.storage.schedules.sqlite.sqlite_schedule_storage",
    "dagster._core.storage.local_compute_log_manager",
    "dagster._core.instance.factory",
    "alembic.command",
    # pyarrow converts Python values through pandas, and reads a manifest through its
    # datasets (~0.25 s of import at the first read); the HTTP backends
    "pandas",
    "pyarrow.dataset",
    "httpx",
    "aiohttp",
    "upath",
]
# the fork server imports this last: what the modules above built leaves its collector
FROZEN = "decguard_pipeline.defs.fork_preloaded"


def available() -> bool:
    """Whether this platform has a fork server (POSIX); elsewhere workers are spawned."""
    return "forkserver" in multiprocessing.get_all_start_methods()


def start_method() -> str:
    """How ``evaluate``'s workers start: ``fork`` (from the evaluation, defs/workers.py) on
    Linux, from this fork server on other POSIX systems (where a forked process may not use
    some system libraries), else ``spawn``."""
    if sys.platform == "linux":
        return "fork"
    return "forkserver" if available() else "spawn"


def start_early(workers: int, *, method: str | None = None) -> None:
    """Start the fork server now when ``workers`` > 1 and they come from it (``method``,
    default ``start_method()``; a no-op when it runs already): it imports ``WORKER_MODULES``
    while this process goes on, and the first worker is forked from it without waiting for
    them."""
    if workers > 1 and (method or start_method()) == "forkserver" and available():
        from multiprocessing import forkserver

        forkserver.set_forkserver_preload([*WORKER_MODULES, FROZEN])
        forkserver.ensure_running()


def stop() -> None:
    """Stop the fork server (once its workers are gone). Its imports are of the moment it
    started (its environment, the code on disk then): the next evaluation in this process
    starts a new one."""
    if available():
        from multiprocessing import forkserver

        forkserver._forkserver._stop()  # the module has no public way to stop it
