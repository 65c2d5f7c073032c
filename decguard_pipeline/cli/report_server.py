"""The report files, served read-only on localhost next to the Dagster UI.

A page served over ``http://`` cannot open ``file://`` links, so the HTML reports and diffs
the assets link (``defs/report_links.py``) are served from the warehouse's ``report_files``
folder by a small static server in the ``ui`` process: GET and HEAD only, bound to 127.0.0.1,
no directory listing, nothing outside the folder (the standard handler resolves paths inside
its directory).
"""

from __future__ import annotations

import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class _ReportFiles(SimpleHTTPRequestHandler):
    def list_directory(self, path: Any) -> None:  # no listing: a report is opened by its link
        self.send_error(404, "Not found")
        return None

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the UI logs enough
        return


def serve_reports(folder: Path, port: int, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """Serve ``folder`` on ``host:port`` in a daemon thread; the caller shuts it down."""
    folder.mkdir(parents=True, exist_ok=True)
    handler = functools.partial(_ReportFiles, directory=str(folder))
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="report-files", daemon=True).start()
    return server
