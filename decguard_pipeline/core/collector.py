"""The cyclic garbage collector around work that builds many long-lived objects.

A collection walks every tracked object of the generations it collects; objects that stay
(modules, definitions, a loaded dataset or report) are walked again by each full collection.
Two ways out, both leave reference counting to free objects as always:

* :func:`settle`: what was built goes straight to the oldest generation (``gc.freeze`` then
  ``gc.unfreeze``: two list splices) instead of being walked by the next young collection;
* :func:`held`: a command (``evaluate``) freezes what it built before its work, which lives
  as long as it does, out of every collection until it ends; :func:`settle` then freezes
  too (cyclic garbage among those objects waits for the end of the command);
* :func:`skip_at_exit`: a process's last act freezes what is left, so the interpreter's
  final collections do not walk it (the operating system frees it all at once).
"""

from __future__ import annotations

import atexit
import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_holding = False  # what is frozen now was frozen by held()


def settle() -> None:
    """The young generations' objects to the oldest one (or into the frozen set while
    :func:`held` holds one), without walking them. Nothing when something else froze objects
    (a ``gc.freeze`` before fork must stay as it is)."""
    if gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()
    elif _holding:
        gc.freeze()


@contextmanager
def held() -> Iterator[Callable[[], None]]:
    """Pause the collector for the start of a command (imports, definitions, an instance);
    the callable it yields freezes what exists by then and lets the collector run again. On
    the way out everything frozen here is unfrozen (an in-process caller, such as a test,
    gets its garbage back). When something else already froze objects, only the pause."""
    global _holding
    collecting = gc.isenabled()
    freezing = gc.get_freeze_count() == 0
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


def skip_at_exit() -> None:
    """At the interpreter's exit, after the exit handlers registered before this call,
    freeze every object: the final collections then skip them. After ``evaluate`` (Dagster,
    pandas, the definitions: ~400k objects) those collections took 0.7-0.9 s of an idle
    2-core machine, for memory the process gives back anyway. Objects are still released as
    modules are cleared; only the cycle search is skipped. Call it first thing (exit handlers
    run last-registered first)."""
    atexit.register(gc.freeze)
