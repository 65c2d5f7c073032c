"""Links from the Dagster UI to the report files (HTML pages, JSON reports, diffs).

A web page cannot open ``file://`` links (browsers refuse them from an ``http://`` page), so a
path in the UI is only something to copy. ``decguard-pipeline ui`` therefore serves the
warehouse's ``report_files`` folder read-only on localhost (``REPORTS_PORT``), and every asset
that writes a page links it as a URL under ``$DECGUARD_REPORTS_URL`` (default that server) next
to its path. A deployment that serves the folder elsewhere (a static file server, a bucket)
sets ``DECGUARD_REPORTS_URL`` to its address; an empty value leaves the paths only.
See docs/ui.md.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

import dagster as dg

REPORTS_URL = "DECGUARD_REPORTS_URL"
REPORTS_PORT = 3001  # where `decguard-pipeline ui` serves report_files (next to the UI's 3000)
FOLDER = "report_files"  # the warehouse folder the report files are written under


def reports_base() -> str:
    """The URL the ``report_files`` folder is served at ('' for none)."""
    return os.environ.get(REPORTS_URL, f"http://localhost:{REPORTS_PORT}").rstrip("/")


def report_url(path: str | Path) -> str | None:
    """The URL of a file under ``report_files``; None when no server is configured or the
    file is elsewhere."""
    base = reports_base()
    parts = Path(path).parts
    if not base or FOLDER not in parts:
        return None
    inside = parts[len(parts) - parts[::-1].index(FOLDER) :]
    return base + "/" + "/".join(quote(part, safe="=@") for part in inside)


def file_links(name: str, path: str | Path) -> dict[str, Any]:
    """``name`` as a URL to open (when served) and ``<name>_path`` as the path to copy."""
    url = report_url(path)
    links: dict[str, Any] = {} if url is None else {name: dg.MetadataValue.url(url)}
    links[f"{name}_path"] = dg.MetadataValue.path(str(path))
    return links
