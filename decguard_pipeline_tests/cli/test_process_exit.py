"""cli/process_exit.py: the CLI's process leaves what it built to the operating system at
its exit, in real processes."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


def test_skip_at_exit_freezes_everything_after_the_later_exit_handlers():
    """A process that called skip_at_exit: its exit handlers registered later run first, on a
    collector as it was; the ones registered earlier run after everything was frozen."""
    script = textwrap.dedent(
        """
        import atexit, gc
        atexit.register(lambda: print("earlier", gc.get_freeze_count() > 0))
        from decguard_pipeline.cli.process_exit import skip_at_exit
        skip_at_exit()
        atexit.register(lambda: print("later", gc.get_freeze_count() > 0))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n") == ["later False", "earlier True", ""]


LEFT_TO_EXIT = """
import sys, weakref
from decguard_pipeline.cli import process_exit as collector

class Report:  # stands for a command's report
    def __del__(self):
        print("freed", flush=True)

if sys.argv[1] == "main":
    collector.skip_at_exit()  # what the CLI's main does
report = Report()
if sys.argv[2] == "core":  # handed off by core code, which knows no entry point
    from decguard_pipeline.core.collector import hand_off
    hand_off(report)
else:
    collector.leave_to_exit(report)
alive = weakref.ref(report)
del report
print("alive" if alive() is not None else "gone", flush=True)
"""


@pytest.mark.parametrize("by", ["cli", "core"])
@pytest.mark.parametrize(
    ("role", "expected"),
    [
        ("main", ["alive", ""]),  # never freed object by object: the OS takes it back
        ("library", ["freed", "gone", ""]),  # in-process callers: nothing changes
    ],
)
def test_leave_to_exit_hands_objects_to_the_process_end_only_in_a_main(role, expected, by):
    done = subprocess.run(
        [sys.executable, "-c", LEFT_TO_EXIT, role, by], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n") == expected
