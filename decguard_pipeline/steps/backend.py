"""The backend a step asks: the target's, through its response cache (``steps/cache.py``),
health-checked before its first case. Within a target run (``Step.shared``) it is the run's
one backend, built and checked once for every part that asks the model (the golden cases,
the properties, the other suites, the calibration dataset) and closed when the run's parts
are done; a step called on its own makes one and closes it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from decguard_pipeline.backends.base import Backend
from decguard_pipeline.runs.cache import CacheOptions
from decguard_pipeline.steps.base import Step
from decguard_pipeline.steps.cache import target_cache
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.steps.targets import backend_of


@dataclass
class TargetBackend:
    backend: Backend
    health: dict[str, str]
    cache: CacheOptions | None  # None: the contract turns the cache off


@contextmanager
def target_backend(entry: ContractEntry, target: str, step: Step) -> Iterator[TargetBackend]:
    """The target's backend and its health answer; an unhealthy backend raises
    ``DecGuardError`` (``runs.golden.check_health``) before anything is asked."""
    from decguard_pipeline.runs.golden import check_health, make_backend

    shared = step.shared
    if shared is not None and shared.backend is not None:
        assert shared.health is not None
        yield TargetBackend(shared.backend, shared.health, shared.cache)
        return
    cache = target_cache(entry, target, step)
    backend = make_backend(entry.require(), backend_of(target), cache=cache)
    try:
        health = check_health(backend)
    except BaseException:
        backend.close()
        raise
    if shared is not None:  # the run closes it
        shared.backend, shared.health, shared.cache = backend, health, cache
        yield TargetBackend(backend, health, cache)
        return
    try:
        yield TargetBackend(backend, health, cache)
    finally:
        backend.close()
