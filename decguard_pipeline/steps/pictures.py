"""The guard's PNG pictures drawn by a process of their own while ``evaluate`` runs.

Matplotlib costs a process ~0.5 s of imports before its first picture (more under load),
and ``evaluate`` leaves the second core mostly idle: :func:`picture_worker` starts a child
(``python -m decguard_pipeline.steps.pictures``) when a contract to evaluate has a guard; it
imports matplotlib there while this process imports Dagster and runs the first targets.
:func:`draw` then has it draw each suite's pictures with ``core.report.plots.images`` (the
same function: the same bytes) and hands them back. Outside the block, and whenever the
child fails (an error while drawing, a child killed), they are drawn here as before, so the
same pictures or the same error come out either way.

Jobs and answers are pickled frames on the child's stdin and stdout; at the end of its stdin
(this process closed the pipe, or died, kill -9 included) the child exits.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

from decguard_pipeline.core.processes import end_child
from decguard_pipeline.core.report import plots

HEADER = 8  # bytes of a frame's length


def _write(stream: IO[bytes], value: Any) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(len(data).to_bytes(HEADER, "big") + data)
    stream.flush()


def _read(stream: IO[bytes]) -> Any:
    """The next frame's value; None at the end of the stream or on a cut-short frame."""
    header = stream.read(HEADER)
    if len(header) < HEADER:
        return None
    size = int.from_bytes(header, "big")
    data = stream.read(size)
    return pickle.loads(data) if len(data) == size else None


class _Child:
    def __init__(self) -> None:
        command = [sys.executable, "-m", "decguard_pipeline.steps.pictures"]
        # its own session: a Ctrl-C in the terminal reaches the command, which stops it
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True
        )
        self.lock = threading.Lock()

    def draw(self, job: tuple[Any, ...]) -> dict[str, bytes] | None:
        assert self.process.stdin is not None and self.process.stdout is not None
        with self.lock:
            try:
                _write(self.process.stdin, job)
                answer = _read(self.process.stdout)
            except OSError:  # the child is gone
                return None
        return answer if isinstance(answer, dict) else None

    def close(self) -> None:
        assert self.process.stdout is not None
        end_child(self.process)  # end of its jobs: it exits
        self.process.stdout.close()


_child: _Child | None = None


@contextmanager
def picture_worker(needed: bool) -> Iterator[None]:
    """Guard pictures drawn by a child process while the block runs, when ``needed``."""
    global _child
    if not needed or _child is not None:
        yield
        return
    child = _Child()
    _child = child
    try:
        yield
    finally:
        _child = None
        child.close()


def draw(block: dict[str, Any], *, title: str, smooth: dict[str, Any] | None) -> dict[str, bytes]:
    """A suite's pictures by kind (``core.report.plots.images``), from the child if any."""
    drawn = None if _child is None else _child.draw((block, title, smooth))
    if drawn is not None:
        return drawn
    return plots.images(block, title=title, smooth=smooth)


def serve() -> None:
    """The child: import matplotlib at once, then draw each job until stdin ends. A job that
    fails is answered with None (the parent draws it itself and gets the error)."""
    jobs, answers = sys.stdin.buffer, os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything printed goes to stderr, not into the answers
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: F401
    from matplotlib.figure import Figure  # noqa: F401

    while (job := _read(jobs)) is not None:
        block, title, smooth = job
        try:
            answer: Any = plots.images(block, title=title, smooth=smooth)
        except Exception:  # the parent draws it again and raises
            answer = None
        try:
            _write(answers, answer)
        except OSError:  # the parent is gone
            return


if __name__ == "__main__":
    serve()
