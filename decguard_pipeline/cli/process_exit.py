"""How the ``decguard-pipeline`` process ends: without the interpreter's final walks of the
cyclic collector over what the command built.

* :func:`skip_at_exit`: the process's last act freezes what is left, so the interpreter's
  final collections do not walk it (the operating system frees it all at once);
* :func:`leave_to_exit`: a command's result handed to that final act, unfreed;
* :func:`end_at_once`: a command that asks to end without the interpreter's finalisation
  at all, which :func:`ended` carries out when it returns.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys

from decguard_pipeline.core import collector

_left_to_exit: list[object] | None = None  # see leave_to_exit
_at_once = False  # see end_at_once


def leave_to_exit(*objects: object) -> None:
    """Let the operating system free ``objects`` (a command's report: a million small
    objects) when this process ends, instead of reference counting freeing them one by one
    as the command returns and the interpreter shuts down (80-100 ms after a 3,000-case
    property run). Only in a process whose main called :func:`skip_at_exit`; elsewhere (a
    test calling commands in-process) nothing changes."""
    if _left_to_exit is not None:
        _left_to_exit.extend(objects)


def skip_at_exit() -> None:
    """At the interpreter's exit, after the exit handlers registered later than this call,
    freeze every object: the final collections then skip them. After a command (pandas, the
    report, Dagster for ``evaluate``: ~400k objects) those collections took 0.7-0.9 s of an
    idle 2-core machine, for memory the process gives back anyway. Objects are still
    released as modules are cleared; only the cycle search is skipped (so a finaliser of an
    object in a reference cycle does not run: every file the pipeline writes is closed, and
    published by a rename, before that). Call it first thing (exit handlers run
    last-registered first).

    It also starts the list :func:`leave_to_exit` fills: a list holding itself, so no
    reference count ever reaches zero, and frozen at exit, so no collection frees it."""
    global _left_to_exit
    if _left_to_exit is None:
        _left_to_exit = []
        _left_to_exit.append(_left_to_exit)
        collector.take_hand_offs(leave_to_exit)  # what core is done with, left the same way
    atexit.register(gc.freeze)


def end_at_once() -> None:
    """Let this process end as soon as its command returns: its output flushed, then
    ``os._exit``, without the interpreter's finalisation (the modules torn down one object
    at a time: 10-35 ms of ``report`` on a 5,000-case report, median 15 ms over twenty
    interleaved rounds). For a command that has closed every file it wrote (each published
    by a rename) and runs no thread of its own once it returns. Only where the process's
    main calls :func:`ended`; elsewhere (a test calling commands in-process) it changes
    nothing."""
    global _at_once
    _at_once = True


def ended(exit_code: object) -> None:
    """End this process now with ``exit_code`` (a ``SystemExit``'s code) when its command
    asked (:func:`end_at_once`) and its output flushes; else return, for the interpreter to
    end it as always (and report a failed flush as it always does)."""
    if not _at_once or not isinstance(exit_code, int):
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe or stream
        return
    os._exit(exit_code)
