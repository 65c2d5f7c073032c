"""Two stored reports loaded side by side (``diff``): the first in a forked child, the second
in this process, each on a core of its own.

Loading is most of ``diff`` (decode, verify, recompute: ~0.85 s of CPU per 80 MB report) and
the two loads share nothing. The child sends its verified ``Report`` back (``transfer``:
~13 MB for 100,000 cases, 0.035 s to write, ~0.06 s to read back). Anything but a clean
answer from the child (its report does not hold, it died, fork is missing, one CPU) and this
process loads the first report itself: what is raised, and in which order, is exactly what
loading them one after the other raises (the first report's problem before the second's).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from decguard_pipeline.core.collector import gc_paused
from decguard_pipeline.core.report import transfer
from decguard_pipeline.core.report.golden import Report
from decguard_pipeline.core.report.verify import load_report


class ChildLoad:
    """``load_report(path)`` under way in a forked child from the moment this is made (a
    command starts it before importing what it needs besides); where forking does not pay
    (no ``fork``, one CPU), nothing is started and :meth:`result` loads it here."""

    def __init__(self, path: str | Path) -> None:
        self.path = path
        self._pid = self._read_end = -1
        if not hasattr(os, "fork") or (os.cpu_count() or 1) < 2:
            return
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: answer with the report, or with nothing
            os.close(read_end)
            _answer(path, write_end)
        os.close(write_end)
        self._pid, self._read_end = pid, read_end

    def result(self) -> Report:
        """The report: the child's, else loaded here (raising its problem here, as
        ``load_report`` does)."""
        report = None
        if self._pid > 0:
            report = _answer_of(self._read_end, self._pid)
            self._pid = -1
        return report if report is not None else load_report(self.path)

    def abandon(self) -> None:
        """Stop the child, whose answer is of no use now."""
        if self._pid > 0:
            os.kill(self._pid, signal.SIGKILL)
            _answer_of(self._read_end, self._pid)
            self._pid = -1


def load_both(
    first: str | Path, second: str | Path, *, first_load: ChildLoad | None = None
) -> tuple[Report, Report]:
    """``(load_report(first), load_report(second))``, the first loaded in a child
    (``first_load``, when the caller started it already)."""
    pending = first_load or ChildLoad(first)
    try:
        second_report = load_report(second)
    except Exception:
        pending.result()  # raises the first report's problem, if any: it comes first
        raise
    except BaseException:  # interrupted: the child's work is of no use
        pending.abandon()
        raise
    return pending.result(), second_report


def _answer(path: str | Path, write_end: int) -> None:
    code = 1
    try:
        data = transfer.dumps(load_report(path))
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
    with gc_paused(settle=True):  # 100k+ acyclic objects, kept: as load_report builds them
        try:
            return transfer.loads(data)
        except Exception:  # not a report after all: loaded here instead
            return None
