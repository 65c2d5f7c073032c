"""Write a big document's bytes on a thread of their own while the next ones are encoded.

Encoding holds the interpreter lock; a ``write`` call releases it while the kernel copies
the bytes into the page cache (~40 ms of a 58 MB property report). Handed to a thread a
group of chunks at a time, the copy runs while the encoder makes the next group. Small
documents never start the thread: they are written by the caller as they come.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from queue import SimpleQueue
from types import TracebackType
from typing import IO, Any

GROUP_BYTES = 1 << 20  # per hand-off: few hand-offs, little held
IN_FLIGHT = 4  # groups handed over and not yet written (a few MB at most)


class WriteBehind:
    """``put`` chunks (bytes or memoryviews, never changed afterwards); ``close`` writes
    what is left, waits for the thread and raises what a write raised. ``written`` (on the
    writing thread) sees each chunk after it is written, in order: a digest of the file,
    the page-cache upkeep of ``written_pages``. Used as a context
    manager, an error in the block still waits for the thread (the stream is closed by the
    caller after the block) and then propagates."""

    def __init__(self, out: IO[bytes], written: Callable[[Any], None] | None = None) -> None:
        self.out = out
        self.written = written  # told each chunk once it is written, in order
        self.group: list[Any] = []
        self.size = 0
        self.thread: threading.Thread | None = None
        self.groups: SimpleQueue[list[Any] | None] = SimpleQueue()
        self.slots = threading.Semaphore(IN_FLIGHT)
        self.failed: BaseException | None = None

    def put(self, chunk: Any) -> None:
        self.group.append(chunk)
        self.size += len(chunk)
        if self.size >= GROUP_BYTES:
            self._hand_over()

    def _hand_over(self) -> None:
        if self.failed is not None:
            raise self.failed
        if self.thread is None:
            self.thread = threading.Thread(target=self._drain, name="write-behind", daemon=True)
            self.thread.start()
        self.slots.acquire()
        self.groups.put(self.group)
        self.group, self.size = [], 0

    def _drain(self) -> None:
        while (group := self.groups.get()) is not None:
            try:
                if self.failed is None:
                    self._write(group)
            except BaseException as exc:  # raised in the caller's thread
                self.failed = exc
            finally:
                self.slots.release()

    def _stop(self) -> None:
        if self.thread is not None:
            self.groups.put(None)
            self.thread.join()
            self.thread = None

    def close(self) -> None:
        self._stop()
        if self.failed is not None:
            raise self.failed
        self._write(self.group)
        self.group, self.size = [], 0

    def _write(self, chunks: list[Any]) -> None:
        _write_all(self.out, chunks)
        if self.written is not None:
            for chunk in chunks:
                self.written(chunk)

    def __enter__(self) -> WriteBehind:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if kind is None:
            self.close()
        else:
            self._stop()


def _write_all(out: IO[bytes], chunks: list[Any]) -> None:
    """The chunks in one ``writev`` (one release of the interpreter lock for the group),
    after what the stream buffered; a short write continues where it stopped."""
    out.flush()
    fd = out.fileno()
    views = [memoryview(chunk).cast("B") for chunk in chunks]
    while views:
        written = os.writev(fd, views[:1024])  # IOV_MAX
        while views and written >= len(views[0]):
            written -= len(views[0])
            views.pop(0)
        if written:
            views[0] = views[0][written:]
