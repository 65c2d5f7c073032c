"""cli/process_exit.py: the CLI's process leaves what it built to the operating system at
its exit, in real processes."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from click.testing import CliRunner

from decguard_pipeline.cli.app import cli
from decguard_pipeline_tests.conftest import EXAMPLES

REFUND = EXAMPLES / "refund" / "decguard.yaml"


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


ENDED = """
import atexit, sys
from decguard_pipeline.cli import process_exit
atexit.register(lambda: sys.stderr.write(", finalised"))
if sys.argv[1] == "asked":
    process_exit.end_at_once()
if sys.argv[2] == "closed":
    sys.stdout.close()  # a flush that cannot happen: the interpreter's exit reports it
sys.stderr.write("unflushed on stderr")
if not sys.stdout.closed:
    print("unflushed", end="")
process_exit.ended(3)
sys.stderr.write(", carried on")
sys.exit(4)
"""


@pytest.mark.parametrize(
    ("asked", "stdout", "expected"),
    [
        ("asked", "open", ("unflushed", "", 3)),  # flushed, then gone: no exit handler ran
        ("not-asked", "open", ("unflushed", ", carried on, finalised", 4)),
        ("asked", "closed", ("", ", carried on, finalised", 4)),  # the interpreter's to end
    ],
)
def test_ended_leaves_at_once_only_when_the_command_asked(asked, stdout, expected):
    done = subprocess.run(
        [sys.executable, "-c", ENDED, asked, stdout], capture_output=True, text=True
    )
    stdout, carried_on, code = expected
    assert (done.stdout, done.stderr, done.returncode) == (
        stdout,
        "unflushed on stderr" + carried_on,
        code,
    )


def test_the_report_command_ends_at_once(tmp_path):
    """``report`` asks to end at once, and still prints all of its text (as the command
    invoked in-process prints it) and exits with the report's status."""
    report = tmp_path / "r.json"
    made = CliRunner().invoke(cli, ["test", str(REFUND), "-o", str(report)])
    assert made.exit_code == 0, made.output
    script = textwrap.dedent(
        f"""
        import atexit, sys
        atexit.register(lambda: print("finalised", file=sys.stderr, flush=True))
        sys.argv = ["decguard-pipeline", "report", {str(report)!r}]
        from decguard_pipeline.cli.app import main
        main()
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    expected = CliRunner().invoke(cli, ["report", str(report)])
    assert "finalised" not in done.stderr
    assert (done.stdout, done.returncode) == (expected.stdout, expected.exit_code)
    assert done.stdout.endswith("PASS: all gates hold\n")
