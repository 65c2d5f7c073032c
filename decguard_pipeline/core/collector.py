"""The cyclic garbage collector around work that builds many long-lived objects.

A collection walks every tracked object of the generations it collects; objects that stay
(a loaded dataset or report) are walked again by each full collection. Ways out, which leave
reference counting to free objects as always:

* :func:`gc_paused`: no collection while a batch of acyclic objects is built (cases,
  requests, results, a report's records), settled afterwards when they are kept;
* :func:`settle`: what was built goes straight to the oldest generation (``gc.freeze`` then
  ``gc.unfreeze``: two list splices) instead of being walked by the next young collection.

What a process does at its exit is its entry point's business (cli/process_exit.py):
:func:`hand_off` gives it a large object the code is done with, to free as it sees fit.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

# Set by a process's entry point (cli/process_exit.skip_at_exit); None: objects are freed
# by reference counting as always.
_taker: Callable[[Any], None] | None = None


def take_hand_offs(taker: Callable[[Any], None] | None) -> None:
    """What receives :func:`hand_off`'s objects in this process (None: nothing)."""
    global _taker
    _taker = taker


def hand_off(obj: Any) -> None:
    """``obj`` (many small objects: a report's records) goes to the process's entry point,
    which may keep it for the operating system to free at exit instead of freeing it object
    by object now; without one, nothing happens."""
    if _taker is not None:
        _taker(obj)


def settle() -> None:
    """The young generations' objects to the oldest one, without walking them."""
    gc.freeze()
    gc.unfreeze()


_settle = settle  # for gc_paused, whose keyword shadows the name


@contextmanager
def gc_paused(*, settle: bool = False) -> Iterator[None]:
    """Pause the cyclic garbage collector while building many acyclic objects (cases,
    requests, results). Each collection would walk every object built so far, and with
    100k+ live cases those walks cost more than the work itself; nothing built here forms
    a cycle, so nothing is left for the collector to find.

    ``settle``: what was built is kept (a run's results), so on the way out it goes straight
    to the oldest generation (:func:`settle`) instead of being walked at once by
    the first young collection; it is freed by reference counting as always."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if settle:
                _settle()
            gc.enable()
