"""``test`` with the guard extension: suites, extension metrics and checks, the sidecar and the
pictures. Shared by the CLI and the Dagster assets; no Dagster import.

A contract without the extension goes straight to ``runs.golden.run_test`` (DecGuard's
behaviour, unchanged). With it, every planned dataset is run through one backend with
``run_test`` (so each has a DecGuard report of its own), then measured by the core modules.
Which datasets are planned:

* ``--suite NAME``: that suite alone (its report is the command's report);
* ``--dataset PATH``: that file alone (as in DecGuard);
* neither: the contract's ``dataset`` first (or the first suite when it has none), then every
  other suite; a suite naming the same file as ``dataset`` is the main evaluation itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from decguard_pipeline.backends import Backend
from decguard_pipeline.core.contract import LoadedContract, load_contract
from decguard_pipeline.core.dataset import load_dataset
from decguard_pipeline.core.errors import ContractError
from decguard_pipeline.core.gates import Check
from decguard_pipeline.core.guard.extension import (
    GuardConfig,
    extension_metrics,
    guard_config,
    guard_enabled,
)
from decguard_pipeline.core.guard.gates import guard_checks
from decguard_pipeline.core.guard.render import render_guard
from decguard_pipeline.core.guard.sidecar import (
    build_sidecar,
    evaluation_entry,
    worst_status,
)
from decguard_pipeline.core.guard.suites import suite_summary
from decguard_pipeline.core.report.golden import Report
from decguard_pipeline.core.report.jsonio import write_document
from decguard_pipeline.core.report.sidecar import sidecar_path
from decguard_pipeline.runs.golden import make_backend, run_test

if TYPE_CHECKING:  # the cache's modules (Arrow, the warehouse) only for runs that use it
    from decguard_pipeline.runs.cache import CacheOptions


@dataclass
class SuiteRun:
    """One evaluated dataset: its DecGuard report and the extension's block and checks."""

    suite: str | None  # None: a dataset that is not one of the contract's suites
    report: Report
    block: dict[str, Any]
    checks: list[Check]

    @property
    def status(self) -> str:
        return worst_status(self.report.status, *(c["status"] for c in self.checks))


@dataclass
class GuardedRun:
    loaded: LoadedContract
    config: GuardConfig
    runs: list[SuiteRun]  # the main evaluation first
    summary: dict[str, Any] | None
    images: dict[str, dict[str, Path]] = field(default_factory=dict)  # per run index

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

    def write_files(self, report_path: str | Path) -> list[Path]:
        """The pictures and the sidecar next to the report at ``report_path``."""
        from decguard_pipeline.core.report.plots import write_images

        report_path = Path(report_path)
        stem = report_path.stem
        for index, run in enumerate(self.runs):
            name = stem if index == 0 else f"{stem}.{run.suite}"
            title = f"{self.loaded.contract.spec().name} · {run.suite or 'main'}"
            self.images[index] = write_images(run.block, report_path.parent, name, title=title)
        path = sidecar_path(report_path)
        write_document(path, self.document(report_path.name), what="pipeline results")
        return [*(p for images in self.images.values() for p in images.values()), path]


def plan_datasets(
    loaded: LoadedContract, *, suite: str | None, dataset: str | Path | None
) -> list[tuple[str | None, Path | None]]:
    """``(suite name or None, dataset path or None)`` in evaluation order; a None path is
    the contract's own ``dataset``, resolved as DecGuard resolves it."""
    pipeline = loaded.contract.pipeline
    named = pipeline.suites if pipeline is not None and pipeline.suites else {}
    suites = {name: loaded.resolve(path) for name, path in named.items()}
    if suite is not None:
        if dataset is not None:
            raise ContractError("use either --suite or --dataset, not both")
        if suite not in suites:
            known = ", ".join(suites) or "none (add pipeline.suites)"
            raise ContractError(
                f"{loaded.path}: unknown suite {suite!r}; the contract defines: {known}"
            )
        return [(suite, suites[suite])]
    if dataset is not None:
        return [(None, Path(dataset))]
    if loaded.contract.dataset is None:
        return list(suites.items()) or [(None, None)]
    main = loaded.resolve(loaded.contract.dataset).resolve()
    same = next((name for name, path in suites.items() if path.resolve() == main), None)
    plan: list[tuple[str | None, Path | None]] = [(same, None)]
    return plan + [(name, path) for name, path in suites.items() if name != same]


def measure(report: Report, config: GuardConfig, suite: str | None = None) -> SuiteRun:
    """The extension's metrics and checks for a DecGuard report's results."""
    block = extension_metrics(report.results, config)
    return SuiteRun(suite, report, block, guard_checks(block, config))


def run_guarded_test(
    contract: LoadedContract | str | Path,
    *,
    suite: str | None = None,
    dataset: str | Path | None = None,
    backend: str | Backend | None = None,
    max_concurrency: int | None = None,
    check_health_first: bool = True,
    mode: str = "test",
    seed: int | None = None,
    properties: Sequence[str] | None = None,
    minimize: bool | None = None,
    cache: CacheOptions | None = None,
) -> tuple[Report, GuardedRun | None]:
    """``run_test`` plus the guard extension; the run is None for contracts without it (and
    in fuzz mode, which has no golden metrics)."""
    loaded = contract if isinstance(contract, LoadedContract) else load_contract(contract)
    fuzz_args: dict[str, Any] = {"seed": seed, "properties": properties, "minimize": minimize}
    if mode == "fuzz" or not guard_enabled(loaded.contract):
        if suite is not None:
            raise ContractError(f"{loaded.path}: --suite needs pipeline.suites in the contract")
        report = run_test(
            loaded,
            dataset=dataset,
            backend=backend,
            max_concurrency=max_concurrency,
            check_health_first=check_health_first,
            mode=mode,
            cache=cache,
            **fuzz_args,
        )
        return report, None
    config = guard_config(loaded.contract, source=str(loaded.path))
    plan = plan_datasets(loaded, suite=suite, dataset=dataset)
    for _, path in plan[1:]:
        # a broken suite file fails now, not after the main dataset went through the model
        if path is not None:
            load_dataset(path, loaded.contract.spec())
    owned = not isinstance(backend, Backend)
    instance = make_backend(loaded, backend, cache=cache) if owned else backend  # type: ignore[arg-type]
    assert isinstance(instance, Backend)
    runs = []
    try:
        for index, (name, path) in enumerate(plan):
            report = run_test(
                loaded,
                dataset=path,
                backend=instance,
                max_concurrency=max_concurrency,
                check_health_first=check_health_first and index == 0,
                # properties are checked once, with the main dataset
                mode=mode if index == 0 else "test",
                **fuzz_args,
            )
            runs.append(measure(report, config, name))
    finally:
        if owned:
            instance.close()
    summary = None
    if len(runs) > 1:
        summary = suite_summary(
            [(r.suite or "main", r.report.results, r.block, r.status) for r in runs], config
        )
    return runs[0].report, GuardedRun(loaded, config, runs, summary)
