"""The identity of a backend as the response cache keys its answers (core/cache/key.py), from
a run's backend and contract: what a key is made of, and what a report records of the backend
that answered it (``answered_with``) so that ``--retry-errors`` can check a run against it.
Light on purpose: a run without the cache records ``answered_with`` (a report with errors)
without importing the cache's storage."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from decguard_pipeline.backends.base import Backend
from decguard_pipeline.core.cache.key import Identity, key_settings
from decguard_pipeline.core.contract import LoadedContract
from decguard_pipeline.core.errors import ContractError
from decguard_pipeline.demo.autostart import stable_url


def key_settings_of(backend: Backend, loaded: LoadedContract) -> dict[str, Any]:
    """The backend's settings as they enter a key: its validated settings (defaults filled, the
    default prompt written out, so a change of either changes the key) when it has them,
    else the contract's section for it. The address of a demo server the command started
    on a free port enters as the server's name (demo/autostart.py: ``stable_url``)."""
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
    settings = {k: stable_url(v) if isinstance(v, str) else v for k, v in settings.items()}
    return key_settings(settings)


def identity_of(backend: Backend, loaded: LoadedContract, version: str = "") -> Identity:
    """The backend as the cache keys its answers (``version``: the model version)."""
    return Identity(
        backend.provider,
        backend.model,
        key_settings_of(backend, loaded),
        version,
        loaded.contract.spec(),
    )


def answered_with(backend: Backend, loaded: LoadedContract) -> dict[str, Any] | None:
    """What a report records of the backend that answered it (``Identity.fingerprint``, the
    sidecar section ``answered_with``): what ``--retry-errors`` checks a run against. None
    for a backend the cache cannot identify."""
    try:
        return identity_of(backend, loaded).fingerprint()
    except ContractError:
        return None
