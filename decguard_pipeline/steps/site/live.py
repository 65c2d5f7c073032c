"""The site as ``decguard-pipeline ui`` serves it: built into a local folder, and built again
when the warehouse has new results (a commit since the last build) by the next request
that asks, at most every ``CHECK_EVERY_S``. No Dagster here."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from decguard_pipeline.steps.site.build import Built, build_site
from decguard_pipeline.warehouse import Warehouse

CHECK_EVERY_S = 5.0


class LiveSite:
    def __init__(
        self,
        warehouse: Warehouse,
        folder: Path,
        *,
        clock: Callable[[], float] = time.monotonic,
        build: Callable[[Warehouse, Path], Built] = build_site,
    ) -> None:
        self.warehouse, self.folder, self.clock, self.build = warehouse, folder, clock, build
        self._lock = threading.Lock()
        self._stamp: int | None = None
        self._checked = float("-inf")
        self.builds = 0
        self.error: str | None = None  # why the newest build failed

    def refresh(self) -> None:
        """Build when the warehouse changed since the last build (checked at most every
        ``CHECK_EVERY_S``); one build at a time, and a request waits for the one under way."""
        with self._lock:
            now = self.clock()
            if now - self._checked < CHECK_EVERY_S and self._stamp is not None:
                return
            self._checked = now
            stamp = self.warehouse.stamp() if self.warehouse.exists() else -1
            if stamp == self._stamp:
                return
            try:
                self.build(self.warehouse, self.folder)
            except Exception as exc:  # served as an error page; the next change tries again
                self.error = f"{type(exc).__name__}: {exc}"
            else:
                self.error = None
            self._stamp = stamp
            self.builds += 1
