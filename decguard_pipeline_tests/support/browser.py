"""Headless Chromium for tests: Debian's ``chromium`` package driven by Playwright.

Playwright's own browser download cannot run here (no network); it drives the system
Chromium through ``executable_path``. ``launch()`` gives every browser a fresh temporary
profile (Playwright passes its own ``--user-data-dir``) and the flags below keep Chromium from
phoning home. Tests that need a browser use the ``chromium`` fixture (re-exported by
conftest.py); it skips with the reason when Playwright or Chromium is missing.
See :class:`Chromium` for the one rule: open pages after everything that runs an event loop.

``watch(page)`` records what a page did that a report page must never do: console errors,
uncaught exceptions, and requests other than the page's own file (and ``data:`` URLs).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

CHROMIUM_ENV = "DECGUARD_CHROMIUM"  # a Chromium binary to use instead of the system one
CANDIDATES = ("chromium", "chromium-browser")
# headless comes from launch(headless=True) (Playwright adds --headless)
FLAGS = [
    "--no-sandbox",  # tests run as root in CI
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
]
INSTALL_HINT = "apt-get install -y chromium; .ci/run installs it"
PAGE_TIMEOUT_MS = 180_000  # for a navigation or a wait for a selector


def chromium_path() -> str | None:
    """The Chromium binary: $DECGUARD_CHROMIUM, else chromium on PATH (Debian's package)."""
    override = os.environ.get(CHROMIUM_ENV)
    if override:
        return override if os.access(override, os.X_OK) else None
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


def unavailable() -> str | None:
    """Why no browser test can run here, or None."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright is not installed (pip install -e '.[test]')"
    if chromium_path() is None:
        return f"Chromium is not installed ({INSTALL_HINT})"
    return None


def screenshot_folder(directory: str) -> Path:
    """The folder a screenshot script writes into, made; SystemExit when no browser runs."""
    reason = unavailable()
    if reason:
        raise SystemExit(reason)
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    return out


def top_of(width: int, height: int | None) -> dict[str, int] | None:
    """A screenshot's clip: the top ``height`` pixels of the page, or all of it (None)."""
    return None if height is None else {"x": 0, "y": 0, "width": width, "height": height}


@dataclass
class Watch:
    """What a page did: console errors, uncaught exceptions, requests other than loading its
    own file."""

    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def outside_requests(self) -> list[str]:
        return list(self.requests)

    def problems(self) -> list[str]:
        return self.console_errors + self.page_errors + self.outside_requests()


def watch(page: Any) -> Watch:
    seen = Watch()
    page.on(
        "console", lambda msg: seen.console_errors.append(msg.text) if msg.type == "error" else None
    )
    page.on("pageerror", lambda exc: seen.page_errors.append(str(exc)))

    def on_request(request: Any) -> None:
        # the page's own file (a navigation) and data: URLs are not network requests
        own = request.is_navigation_request() and request.url.startswith("file:")
        if not own and not request.url.startswith("data:"):
            seen.requests.append(request.url)

    page.on("request", on_request)
    return seen


def launch(playwright: Any) -> Any:
    return playwright.chromium.launch(executable_path=chromium_path(), args=FLAGS, headless=True)


class Chromium:
    """A headless Chromium started at the first :meth:`open` and closed by :meth:`close`.

    Playwright's sync API runs an asyncio loop on the calling thread while the browser is
    up, so nothing else on that thread may start one (``asyncio.run`` fails with "cannot be
    called from a running event loop"): make the files or start the servers a test needs
    first, then open pages. That is also why there is no session-wide browser: it would break
    every later test that runs an event loop."""

    def __init__(self) -> None:
        self._playwright: Any = None
        self._browser: Any = None

    def open(
        self,
        target: str | os.PathLike[str],
        *,
        ready: str | None = None,
        width: int = 1280,
        height: int = 900,
    ) -> tuple[Any, Watch]:
        """A new page (own context: no shared storage) at ``target`` (a URL or a file path),
        watched from before it loads; waits for the ``ready`` selector when given."""
        if self._browser is None:
            from playwright.sync_api import sync_playwright

            self._playwright = sync_playwright().start()
            self._browser = launch(self._playwright)
        context = self._browser.new_context(viewport={"width": width, "height": height})
        # a liveness bound, not a timing: a page served by a live site is built by its first
        # request, which under the suite's two workers took over Playwright's default 30 s
        context.set_default_timeout(PAGE_TIMEOUT_MS)
        page = context.new_page()
        seen = watch(page)
        url = str(target)
        if "://" not in url:
            url = Path(target).resolve().as_uri()
        page.goto(url)
        if ready is not None:
            page.wait_for_selector(ready)
        return page, seen

    def close(self) -> None:
        if self._browser is not None:
            self._browser.close()
            self._browser = None
        if self._playwright is not None:
            self._playwright.stop()
            self._playwright = None


@pytest.fixture
def chromium() -> Iterator[Chromium]:
    """Headless Chromium for one test (skipped with the reason when there is none)."""
    reason = unavailable()
    if reason is not None:
        pytest.skip(reason)
    session = Chromium()
    try:
        yield session
    finally:
        session.close()
