"""The evaluation site, served read-only on localhost next to the Dagster UI: a static server
over the folder :class:`~decguard_pipeline.steps.site.live.LiveSite` builds into, GET and HEAD
only, bound to 127.0.0.1, nothing outside the folder. Each request for a page first lets the
site catch up with the warehouse (a build only when something new was written)."""

from __future__ import annotations

import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from decguard_pipeline.steps.site.live import LiveSite


class _SiteFiles(SimpleHTTPRequestHandler):
    site: LiveSite

    def __init__(self, *args: Any, site: LiveSite, **kwargs: Any) -> None:
        self.site = site
        super().__init__(*args, **kwargs)

    def send_head(self) -> Any:
        path = self.path.split("?", 1)[0]
        if path.endswith((".html", "/")):
            self.site.refresh()
            if self.site.error is not None and not (self.site.folder / "index.html").exists():
                self.send_error(503, f"the site could not be built: {self.site.error}")
                return None
        return super().send_head()

    def list_directory(self, path: Any) -> None:  # every folder has its index.html
        self.send_error(404, "Not found")
        return None

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-cache")  # a rebuilt page is fetched again
        super().end_headers()

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the UI logs enough
        return


def serve_site(site: LiveSite, port: int, host: str = "127.0.0.1") -> ThreadingHTTPServer:
    """Serve ``site`` on ``host:port`` in a daemon thread (its first build starts at once, in
    the background); the caller shuts it down."""
    site.folder.mkdir(parents=True, exist_ok=True)
    handler = functools.partial(_SiteFiles, site=site, directory=str(site.folder))
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="site", daemon=True).start()
    threading.Thread(target=site.refresh, name="site-build", daemon=True).start()
    return server
