"""Run a contract's golden dataset (and, in fuzz modes, its properties) against a backend.

Shared by the CLI and the Dagster assets; no Dagster import. Raises ``DecGuardError`` for
anything that prevents an evaluation; failing gates are reported, not raised.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from decguard_pipeline.backends import Backend, create_backend
from decguard_pipeline.backends.runner import run_cases
from decguard_pipeline.core.cache.key import ANSWERED_WITH
from decguard_pipeline.core.consistency.section import SECTION as CONSISTENCY
from decguard_pipeline.core.contract import DEFAULT_BACKEND, LoadedContract, load_contract
from decguard_pipeline.core.dataset import Dataset, load_dataset
from decguard_pipeline.core.errors import ContractError, DecGuardError
from decguard_pipeline.core.report.golden import Report, build_report, dataset_info
from decguard_pipeline.core.results import CaseResults
from decguard_pipeline.core.usage import USAGE, run_cost, usage_extension, usage_section
from decguard_pipeline.runs.repeats import ask_repeats

if TYPE_CHECKING:
    from decguard_pipeline.core.calibration.artifact import LoadedCalibrator
    from decguard_pipeline.runs.cache import CacheOptions


def resolve_dataset(loaded: LoadedContract, dataset: str | Path | None) -> Dataset:
    """``dataset`` when given (relative to the working directory), else the contract's own
    (relative to the contract)."""
    if dataset is not None:
        path = Path(dataset)
    elif loaded.contract.dataset is not None:
        path = loaded.resolve(loaded.contract.dataset)
    else:
        raise ContractError(
            f"{loaded.path}: no dataset given; set 'dataset' in the contract or pass --dataset"
        )
    return load_dataset(path, loaded.contract.spec())


def make_backend(
    loaded: LoadedContract, name: str | None, *, cache: CacheOptions | None = None
) -> Backend:
    """The contract's backend ``name``; with ``cache``, its answers go through the response
    cache (``runs/cache.py``)."""
    contract = loaded.contract
    backend = create_backend(
        contract.backend_config(name), decision=contract.spec(), name=name or DEFAULT_BACKEND
    )
    if cache is not None:
        from decguard_pipeline.runs.cache import attach_cache

        attach_cache(backend, loaded, cache)
    return backend


def check_health(backend: Backend) -> dict[str, str]:
    status = backend.healthcheck()
    if status["status"] == "unhealthy":
        raise DecGuardError(f"backend {backend.name!r} is unhealthy: {status['detail']}")
    return status


def decide_dataset(
    loaded: LoadedContract, data: Dataset, backend: Backend, *, max_concurrency: int | None = None
) -> CaseResults:
    """Every case through the backend; exit-2 error when every single case failed."""
    evaluation = loaded.contract.evaluation
    results = run_cases(
        backend,
        loaded.contract.spec(),
        data,
        max_concurrency=max_concurrency or evaluation.max_concurrency,
        tolerance=evaluation.probability_tolerance,
    )
    if len(results) and not results.ok.any():
        raise DecGuardError(
            f"backend {backend.name!r} failed on every case; first error: "
            f"{results.error_kind[0]}: {results.error_message[0]}"
        )
    return results


def run_test(
    contract: LoadedContract | str | Path,
    *,
    dataset: str | Path | None = None,
    backend: str | Backend | None = None,
    max_concurrency: int | None = None,
    check_health_first: bool = True,
    mode: str = "test",
    seed: int | None = None,
    properties: Sequence[str] | None = None,
    minimize: bool | None = None,
    cache: CacheOptions | None = None,
    calibrator: LoadedCalibrator | None = None,
    fit_method: str | None = None,
) -> Report:
    """The ``decguard test`` / ``fuzz`` / ``test --all`` pipeline (``cache``: the response
    cache of a backend this function makes; a backend passed in brings its own).

    ``calibrator``: decisions are calibrated by it (``runs/calibrator.py``); the report is the
    calibrated decider's, the ``calibrated`` section holds the raw numbers beside. A contract
    with calibrator keys (or ``fit_method``: ``calibrate``'s ``--method``, "" for the
    contract's) also fits and judges a calibrator on the raw answers."""
    loaded = contract if isinstance(contract, LoadedContract) else load_contract(contract)
    fuzz_plan: Any = None
    if mode != "test":
        from decguard_pipeline.runs.properties import plan_properties

        fuzz_plan = plan_properties(loaded, properties, seed=seed, minimize=minimize)
    data = resolve_dataset(loaded, dataset)
    fitting = mode != "fuzz" and (fit_method is not None or fits_calibrator(loaded))
    calibrators: Any = None
    calibration_data = None
    if fitting or calibrator is not None:  # the calibration modules only for runs that use them
        from decguard_pipeline.runs import calibrator as calibrators

        if fitting:
            calibration_data = calibrators.calibration_dataset(
                loaded, forced=fit_method is not None
            )
    owned = not isinstance(backend, Backend)
    instance = make_backend(loaded, backend, cache=cache) if owned else backend  # type: ignore[arg-type]
    assert isinstance(instance, Backend)
    try:
        health = check_health(instance) if check_health_first else None
        results = decide_dataset(loaded, data, instance, max_concurrency=max_concurrency)
        calibration = None
        if calibration_data is not None:
            calibration = decide_dataset(
                loaded, calibration_data, instance, max_concurrency=max_concurrency
            )
        property_section = property_checks = None
        if fuzz_plan is not None:
            from decguard_pipeline.runs.properties import run_properties

            outcome = run_properties(
                fuzz_plan, loaded, instance, results, max_concurrency=max_concurrency
            )
            property_section, property_checks = outcome
        metadata = instance.metadata()  # before the repeats: the report is one ask's
        consistency = None  # pipeline.repeats: golden runs only (fuzz has no golden metrics)
        if mode != "fuzz":
            consistency = ask_repeats(
                loaded, data, instance, results, max_concurrency=max_concurrency
            )
        usage = usage_of(instance, results)  # the counters cover every request of the run
        answered = _answered_with(loaded, instance, results)
    finally:
        if owned:
            instance.close()
    raw = results
    if calibrator is not None:
        results = calibrators.calibrate(raw, calibrator, metadata)
    report = build_report(
        loaded,
        dataset_info(str(data.path), data.hash, len(data), data.n_labeled),
        metadata,
        results,
        health=health,
        mode=mode,
        properties=property_section,
        property_checks=property_checks,
    )
    if fuzz_plan is not None:
        report.extensions["properties"] = outcome.pipeline  # sidecar section, not DecGuard's
    add_golden_statistics(loaded, report)
    add_usage(loaded, report, usage)
    add_calibration(loaded, report)
    if calibrator is not None and mode != "fuzz":
        section = calibrators.calibrated_section(loaded, calibrator, raw, report)
        report.extensions[calibrators.CALIBRATED] = section
    if fitting:
        calibrators.fit_for_report(
            loaded,
            report,
            raw,
            calibration=calibration,
            calibration_data=calibration_data,
            method=fit_method or None,
        )
    if consistency is not None:
        report.extensions[CONSISTENCY] = consistency
    if answered is not None:
        report.extensions[ANSWERED_WITH] = answered
    return report


def fits_calibrator(loaded: LoadedContract) -> bool:
    """Whether the contract's golden runs fit and judge a calibrator (calibrator keys under
    ``pipeline.calibration``)."""
    pipeline = loaded.contract.pipeline
    settings = pipeline.calibration if pipeline is not None else None
    return settings is not None and settings.fits_calibrator


def _answered_with(
    loaded: LoadedContract, backend: Backend, results: CaseResults
) -> dict[str, Any] | None:
    """The fingerprint of the backend that answered (runs/cache_identity.py), for a report
    that ``--retry-errors`` may be given: one with errored cases, or one a cache served;
    else None (a clean run's sidecar stays as it was)."""
    if backend.response_cache is None and bool(results.ok.all()):
        return None
    from decguard_pipeline.runs.cache_identity import answered_with

    return answered_with(backend, loaded)


def usage_of(backend: Backend, results: CaseResults) -> dict[str, Any]:
    """The run's tokens and cost (the golden cases') and the backend's request counters, as
    the ``usage`` section (core/usage.py); read before the backend is closed."""
    pricing = backend.pricing()
    cost = run_cost(results.prompt_tokens, results.completion_tokens, pricing, decided=results.ok)
    return usage_section(cost, pricing, backend.run_stats())


def add_usage(loaded: LoadedContract, report: Report, usage: dict[str, Any] | None) -> None:
    """The ``usage`` sidecar section with the contract's cost gates checked (fuzz runs check
    no golden gates), when the run used anything worth saying or a cost gate is set."""
    section = usage_extension(loaded.contract, usage, gated=report.mode != "fuzz")
    if section is not None:
        report.extensions[USAGE] = section


def add_golden_statistics(loaded: LoadedContract, report: Report) -> None:
    """With ``pipeline.statistics``: the golden metrics' intervals as a sidecar section."""
    from decguard_pipeline.core.golden.statistics import golden_statistics, statistics_settings

    settings = statistics_settings(loaded.contract)
    if settings is not None and report.mode != "fuzz":
        report.extensions["statistics"] = golden_statistics(
            report.results, report.document["metrics"], settings
        )


def add_calibration(loaded: LoadedContract, report: Report) -> None:
    """With ``pipeline.calibration_measures`` (or a calibration gate): the calibration
    measures and checks as the sidecar section ``calibration``; fuzz reports have no golden
    metrics and get none."""
    from decguard_pipeline.core.calibration.extension import SECTION, calibration_extension

    if report.mode == "fuzz":
        return
    section = calibration_extension(report.results, loaded.contract)
    if section is not None:
        report.extensions[SECTION] = section
