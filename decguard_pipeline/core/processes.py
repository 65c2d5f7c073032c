"""Is a process still there? One answer for the places that ask: a run's owner
(defs/instance.py), the writer of a stale temporary file (core/atomic_file.py) and a spool's
writer (warehouse/spool.py). And one way to end a child that lives as long as its stdin.

A zombie (killed, not yet reaped by its parent) counts as gone: it will never write again.
On Linux the start time of ``/proc/<pid>/stat`` tells a reused pid from the original."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the module is imported by every report write: no subprocess for it
    import subprocess


def stat_fields(pid: int) -> list[str] | None:
    """Fields 3.. of ``/proc/<pid>/stat`` (those after the command name, which may hold
    spaces and parentheses); None where unreadable (no such process, not Linux)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22), as written there."""
    fields = stat_fields(pid)
    return fields[19] if fields is not None and len(fields) > 19 else None


def running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie. A process of another user counts
    as running, and so does any process where signal 0 cannot be sent safely (on Windows
    ``os.kill(pid, 0)`` would send CTRL_C_EVENT): what cannot be told is never called gone."""
    if os.name != "posix":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, under another user
    fields = stat_fields(pid)
    return fields is None or fields[0] not in ("Z", "X")  # elsewhere than Linux: trust kill


def end_child(child: subprocess.Popen[bytes], *, wait_s: float = 5.0) -> None:
    """End a child that exits at the end of its stdin (the demo server, the picture drawer):
    close the pipe, give it ``wait_s`` to go, then kill it; reaped either way."""
    if child.stdin is not None:
        with contextlib.suppress(OSError):  # it may be gone already (a broken pipe)
            child.stdin.close()
    import subprocess

    try:
        child.wait(wait_s)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
