"""Resolve a contract's ``provider`` to a backend class.

Built-ins cannot be shadowed. Third-party providers are installed packages exposing a
:class:`Backend` subclass in the ``decguard.backends`` entry-point group: contracts never
name import paths.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from decguard_pipeline.backends.base import Backend
from decguard_pipeline.core.contract import BackendConfig, DecisionSpec
from decguard_pipeline.core.errors import ContractError

ENTRY_POINT_GROUP = "decguard.backends"
# provider -> (module, class); imported when first used, so a mock run never loads the
# HTTP clients (httpx alone pulls in ~0.1 s of imports)
BUILTIN: dict[str, tuple[str, str]] = {
    "mock": ("decguard_pipeline.backends.mock", "MockBackend"),
    "http": ("decguard_pipeline.backends.http", "HttpBackend"),
    "systemone": ("decguard_pipeline.backends.systemone", "SystemOneBackend"),
}


def entry_points(*, group: str, name: str | None = None) -> tuple[Any, ...]:
    """Installed plugins of ``group`` (importlib.metadata is imported only when needed)."""
    from importlib.metadata import entry_points as installed

    found = installed(group=group) if name is None else installed(group=group, name=name)
    return tuple(found)


def available_providers() -> list[str]:
    plugins = {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)}
    return sorted(set(BUILTIN) | plugins)


def backend_class(provider: str) -> type[Backend]:
    if provider in BUILTIN:
        module, name = BUILTIN[provider]
        found: type[Backend] = getattr(import_module(module), name)
        return found
    found = tuple(entry_points(group=ENTRY_POINT_GROUP, name=provider))
    if not found:
        raise ContractError(
            f"unknown backend provider {provider!r}; available: {', '.join(available_providers())}"
        )
    entry_point = found[0]
    try:
        loaded = entry_point.load()
    except Exception as exc:
        raise ContractError(
            f"cannot load backend provider {provider!r} from {entry_point.value}: {exc}"
        ) from exc
    if not (isinstance(loaded, type) and issubclass(loaded, Backend)):
        raise ContractError(
            f"backend provider {provider!r} ({entry_point.value}) is not a decguard_pipeline "
            "Backend"
        )
    return loaded


def create_backend(
    config: BackendConfig, *, decision: DecisionSpec, name: str = "default"
) -> Backend:
    """Build a backend from contract configuration. No network I/O."""
    return backend_class(config.provider).from_config(config, name=name, decision=decision)
