"""Files a reader sees whole or not at all: written under a hidden temporary name in the
same folder, then renamed over the final name.

A report written in place is destroyed the moment the command starts writing it: killed
half way (kill -9, out of memory, a CI timeout), it leaves the first megabytes of the new
report and nothing of the old one, and a reader polling the file may load half a document.
Here the old file stays whole until the new one is, and the rename swaps them at once.

A killed writer leaves its temporary file (``.<name>.<pid>.<token>.tmp``, hidden); the
next write of the same file removes those whose process has ended. Paths that are not
regular files (``/dev/stdout``, a named pipe) are written in place: they cannot be renamed
over, and a reader of a pipe never sees a half-written file anyway. A symbolic link is
followed: the file it points to is replaced, the link stays.
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from decguard_pipeline.core.processes import running


def _in_place(path: Path) -> bool:
    """Whether ``path`` exists as something other than a regular file (a device, a pipe)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode)


def remove_leftovers(path: Path) -> None:
    """Temporary files of ``path`` left by writers that were killed (their process ended)."""
    try:
        names = [entry.name for entry in os.scandir(path.parent)]
    except OSError:
        return
    prefix = f".{path.name}."
    for name in names:
        if not (name.startswith(prefix) and name.endswith(".tmp")):
            continue
        pid = name[len(prefix) :].split(".", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not running(int(pid)):
            (path.parent / name).unlink(missing_ok=True)


@contextmanager
def atomic_output(path: str | Path) -> Iterator[IO[bytes]]:
    """A binary stream whose bytes become ``path`` when the block ends without error (the
    parent folder is created); on an error, or if the process dies, ``path`` is left as it
    was. The umask applies to the new file, as to any file the command creates."""
    path = Path(path)
    if _in_place(path):  # followed through links: /dev/stdout is one
        with path.open("wb") as out:
            yield out
        return
    if path.is_symlink():
        path = path.resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_leftovers(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(6)}.tmp")
    try:
        with tmp.open("xb") as out:
            yield out
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
