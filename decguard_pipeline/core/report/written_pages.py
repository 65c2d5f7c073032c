"""Big sequential writes that do not fill the page cache with their own pages.

A production report is 640 bytes a record: 6.4 GB for ten million. Written plainly, every
byte takes a fresh page of the page cache, which the kernel must find (and, in a VM whose
free memory is handed back to the host, the host must back again): on this project's
machines writing a new gigabyte cost 4-9 s of system time, against ~0.5 s when the pages
come from memory freed a moment ago. So once a file is past :data:`WINDOW`, each write
starts its own writeback and hands the pages written back long enough ago to the kernel
(``POSIX_FADV_DONTNEED``, which leaves dirty pages alone), and the next writes take those
pages again. The file's bytes are the same; a reader of it simply reads them from disk.
"""

from __future__ import annotations

import os
from typing import IO

WINDOW = 64 << 20  # bytes left in the page cache behind the writing position


class WrittenPages:
    """Tracks what has been written to ``stream`` (a binary file opened for writing from
    its start) and drops it from the page cache as it goes."""

    def __init__(self, stream: IO[bytes], window: int = WINDOW) -> None:
        self.stream = stream
        self.window = window
        self.end = 0
        self.started = 0  # bytes whose writeback was started
        self.dropped = 0  # bytes before which pages were asked to go (each range twice)
        self.usable = hasattr(os, "posix_fadvise")

    def wrote(self, size: int) -> None:
        """``size`` more bytes were written."""
        self.end += size
        if not self.usable or self.end <= self.window:
            return
        self.stream.flush()
        fd = self.stream.fileno()
        try:
            # the new bytes: writeback starts now (their pages are dirty, none dropped)
            os.posix_fadvise(fd, self.started, self.end - self.started, os.POSIX_FADV_DONTNEED)
            # a window behind (and the window before it, for pages then still being written
            # back): the pages written back by now are freed
            start = max(0, self.dropped - self.window)
            os.posix_fadvise(fd, start, self.end - self.window - start, os.POSIX_FADV_DONTNEED)
            self.dropped = self.end - self.window
        except OSError:  # advice only (a file system may not take it)
            self.usable = False
        self.started = self.end
