"""The report files, served read-only on localhost next to the Dagster UI.

A page served over ``http://`` cannot open ``file://`` links, so the HTML reports and diffs
the assets link (``defs/report_links.py``) are served from the warehouse's ``report_files``
folder by a small static server in the ``ui`` process: GET and HEAD only, bound to 127.0.0.1,
no directory listing, and nothing outside the folder.

The standard handler only normalises the request path: a symbolic link inside the folder
(to ``/etc/passwd``, to another user's files) would be followed. Here a request is served only
when the file it resolves to lies inside the folder, no part of its path inside the folder
starts with a dot (``.env``, ``.staging``), and it is a regular file (not a device, a FIFO or
a socket). The file is opened one path component at a time from the folder with
``O_NOFOLLOW``, so a link swapped in after the check cannot redirect the open.
"""

from __future__ import annotations

import functools
import os
import shutil
import stat
import threading
import urllib.parse
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


def open_inside(folder: Path, request_path: str) -> tuple[IO[bytes], os.stat_result] | None:
    """The regular file ``request_path`` (a URL path) names inside ``folder`` (resolved),
    opened for reading with its status; None when it is missing or not to be served."""
    parts = [p for p in urllib.parse.unquote(request_path).split("/") if p]
    if not parts or any(p.startswith(".") or "\\" in p or "\0" in p for p in parts):
        return None
    try:
        real = Path(os.path.realpath(folder.joinpath(*parts), strict=True))
        inside = real.relative_to(folder).parts
    except (OSError, ValueError):  # missing, a link loop, or outside the folder
        return None
    if not inside or any(p.startswith(".") for p in inside):  # a link to a dotfile
        return None
    descriptor = _open_beneath(folder, inside)
    if descriptor is None:
        return None
    status = os.fstat(descriptor)
    if not stat.S_ISREG(status.st_mode):
        os.close(descriptor)
        return None
    return os.fdopen(descriptor, "rb"), status


def _open_beneath(folder: Path, parts: tuple[str, ...]) -> int | None:
    """Open ``folder/parts...`` refusing a symbolic link at every step (the path given is
    already resolved: a link here was put in after the check)."""
    flags = os.O_RDONLY | _NOFOLLOW
    try:
        current = os.open(folder, os.O_RDONLY | _DIRECTORY)
    except OSError:
        return None
    try:
        for part in parts[:-1]:
            following = os.open(part, flags | _DIRECTORY, dir_fd=current)
            os.close(current)
            current = following
        # non-blocking: opening a FIFO must not wait for a writer (it is refused next)
        return os.open(parts[-1], flags | os.O_NONBLOCK, dir_fd=current)
    except OSError:
        return None
    finally:
        os.close(current)


class _ReportFiles(SimpleHTTPRequestHandler):
    folder: Path  # resolved, set by serve_reports

    def send_head(self) -> IO[bytes] | None:  # type: ignore[override]
        path = urllib.parse.urlsplit(self.path).path
        opened = open_inside(self.folder, path)
        if opened is None:
            self.send_error(404, "Not found")
            return None
        stream, status = opened
        self._length = status.st_size
        self.send_response(200)
        self.send_header("Content-Type", self.guess_type(path))
        self.send_header("Content-Length", str(status.st_size))
        self.send_header("Last-Modified", self.date_time_string(int(status.st_mtime)))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        return stream

    def copyfile(self, source: Any, outputfile: Any) -> None:
        """Exactly the length announced, even if the file grows meanwhile."""
        remaining = self._length
        while remaining > 0:
            chunk = source.read(min(remaining, shutil.COPY_BUFSIZE))
            if not chunk:
                break
            outputfile.write(chunk)
            remaining -= len(chunk)

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the UI logs enough
        return


def serve_reports(folder: Path, port: int, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """Serve ``folder`` on ``host:port`` in a daemon thread; the caller shuts it down."""
    folder.mkdir(parents=True, exist_ok=True)
    resolved = folder.resolve(strict=True)
    handler = type("ReportFiles", (_ReportFiles,), {"folder": resolved})
    server = ThreadingHTTPServer((host, port), functools.partial(handler, directory=str(resolved)))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="report-files", daemon=True).start()
    return server
