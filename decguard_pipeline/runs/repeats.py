"""``pipeline.repeats``: the extra asks of a golden run and its ``consistency`` section.

Repetition 0 is the run's own evaluation, decided before (and exactly as without repeats, so
DecGuard's report is what one ask gives); :func:`ask_repeats` asks every case again
``count - 1`` times through the same backend, each repetition under its own sample index of
the response cache when the backend has one (``backends/cache.py``): a cached run replays each
repetition's own answers, an uncached one asks afresh. Shared by ``runs/golden.py`` (``test``,
``test --all``) and the pipeline's golden step; no Dagster import.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from decguard_pipeline.backends import Backend
from decguard_pipeline.backends.runner import run_cases
from decguard_pipeline.core.consistency.section import consistency_section
from decguard_pipeline.core.contract import Contract, LoadedContract
from decguard_pipeline.core.contract.repeats import RepeatsSettings
from decguard_pipeline.core.dataset import Dataset
from decguard_pipeline.core.results import CaseResults


def repeats_settings(contract: Contract) -> RepeatsSettings | None:
    """The contract's ``pipeline.repeats`` (None: one ask per case, DecGuard's behaviour)."""
    return None if contract.pipeline is None else contract.pipeline.repeats


@contextmanager
def repetition(backend: Backend, index: int) -> Iterator[None]:
    """Batches sent meanwhile are repetition ``index`` for the backend's response cache."""
    cache = backend.response_cache
    if cache is None:
        yield
        return
    cache.repetition = index
    try:
        yield
    finally:
        cache.repetition = 0


def ask_repeats(
    loaded: LoadedContract,
    data: Dataset,
    backend: Backend,
    first: CaseResults,
    *,
    max_concurrency: int | None = None,
) -> dict[str, Any] | None:
    """The ``consistency`` section of a run whose own answers are ``first``: every case of
    ``data`` asked again ``count - 1`` times. None when the contract has no repeats. Errors
    of an extra ask are that case's, counted in the section; a repetition whose every case
    errored is reported, not raised (the run's own answers already exist)."""
    settings = repeats_settings(loaded.contract)
    if settings is None:
        return None
    evaluation = loaded.contract.evaluation
    repetitions = [first]
    for index in range(1, settings.count):
        with repetition(backend, index):
            repetitions.append(
                run_cases(
                    backend,
                    loaded.contract.spec(),
                    data,
                    max_concurrency=max_concurrency or evaluation.max_concurrency,
                    tolerance=evaluation.probability_tolerance,
                )
            )
    return consistency_section(repetitions, settings)
