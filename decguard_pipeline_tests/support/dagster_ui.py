"""The Dagster UI on a finished ``decguard-pipeline evaluate``, for the browser test and the
screenshots of docs/ui.md.

``evaluated(folder)`` runs ``evaluate`` in a child process on a copy of the bundled refund
example (three targets: one passes, two fail their gates) with its own DAGSTER_HOME and
warehouse; ``webserver(place)`` starts ``dagster-webserver`` on that instance (workspace.yaml
of the project) and the report-files server ``decguard-pipeline ui`` starts, on free ports.
Start both before the first ``Chromium.open`` (support/browser.py: Playwright's event loop).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from decguard_pipeline.cli.report_server import serve_reports

ROOT = Path(__file__).resolve().parents[2]
REFUND = ROOT / "data" / "contracts" / "refund"
STARTUP_S = 240  # the webserver loads the definitions in a code server: slow on a busy machine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Evaluated:
    """A folder holding contracts, production days, a DAGSTER_HOME and a warehouse, and what
    ``evaluate`` printed there. ``links``: where the Dagster asset links point (variables)."""

    folder: Path
    links: dict[str, str]
    returncode: int = -1
    stdout: str = ""
    stderr: str = ""

    @property
    def warehouse(self) -> Path:
        return self.folder / "wh"

    @property
    def reports_port(self) -> int:
        return int(self.links["DECGUARD_REPORTS_URL"].rsplit(":", 1)[1])

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "DAGSTER_HOME": str(self.folder / "home"),
            "DECGUARD_WAREHOUSE": str(self.warehouse),
            "DECGUARD_CONTRACTS": str(self.folder / "contracts"),
            "DECGUARD_PRODUCTION": str(self.folder / "production"),
            **self.links,
        }

    def evaluate(self, *args: str, timeout: float) -> Evaluated:
        """``decguard-pipeline evaluate ARGS`` in a child process on this folder."""
        ran = subprocess.run(
            [sys.executable, "-m", "decguard_pipeline", "evaluate", *args],
            env=self.env(),
            cwd=self.folder,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        self.returncode, self.stdout, self.stderr = ran.returncode, ran.stdout, ran.stderr
        return self


def evaluated(folder: Path, timeout: float = 600) -> Evaluated:
    """``decguard-pipeline evaluate`` of the refund example in ``folder``."""
    shutil.copytree(REFUND, folder / "contracts" / "refund")
    (folder / "production").mkdir(parents=True)  # no production days: targets only
    links = {"DECGUARD_REPORTS_URL": f"http://127.0.0.1:{free_port()}"}
    return Evaluated(folder, links).evaluate(timeout=timeout)


@dataclass
class Ui:
    url: str
    log: Path


@contextmanager
def webserver(place: Evaluated) -> Iterator[Ui]:
    """``dagster-webserver`` on the evaluation's instance and the report files next to it;
    both stopped on exit."""
    port = free_port()
    log = place.folder / "webserver.log"
    binary = Path(sys.executable).with_name("dagster-webserver")
    files = serve_reports(place.warehouse / "report_files", place.reports_port)
    with log.open("w") as out:
        child = subprocess.Popen(
            [str(binary), "-w", str(ROOT / "workspace.yaml"), "-h", "127.0.0.1", "-p", str(port)],
            env=place.env(),
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its code server goes with it (killpg below)
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(url, child, log)
        _welcome_seen(url)
        yield Ui(url, log)
    finally:
        files.shutdown()
        try:
            os.killpg(child.pid, signal.SIGTERM)
            child.wait(timeout=30)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()


def _graphql(url: str, query: str) -> Any:
    body = json.dumps({"query": query}).encode()
    request = urllib.request.Request(
        f"{url}/graphql", data=body, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.load(response)["data"]


def _welcome_seen(url: str) -> None:
    """Tell the server its one-time "Join the Dagster community" dialog was seen (the UI's
    own ``setNuxSeen`` mutation), so that no page shows it: it opens a moment after a page
    does, at a time of its own, over whatever a test is clicking."""
    _graphql(url, "mutation { setNuxSeen }")
    if _graphql(url, "query { shouldShowNux }") != {"shouldShowNux": False}:
        raise RuntimeError("dagster-webserver still shows its welcome dialog")


def _wait_until_up(url: str, child: subprocess.Popen[Any], log: Path) -> None:
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise RuntimeError(f"dagster-webserver exited: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{url}/server_info", timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(1)
    raise RuntimeError(f"dagster-webserver not up after {STARTUP_S} s: {log.read_text()[-2000:]}")


def metadata_row(page: Any, key: str) -> Any:
    """The row of the asset's metadata table whose key is ``key``."""
    return page.locator("tr").filter(has=page.get_by_text(key, exact=True)).first


def show_markdown(page: Any, key: str) -> Any:
    """Open the markdown value of ``key`` (the UI shows long markdown behind a link); the
    dialog."""
    metadata_row(page, key).get_by_text("[Show Markdown]").click()
    dialog = page.get_by_role("dialog")
    dialog.wait_for()
    return dialog
