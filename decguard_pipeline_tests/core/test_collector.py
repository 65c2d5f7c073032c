"""core/collector.py: what is settled leaves the collector's young generations without being
walked, and a paused collector is given back as it was."""

from __future__ import annotations

import gc

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
    gc.unfreeze()
    gc.enable()


def test_settle_moves_young_objects_to_the_oldest_generation():
    gc.disable()
    node = Node()
    assert _in_generation(node, 0)
    collector.settle()
    assert not _in_generation(node, 0) and _in_generation(node, 2)
    assert gc.get_freeze_count() == 0


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
