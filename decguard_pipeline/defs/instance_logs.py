"""Step logs captured without the terminal echo, in the processes our commands execute runs in.

Dagster's local compute-log manager captures each step's stdout and stderr into files (the
step logs the UI shows) and, while it does, echoes them to the process's own terminal: per
stream a ``tail -F`` of the file and a Python interpreter (``watch_orphans.py``) that kills
the tail if the process dies. Four processes per run, started and terminated around every
run: ~0.1 s of CPU a run on a 2-core machine, a fifth of a small target run's time.

``evaluate`` and the other commands that execute runs in-process print their own summary
and keep Dagster's console logger quiet (defs/job_runs.py), so the echo shows nothing there.
:func:`capture_to_files` has such a process's instance capture the same files, complete
marker included, and skip the echo. Runs the UI or the daemon launch keep Dagster's own
manager; other compute-log managers (a custom class in dagster.yaml) are left alone."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import dagster as dg
from dagster._core.execution.compute_logs import redirect_to_file
from dagster._core.storage.compute_log_manager import CapturedLogContext, ComputeIOType
from dagster._core.storage.local_compute_log_manager import (
    IO_TYPE_EXTENSION,
    LocalComputeLogManager,
)
from dagster._utils import ensure_file, touch_file


def _capture(manager: LocalComputeLogManager) -> Callable[[Sequence[str]], Any]:
    @contextlib.contextmanager
    def capture_logs(log_key: Sequence[str]) -> Iterator[CapturedLogContext]:
        out = manager.get_captured_local_path(log_key, IO_TYPE_EXTENSION[ComputeIOType.STDOUT])
        err = manager.get_captured_local_path(log_key, IO_TYPE_EXTENSION[ComputeIOType.STDERR])
        ensure_file(out)
        ensure_file(err)
        with redirect_to_file(sys.stdout, out), redirect_to_file(sys.stderr, err):
            yield CapturedLogContext(log_key)
        # as Dagster's manager does: the marker that tells the UI the capture is complete
        touch_file(manager.complete_artifact_path(log_key))

    return capture_logs


def capture_to_files(instance: dg.DagsterInstance) -> Callable[[], None]:
    """Step logs of the runs this process executes on ``instance`` go to their files, not
    also to this terminal; the callable returned gives the manager its own capture back."""
    manager = instance.compute_log_manager
    if type(manager) is not LocalComputeLogManager:
        return lambda: None
    manager.capture_logs = _capture(manager)  # type: ignore[method-assign]
    return lambda: manager.__dict__.pop("capture_logs", None)
