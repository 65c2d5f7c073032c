"""``test`` with the guard extension: suites, extension metrics and checks, the sidecar and the
pictures. One flow (:func:`run_guarded`) for the CLI and the ``guard_metrics`` step; no Dagster,
no warehouse.

A contract without the extension goes straight to ``runs.golden.run_test`` (DecGuard's
behaviour, unchanged). With it, every planned dataset is decided through one backend (so each
has a DecGuard report of its own), then measured by the core modules (``core/guard/``); the
step hands in the main dataset's report it read from the warehouse instead of deciding it again.
Which datasets are planned:

* ``--suite NAME``: that suite alone (its report is the command's report);
* ``--dataset PATH``: that file alone (as in DecGuard);
* neither: the contract's ``dataset`` first (or the first suite when it has none), then every
  other suite; a suite naming the same file as ``dataset`` is the main evaluation itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, Unpack

from decguard_pipeline.backends import Backend
from decguard_pipeline.core.contract import LoadedContract, load_contract
from decguard_pipeline.core.dataset import load_dataset
from decguard_pipeline.core.errors import ContractError
from decguard_pipeline.core.guard.eval_harness import HarnessRun, harness_run, positive_label
from decguard_pipeline.core.guard.evaluation import MAIN, GuardedRun, measure
from decguard_pipeline.core.guard.extension import GuardConfig, guard_config, guard_enabled
from decguard_pipeline.core.guard.suites import suite_summary
from decguard_pipeline.core.report.golden import Report, build_report, dataset_info
from decguard_pipeline.runs.golden import check_health, decide_dataset, make_backend, run_test

if TYPE_CHECKING:  # the cache's modules (Arrow, the warehouse) only for runs that use it
    from decguard_pipeline.core.calibration.artifact import LoadedCalibrator
    from decguard_pipeline.runs.cache import CacheOptions


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


class RunOptions(TypedDict, total=False):
    """``run_test``'s settings besides the dataset and backend (its defaults apply)."""

    max_concurrency: int | None
    check_health_first: bool
    mode: str  # test | fuzz | all
    seed: int | None
    properties: Sequence[str] | None
    minimize: bool | None
    cache: CacheOptions | None  # the response cache of a backend made here
    calibrator: LoadedCalibrator | None  # decisions are calibrated (runs/calibrator.py)


def run_guarded_test(
    contract: LoadedContract | str | Path,
    *,
    suite: str | None = None,
    dataset: str | Path | None = None,
    backend: str | Backend | None = None,
    **options: Unpack[RunOptions],
) -> tuple[Report, GuardedRun | None]:
    """``run_test`` plus the guard extension; the run is None for contracts without it (and
    in fuzz mode, which has no golden metrics)."""
    loaded = contract if isinstance(contract, LoadedContract) else load_contract(contract)
    if options.get("mode") == "fuzz" or not guard_enabled(loaded.contract):
        if suite is not None:
            raise ContractError(f"{loaded.path}: --suite needs pipeline.suites in the contract")
        return run_test(loaded, dataset=dataset, backend=backend, **options), None
    config = guard_config(loaded.contract, source=str(loaded.path))
    plan = plan_datasets(loaded, suite=suite, dataset=dataset)
    guarded = run_guarded(loaded, config, plan, backend=backend, **options)
    return guarded.report, guarded


def run_guarded(
    loaded: LoadedContract,
    config: GuardConfig,
    plan: list[tuple[str | None, Path | None]],
    *,
    backend: str | Backend | None,
    main: Report | None = None,
    **options: Unpack[RunOptions],
) -> GuardedRun:
    """Every dataset of ``plan`` (as :func:`plan_datasets` makes it) evaluated and measured
    by the extension: what ``test`` and the ``guard_metrics`` step both run.

    ``main``: the main dataset's DecGuard report when it is already built (the step reads
    the target's evaluation from the warehouse); without it the main dataset goes through
    ``run_test`` here with ``options`` (the mode and fuzz settings apply to it alone:
    properties are checked once, with the main dataset). The other suites are decided through
    the same backend instance, with ``max_concurrency``; its health is checked once, before
    the first case it decides, unless ``check_health_first`` is false."""
    spec = loaded.contract.spec()
    # every suite file is loaded before the first model call: a broken one fails now, not
    # after the main dataset went through the model (only the main entry has no path)
    others = [(name, load_dataset(path, spec)) for name, path in plan[1:] if path is not None]
    reports = [] if main is None else [main]
    if main is None or others:
        owned = not isinstance(backend, Backend)
        cache = options.get("cache")
        instance = make_backend(loaded, backend, cache=cache) if owned else backend  # type: ignore[arg-type]
        assert isinstance(instance, Backend)
        try:
            health = None
            if main is None:
                reports.append(run_test(loaded, dataset=plan[0][1], backend=instance, **options))
            elif options.get("check_health_first", True):
                health = check_health(instance)
            concurrency = options.get("max_concurrency")
            calibrator = options.get("calibrator")
            for _, data in others:
                results = decide_dataset(loaded, data, instance, max_concurrency=concurrency)
                info = dataset_info(str(data.path), data.hash, len(data), data.n_labeled)
                meta = instance.metadata()
                if calibrator is not None:  # as the main dataset's decisions are
                    from decguard_pipeline.runs.calibrator import calibrate

                    results = calibrate(results, calibrator, meta)
                reports.append(build_report(loaded, info, meta, results, health=health))
        finally:
            if owned:
                instance.close()
    runs = [measure(report, config, name) for (name, _), report in zip(plan, reports, strict=True)]
    summary = None
    if len(runs) > 1:
        summary = suite_summary(
            [(r.label, r.report.results, r.block, r.status) for r in runs], config
        )
    return GuardedRun(loaded, config, runs, summary)


def harness_config(loaded: LoadedContract) -> GuardConfig:
    """The guard settings a Guard Eval Harness run is written with; a ``ContractError`` (the
    file and field) before any model call when they do not name one positive label."""
    config = guard_config(loaded.contract, source=str(loaded.path))
    positive_label(config, str(loaded.path))
    return config


def harness_files(
    loaded: LoadedContract,
    config: GuardConfig,
    report: Report,
    guarded: GuardedRun | None,
    *,
    target: str,
    dataset: str | Path | None = None,
) -> HarnessRun:
    """The Guard Eval Harness run of a ``test`` or ``fuzz``: every suite of a guarded run;
    else its one report (``fuzz``, or a contract without the extension) under the name of
    the suite its dataset is, or ``main``."""
    if guarded is not None:
        evaluated = [(run.label, run.report) for run in guarded.runs]
    else:
        name = plan_datasets(loaded, suite=None, dataset=dataset)[0][0]
        evaluated = [(name or MAIN, report)]
    return harness_run(evaluated, config, target=target, source=str(loaded.path))
