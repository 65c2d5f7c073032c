"""core/collector.py: what is settled or held leaves the collector's young generations without
being walked, and everything held is given back at the end."""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap

import pytest

from decguard_pipeline.core import collector


class Node:  # a tracked object the collector walks
    pass


def _in_generation(obj: object, generation: int) -> bool:
    return any(o is obj for o in gc.get_objects(generation=generation))


@pytest.fixture(autouse=True)
def _nothing_frozen():
    assert gc.get_freeze_count() == 0
    yield
    collector._holding = False
    gc.unfreeze()
    gc.enable()


def test_settle_moves_young_objects_to_the_oldest_generation():
    gc.disable()
    node = Node()
    assert _in_generation(node, 0)
    collector.settle()
    assert not _in_generation(node, 0) and _in_generation(node, 2)
    assert gc.get_freeze_count() == 0


def test_held_freezes_what_exists_and_what_is_settled_then_gives_everything_back():
    before = Node()
    with collector.held() as start:
        assert not gc.isenabled()  # paused for the start of the command
        start()
        assert gc.isenabled()
        frozen = gc.get_freeze_count()
        assert frozen > 0 and not any(_in_generation(before, g) for g in range(3))
        gc.disable()
        during = Node()
        collector.settle()  # joins the frozen set, never walked while held
        assert gc.get_freeze_count() > frozen
        assert not any(_in_generation(during, g) for g in range(3))
        gc.enable()
    assert gc.get_freeze_count() == 0 and gc.isenabled()
    assert _in_generation(before, 2) and _in_generation(during, 2)


def test_held_for_life_stays_frozen_and_settle_joins_it():
    """A worker that froze what it was forked with: settle freezes the young objects too, and
    a held() command inside it neither freezes for itself nor gives anything back."""
    gc.disable()
    collector.hold_for_life()
    assert gc.isenabled()
    theirs = gc.get_freeze_count()
    gc.disable()
    young = Node()
    collector.settle()
    assert gc.get_freeze_count() > theirs and not any(_in_generation(young, g) for g in range(3))
    with collector.held() as start:
        start()
    assert gc.get_freeze_count() > theirs and not any(_in_generation(young, g) for g in range(3))


def test_a_paused_collector_stays_paused():
    gc.disable()
    with collector.held() as start:
        start()
        assert not gc.isenabled()
    assert not gc.isenabled() and gc.get_freeze_count() == 0


def test_skip_at_exit_freezes_everything_after_the_later_exit_handlers():
    """A process that called skip_at_exit: its exit handlers registered later run first, on a
    collector as it was; the ones registered earlier run after everything was frozen."""
    script = textwrap.dedent(
        """
        import atexit, gc
        atexit.register(lambda: print("earlier", gc.get_freeze_count() > 0))
        from decguard_pipeline.core.collector import skip_at_exit
        skip_at_exit()
        atexit.register(lambda: print("later", gc.get_freeze_count() > 0))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n") == ["later False", "earlier True", ""]


def test_gc_paused_pauses_then_settles_what_was_built():
    with collector.gc_paused(settle=True):
        assert not gc.isenabled()
        built = Node()
        assert _in_generation(built, 0)
    assert gc.isenabled() and _in_generation(built, 2) and gc.get_freeze_count() == 0
    gc.disable()
    with collector.gc_paused(settle=True):
        pass
    assert not gc.isenabled()  # a paused collector stays paused


LEFT_TO_EXIT = """
import sys, weakref
from decguard_pipeline.core import collector

class Report:  # stands for a command's report
    def __del__(self):
        print("freed", flush=True)

if sys.argv[1] == "main":
    collector.skip_at_exit()  # what the CLI's main does
report = Report()
collector.leave_to_exit(report)
alive = weakref.ref(report)
del report
print("alive" if alive() is not None else "gone", flush=True)
"""


@pytest.mark.parametrize(
    ("role", "expected"),
    [
        ("main", ["alive", ""]),  # never freed object by object: the OS takes it back
        ("library", ["freed", "gone", ""]),  # in-process callers: nothing changes
    ],
)
def test_leave_to_exit_hands_objects_to_the_process_end_only_in_a_main(role, expected):
    done = subprocess.run(
        [sys.executable, "-c", LEFT_TO_EXIT, role], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n") == expected
