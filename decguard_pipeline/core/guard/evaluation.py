"""What the guard extension measured on a contract's datasets: one :class:`SuiteRun` per
evaluated dataset (its DecGuard report, the extension's block and checks) and the
:class:`GuardedRun` over all of them, with its sidecar document, text and files. Pure: the
runs (``runs/guard.py``) decide the datasets, the warehouse rows are built from these objects
(``warehouse/rows/guard.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from decguard_pipeline.core.contract import LoadedContract
from decguard_pipeline.core.gates import Check
from decguard_pipeline.core.guard.extension import GuardConfig, extension_metrics
from decguard_pipeline.core.guard.gates import guard_checks
from decguard_pipeline.core.guard.render import render_guard
from decguard_pipeline.core.guard.sidecar import (
    build_sidecar,
    evaluation_entry,
    worst_status,
)
from decguard_pipeline.core.report.golden import Report
from decguard_pipeline.core.report.jsonio import write_document
from decguard_pipeline.core.report.sidecar import sidecar_path

MAIN = "main"  # label of the main evaluation when its dataset is not one of the named suites


@dataclass
class SuiteRun:
    """One evaluated dataset: its DecGuard report and the extension's block and checks."""

    suite: str | None  # None: a dataset that is not one of the contract's suites
    report: Report
    block: dict[str, Any]
    checks: list[Check]

    @property
    def label(self) -> str:
        """The suite's name, ``main`` for a dataset that is not a named suite (summaries,
        picture titles, warehouse rows)."""
        return self.suite or MAIN

    @property
    def status(self) -> str:
        return worst_status(self.report.status, *(c["status"] for c in self.checks))


@dataclass
class GuardedRun:
    loaded: LoadedContract
    config: GuardConfig
    runs: list[SuiteRun]  # the main evaluation first
    summary: dict[str, Any] | None
    images: dict[int, dict[str, Path]] = field(default_factory=dict)  # per run index
    sidecar: Path | None = None  # where write_files put the sidecar

    @property
    def report(self) -> Report:
        return self.runs[0].report

    @property
    def status(self) -> str:
        """Worst over every evaluation, DecGuard's gates included: what the command exits
        with."""
        return worst_status(*(run.status for run in self.runs))

    def document(self, report_path: str | Path | None = None) -> dict[str, Any]:
        """The sidecar document (image paths relative to the sidecar's folder)."""
        entries = []
        for index, run in enumerate(self.runs):
            entry = evaluation_entry(run.suite, run.report.document, run.block, run.checks)
            entry["images"] = {k: p.name for k, p in self.images.get(index, {}).items()}
            entries.append(entry)
        return build_sidecar(
            self.loaded,
            self.config,
            entries,
            self.summary,
            created_at=self.report.document["created_at"],
            report_path=report_path,
        )

    def render(self) -> str:
        return render_guard(self.document())

    def write_files(
        self,
        directory: str | Path,
        stem: str,
        *,
        report: str | None = None,
        target: str | None = None,
        draw: Callable[..., dict[str, bytes]] | None = None,
    ) -> list[Path]:
        """The pictures ``<stem>[.<suite>].<kind>.png`` and the sidecar
        ``<stem>.pipeline.json`` in ``directory``. ``report``: the name of the report file the
        sidecar belongs to (``test -o``; the steps write theirs before any report, so none);
        ``target``: added to the pictures' titles; ``draw``: what draws them, called as
        ``core.report.plots.images`` (default: that, in this process)."""
        from decguard_pipeline.core.report.plots import write_images

        directory = Path(directory)
        name = self.loaded.contract.spec().name
        for index, run in enumerate(self.runs):
            file_stem = stem if index == 0 else f"{stem}.{run.suite}"
            title = " · ".join([name, run.label] + ([target] if target is not None else []))
            # the smooth reliability curve, when the calibration measures are on
            smooth = run.report.extensions.get("calibration", {}).get("smooth")
            drawn = None if draw is None else draw(run.block, title=title, smooth=smooth)
            self.images[index] = write_images(
                run.block, directory, file_stem, title=title, smooth=smooth, drawn=drawn
            )
        self.sidecar = sidecar_path(directory / f"{stem}.json")
        write_document(self.sidecar, self.document(report), what="pipeline results")
        return [*(p for images in self.images.values() for p in images.values()), self.sidecar]


def measure(report: Report, config: GuardConfig, suite: str | None = None) -> SuiteRun:
    """The extension's metrics and checks for a DecGuard report's results (DecGuard's metrics
    of the whole set are the report's own, not computed again)."""
    block = extension_metrics(report.results, config, golden=report.document["metrics"])
    return SuiteRun(suite, report, block, guard_checks(block, config))
