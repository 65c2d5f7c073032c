"""A crash point in a child process: frozen right before or right after it commits a
transaction holding rows of a given warehouse table, so the test kills it (kill -9) at
exactly that moment, not somewhere near it.

``stopping_after(table, folder)`` (or ``stopping_before``) gives the environment for the
child: a ``sitecustomize`` module (written into ``folder``, put first on ``PYTHONPATH``) that
wraps the child's ``Transaction.commit``; at the commit holding rows of ``table`` it writes
the tables of that commit to ``<folder>/stopped`` and stops itself (SIGSTOP: no thread of it
runs any further). ``wait_stopped`` waits for that."""

from __future__ import annotations

import os
import subprocess
import textwrap
import time
from pathlib import Path

SITECUSTOMIZE = textwrap.dedent(
    """\
    import os

    if os.environ.get("DECGUARD_TEST_STOP_AFTER"):
        import signal

        from decguard_pipeline.warehouse import transaction

        _when, _table, _marker = os.environ["DECGUARD_TEST_STOP_AFTER"].split(":", 2)
        _commit = transaction.Transaction.commit

        def _stop(tables):
            with open(_marker + ".part", "w") as out:
                out.write(" ".join(tables))
            os.replace(_marker + ".part", _marker)
            os.kill(os.getpid(), signal.SIGSTOP)

        def _stopping_commit(self):
            tables = sorted(self.staged)
            if _table in tables and _when == "before":
                _stop(tables)
            _commit(self)
            if _table in tables and _when == "after":
                _stop(tables)

        transaction.Transaction.commit = _stopping_commit
    """
)


def stopping_after(table: str, folder: Path, when: str = "after") -> dict[str, str]:
    """Environment variables for a child that stops right after (``when="before"``: right
    before) its first commit of rows of ``table``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE)
    path = os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH")) if p)
    marker = folder / "stopped"
    return {"PYTHONPATH": path, "DECGUARD_TEST_STOP_AFTER": f"{when}:{table}:{marker}"}


def stopping_before(table: str, folder: Path) -> dict[str, str]:
    """Environment variables for a child that stops right before its first commit of rows
    of ``table`` (everything staged, nothing committed)."""
    return stopping_after(table, folder, when="before")


def wait_stopped(process: subprocess.Popen[str], folder: Path, timeout: float = 180) -> list[str]:
    """The tables of the commit after which the child stopped itself; fails if it ended
    first."""
    marker = folder / "stopped"
    deadline = time.monotonic() + timeout
    while not (marker.exists() and _state(process.pid) in ("T", None)):
        if process.poll() is not None:
            raise AssertionError(f"the child ended ({process.returncode}) before the crash point")
        if time.monotonic() > deadline:
            raise AssertionError("the child never reached the crash point")
        time.sleep(0.05)
    return marker.read_text().split()


def _state(pid: int) -> str | None:
    """A process's state letter (``T``: stopped), None where /proc does not say."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]
