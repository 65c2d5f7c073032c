"""A run's response cache: which warehouse keeps the answers, how the backend is identified,
and where the answers of ``--retry-errors`` come from. Shared by the CLI (``--cache DIR``,
``$DECGUARD_CACHE``, ``--no-cache``, ``--retry-errors``) and the pipeline's steps
(``steps/cache.py``), which attach it to the backend they make for a run."""

from __future__ import annotations

import hashlib
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from decguard_pipeline.backends.base import Backend
from decguard_pipeline.backends.cache import AnswerSource, AnswerStore, ResponseCache
from decguard_pipeline.core.cache.key import key_settings
from decguard_pipeline.core.cache.summary import CacheStats
from decguard_pipeline.core.contract import LoadedContract
from decguard_pipeline.core.errors import ContractError
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline.warehouse.responses import ResponseTable

ENV_CACHE = "DECGUARD_CACHE"
UNVERSIONED = "unversioned"
MAX_TARGET_CHARS = 120


@dataclass
class CacheOptions:
    """How a run uses the cache. ``directory``: the warehouse that keeps the answers (None:
    no cache); ``retry``: the answers of a stored report (``--retry-errors``); ``contract``:
    the contract's warehouse key; ``target``/``version``: the pipeline's target and its model
    version (the command line finds the version itself)."""

    directory: Path | None
    contract: str
    run_id: str = field(default_factory=lambda: f"cli-{uuid.uuid4().hex[:12]}")
    retry: AnswerSource | None = None
    retry_path: str | None = None
    target: str | None = None
    version: str | None = None
    max_age_days: float | None = None
    sample: int = 0  # nondeterministic scoring: the index of the draw this run makes
    stats: CacheStats = field(default_factory=CacheStats)

    def __post_init__(self) -> None:
        self.stats.directory = None if self.directory is None else str(self.directory)
        self.stats.retry_report = self.retry_path

    @property
    def active(self) -> bool:
        return self.directory is not None or self.retry is not None


def cache_directory(cache: Path | None, *, no_cache: bool) -> Path | None:
    """``--cache DIR``, else ``$DECGUARD_CACHE``; None with ``--no-cache`` or neither."""
    if no_cache:
        return None
    if cache is not None:
        return cache
    value = os.environ.get(ENV_CACHE)
    return Path(value) if value else None


def cache_target(backend: str, version: str) -> str:
    """The partition of a command-line cache: ``<backend>@<version>`` (``unversioned`` when
    the backend reports none; a long version is cut and suffixed with a hash)."""
    value = f"{backend}@{version or UNVERSIONED}"
    if len(value) > MAX_TARGET_CHARS:
        digest = hashlib.sha256(value.encode()).hexdigest()[:12]
        value = f"{value[: MAX_TARGET_CHARS - 13]}-{digest}"
    return value


def key_settings_of(backend: Backend, loaded: LoadedContract) -> dict[str, Any]:
    """The backend's settings as they enter a key: its validated settings (defaults filled, the
    default prompt written out, so a change of either changes the key) when it has them,
    else the contract's section for it."""
    model = getattr(backend, "settings", None)
    if isinstance(model, BaseModel):
        settings = model.model_dump(mode="json")
        default_prompt = getattr(model, "default_prompt", None)
        if settings.get("prompt") is None and callable(default_prompt):
            settings["prompt"] = default_prompt()
    elif backend.name in loaded.contract.backend_names():
        settings = loaded.contract.backend_config(backend.name).settings
    else:
        raise ContractError(
            f"the response cache cannot identify backend {backend.name!r}: it is not one of "
            "the contract's backends and has no settings of its own; run it with --no-cache"
        )
    return key_settings(settings)


def attach_cache(backend: Backend, loaded: LoadedContract, options: CacheOptions) -> Backend:
    """Route ``backend``'s answers through the cache of ``options`` (returns the backend)."""
    if not options.active:
        return backend
    warehouse = None if options.directory is None else Warehouse(options.directory)

    def open_store(version: str) -> AnswerStore:
        assert warehouse is not None
        return ResponseTable(
            warehouse,
            contract=options.contract,
            target=options.target or cache_target(backend.name, version),
            run_id=options.run_id,
            backend=backend.name,
            provider=backend.provider,
            version=version,
            max_age_days=options.max_age_days,
        )

    options.stats.pricing = getattr(getattr(backend, "settings", None), "pricing", None)
    backend.response_cache = ResponseCache(
        provider=backend.provider,
        model=backend.model,
        settings=key_settings_of(backend, loaded),
        decision=loaded.contract.spec(),
        open_store=open_store if warehouse is not None else None,
        version=options.version,
        sources=[options.retry] if options.retry is not None else [],
        stats=options.stats,
        sample=options.sample,
    )
    return backend
