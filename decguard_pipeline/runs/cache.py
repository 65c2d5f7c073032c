"""A run's response cache: which warehouse keeps the answers, how the backend is identified,
and where the answers of ``--retry-errors`` come from. Shared by the CLI (``--cache DIR``,
``$DECGUARD_CACHE``, ``--no-cache``, ``--retry-errors``) and the pipeline's steps
(``steps/cache.py``), which attach it to the backend they make for a run."""

from __future__ import annotations

import os
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from decguard_pipeline.backends.base import Backend
from decguard_pipeline.backends.cache import AnswerSource, AnswerStore, ResponseCache
from decguard_pipeline.core.cache.summary import CacheStats
from decguard_pipeline.core.contract import LoadedContract
from decguard_pipeline.core.target_key import target_key
from decguard_pipeline.runs.cache_identity import identity_of, key_settings_of
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline.warehouse.locations import Location, location
from decguard_pipeline.warehouse.responses import PUBLISH_EVERY_S, ResponseTable


class RetrySource(AnswerSource, Protocol):
    """The answers of ``--retry-errors`` (``runs/retry.ReportAnswers``)."""

    def check_backend(self, fingerprint: dict[str, Any], loaded: LoadedContract) -> None:
        """Raise ContractError unless the report's answers were made as ``fingerprint``."""
        ...


ENV_CACHE = "DECGUARD_CACHE"


@dataclass
class CacheOptions:
    """How a run uses the cache. ``directory``: the warehouse that keeps the answers (None:
    no cache); ``retry``: the answers of a stored report (``--retry-errors``); ``contract``:
    the contract's warehouse key; ``target``/``version``: the pipeline's target and its model
    version (the command line finds the version itself)."""

    directory: Location | None
    contract: str
    run_id: str = field(default_factory=lambda: f"cli-{uuid.uuid4().hex[:12]}")
    retry: RetrySource | None = None
    retry_path: str | None = None
    target: str | None = None
    version: str | None = None
    max_age_days: float | None = None
    sample: int = 0  # nondeterministic scoring: the index of the draw this run makes
    publish_every_s: float = PUBLISH_EVERY_S  # answers received are stored at least this often
    stats: CacheStats = field(default_factory=CacheStats)

    def __post_init__(self) -> None:
        self.stats.directory = None if self.directory is None else str(self.directory)
        self.stats.retry_report = self.retry_path
        if self.stats.on_warning is None:
            self.stats.on_warning = _to_stderr

    @property
    def active(self) -> bool:
        return self.directory is not None or self.retry is not None


def _to_stderr(message: str) -> None:
    """A cache warning, the moment it happens (the run goes on)."""
    sys.stderr.write(f"warning: {message}\n")
    sys.stderr.flush()


def cache_directory(cache: str | os.PathLike[str] | None, *, no_cache: bool) -> Location | None:
    """``--cache DIR``, else ``$DECGUARD_CACHE``; None with ``--no-cache`` or neither. A
    location as a warehouse reads it: a folder, or ``s3://bucket/prefix`` (StorageError,
    exit 2, for any other URL)."""
    if no_cache:
        return None
    value = cache if cache is not None else os.environ.get(ENV_CACHE)
    if not value:
        return None
    text = os.fspath(value)
    return location(text) if "://" in text else Path(text)  # a folder: as given


def attach_cache(backend: Backend, loaded: LoadedContract, options: CacheOptions) -> Backend:
    """Route ``backend``'s answers through the cache of ``options`` (returns the backend)."""
    if not options.active:
        return backend
    settings = key_settings_of(backend, loaded)
    if options.retry is not None:  # before anything is asked: the same backend, or exit 2
        options.retry.check_backend(identity_of(backend, loaded).fingerprint(), loaded)
    warehouse = None if options.directory is None else Warehouse(options.directory)

    def open_store(version: str) -> AnswerStore:
        assert warehouse is not None
        return ResponseTable(
            warehouse,
            contract=options.contract,
            target=options.target or target_key(backend.name, version),
            run_id=options.run_id,
            backend=backend.name,
            provider=backend.provider,
            version=version,
            max_age_days=options.max_age_days,
            publish_every_s=options.publish_every_s,
            events=options.stats,
        )

    options.stats.pricing = getattr(getattr(backend, "settings", None), "pricing", None)
    backend.response_cache = ResponseCache(
        provider=backend.provider,
        model=backend.model,
        settings=settings,
        decision=loaded.contract.spec(),
        open_store=open_store if warehouse is not None else None,
        version=options.version,
        sources=[options.retry] if options.retry is not None else [],
        stats=options.stats,
        sample=options.sample,
    )
    return backend
