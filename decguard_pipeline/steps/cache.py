"""The response cache of a target's evaluation in the warehouse (docs/cache.md): on unless the
contract says ``pipeline.cache.enabled: false``. The answers go to the warehouse's
``responses`` table under the target's partition, keyed with the target's model version, so
a run retried after a failure or a kill, or the nightly run on an unchanged version, asks only
what is missing, and a new version (a new target) asks everything."""

from __future__ import annotations

from decguard_pipeline.core.contract.cache import CacheSettings
from decguard_pipeline.runs.cache import CacheOptions
from decguard_pipeline.steps.base import Step
from decguard_pipeline.steps.contracts import ContractEntry


def cache_settings(entry: ContractEntry) -> CacheSettings:
    pipeline = entry.require().contract.pipeline
    return (pipeline.cache if pipeline is not None else None) or CacheSettings()


def target_cache(entry: ContractEntry, target: str, step: Step) -> CacheOptions | None:
    """What ``runs.golden.make_backend(..., cache=)`` takes for a run of ``target``; None when
    the contract turns the cache off."""
    settings = cache_settings(entry)
    if not settings.enabled:
        return None
    return CacheOptions(
        step.warehouse.root,
        entry.key,
        run_id=step.run_id,
        target=target,
        version=target.split("@", 1)[1],
        max_age_days=settings.max_age_days,
    )
