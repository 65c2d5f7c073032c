"""The ``report`` command run as a process of its own (a fork needs a process without the
test worker's threads), telling on standard error how it loaded the report: ``split`` when
it forked a child, ``structs`` or ``verifier`` for who verified it, and whether pydantic was
imported by the end."""

from __future__ import annotations

import os
import subprocess
import sys

# NumPy is imported before the command's main sets this: without it OpenBLAS starts its
# threads, and a process with threads does not fork
ONE_THREAD = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}

_SCRIPT = """
import os, sys
from decguard_pipeline.core.report import halves, struct_verify
halves.MIN_BYTES = {min_bytes}
start = halves.OtherHalf.__init__
def starting(self, *args):
    start(self, *args)
    sys.stderr.write("split\\n")
halves.OtherHalf.__init__ = starting
load_typed = struct_verify.load_typed
def loading(*args):
    report = load_typed(*args)
    sys.stderr.write("structs\\n" if report is not None else "verifier\\n")
    return report
struct_verify.load_typed = loading
parent, leave = os.getpid(), os._exit
def leaving(code):
    if os.getpid() == parent:  # not the child's own exit
        sys.stderr.write(f"pydantic imported: {{'pydantic' in sys.modules}}\\n")
        sys.stderr.flush()
    leave(code)
os._exit = leaving
sys.argv = ["decguard-pipeline", *sys.argv[1:]]
from decguard_pipeline.cli.app import main
main()
"""


def run_report(*args: str, split: bool) -> subprocess.CompletedProcess[str]:
    """``decguard-pipeline report *args`` in a process of its own, the report split whatever
    its size (``split``) or never."""
    script = _SCRIPT.format(min_bytes=0 if split else 1 << 40)
    return subprocess.run(
        [sys.executable, "-c", script, "report", *args],
        capture_output=True,
        text=True,
        check=False,
        env=ONE_THREAD,
    )
