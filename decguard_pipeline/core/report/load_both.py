"""Two stored reports loaded side by side (``diff``): the first in a forked child, the second
in this process, each on a core of its own.

Loading is most of ``diff`` (decode, verify, recompute: ~0.85 s of CPU per 80 MB report) and
the two loads share nothing. The child sends its verified ``Report`` back pickled (~14 MB for
100,000 cases, ~0.2 s to read back). Anything but a clean answer from the child (its report
does not hold, it died, fork is missing, one CPU) and this process loads the first report
itself: what is raised, and in which order, is exactly what loading them one after the other
raises (the first report's problem before the second's).
"""

from __future__ import annotations

import os
import pickle
import signal
from pathlib import Path

from decguard_pipeline.core.report.golden import Report
from decguard_pipeline.core.report.verify import load_report


def load_both(first: str | Path, second: str | Path) -> tuple[Report, Report]:
    """``(load_report(first), load_report(second))``, the first loaded in a child."""
    if not hasattr(os, "fork") or (os.cpu_count() or 1) < 2:
        return load_report(first), load_report(second)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: answer with the first report, or with nothing
        os.close(read_end)
        _answer(first, write_end)
    os.close(write_end)
    try:
        second_report = load_report(second)
    except Exception:
        if _answer_of(read_end, pid) is None:
            load_report(first)  # raises the first report's problem: it comes first
        raise
    except BaseException:  # interrupted: the child's work is of no use
        os.kill(pid, signal.SIGKILL)
        _answer_of(read_end, pid)
        raise
    first_report = _answer_of(read_end, pid)
    if first_report is None:
        first_report = load_report(first)  # raises its problem here, as loading in order
    return first_report, second_report


def _answer(path: str | Path, write_end: int) -> None:
    code = 1
    try:
        data = pickle.dumps(load_report(path), protocol=pickle.HIGHEST_PROTOCOL)
        with os.fdopen(write_end, "wb") as out:
            out.write(data)
        code = 0
    finally:
        os._exit(code)  # nothing of the parent's (atexit, buffers) runs twice


def _answer_of(read_end: int, pid: int) -> Report | None:
    """The child's report, None when it gave none; the child reaped either way."""
    with os.fdopen(read_end, "rb") as source:
        data = source.read()
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0 or not data:
        return None
    report = pickle.loads(data)
    return report if isinstance(report, Report) else None
