"""The cyclic garbage collector around work that builds many long-lived objects.

A collection walks every tracked object of the generations it collects; objects that stay
(modules, definitions, a loaded dataset or report) are walked again by each full collection.
Ways out, all of which leave reference counting to free objects as always:

* :func:`gc_paused`: no collection while a batch of acyclic objects is built (cases,
  requests, results, a report's records), settled afterwards when they are kept;
* :func:`settle`: what was built goes straight to the oldest generation (``gc.freeze`` then
  ``gc.unfreeze``: two list splices) instead of being walked by the next young collection;
* :func:`held`: a command (``evaluate``) freezes what it built before its work, which lives
  as long as it does, out of every collection until it ends; :func:`settle` then freezes
  too (cyclic garbage among those objects waits for the end of the command);
* :func:`hold_for_life`: the same for a worker process that never gives its frozen objects
  back (forked after its imports: its collections skip them and its pages stay shared);
* :func:`skip_at_exit`: a process's last act freezes what is left, so the interpreter's
  final collections do not walk it (the operating system frees it all at once);
  :func:`leave_to_exit` hands a command's result to that final act, unfreed.

Whether anything is frozen is known from these functions, never asked of ``gc``:
``gc.get_freeze_count`` walks the whole frozen list (6 ms for 500k objects), and
:func:`settle` runs around every in-process batch of cases (it cost a worker ~9% of its time).
Objects frozen by other code are unfrozen by :func:`settle` outside :func:`held` (only
collections get slower).
"""

from __future__ import annotations

import atexit
import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_holding = False  # objects are frozen by held() or hold_for_life(): settle() freezes too


def settle() -> None:
    """The young generations' objects to the oldest one (or into the frozen set while
    :func:`held` or :func:`hold_for_life` holds one), without walking them."""
    gc.freeze()
    if not _holding:
        gc.unfreeze()


_settle = settle  # for gc_paused, whose keyword shadows the name


def hold_for_life() -> None:
    """Freeze every object now, for the rest of this process, and let the collector run: for
    a worker forked after its imports. :func:`settle` then freezes too."""
    global _holding
    gc.freeze()
    _holding = True
    gc.enable()


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


@contextmanager
def held() -> Iterator[Callable[[], None]]:
    """Pause the collector for the start of a command (imports, definitions, an instance);
    the callable it yields freezes what exists by then and lets the collector run again. On
    the way out everything frozen here is unfrozen (an in-process caller, such as a test,
    gets its garbage back). When something else already froze objects, only the pause."""
    global _holding
    collecting = gc.isenabled()
    freezing = not _holding and gc.get_freeze_count() == 0  # once, at the start of a command
    gc.disable()

    def start() -> None:
        global _holding
        if freezing:
            gc.freeze()
            _holding = True
        if collecting:
            gc.enable()

    try:
        yield start
    finally:
        if freezing:
            _holding = False
            gc.unfreeze()
        if collecting:
            gc.enable()


_left_to_exit: list[object] | None = None  # see leave_to_exit


def leave_to_exit(*objects: object) -> None:
    """Let the operating system free ``objects`` (a command's report: a million small
    objects) when this process ends, instead of reference counting freeing them one by one
    as the command returns and the interpreter shuts down (80-100 ms after a 3,000-case
    property run). Only in a process whose main called :func:`skip_at_exit`; elsewhere (a
    test calling commands in-process, a Dagster run) nothing changes."""
    if _left_to_exit is not None:
        _left_to_exit.extend(objects)


def skip_at_exit() -> None:
    """At the interpreter's exit, after the exit handlers registered later than this call,
    freeze every object: the final collections then skip them. After ``evaluate`` (Dagster,
    pandas, the definitions: ~400k objects) those collections took 0.7-0.9 s of an idle
    2-core machine, for memory the process gives back anyway. Objects are still released as
    modules are cleared; only the cycle search is skipped (so a finaliser of an object in a
    reference cycle does not run: every file the pipeline writes is closed, and published
    by a rename, before that). Call it first thing (exit handlers run last-registered
    first).

    It also starts the list :func:`leave_to_exit` fills: a list holding itself, so no
    reference count ever reaches zero, and frozen at exit, so no collection frees it."""
    global _left_to_exit
    if _left_to_exit is None:
        _left_to_exit = []
        _left_to_exit.append(_left_to_exit)
    atexit.register(gc.freeze)
