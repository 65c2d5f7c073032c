"""Targets: ``<backend>@<model_version>``, the partition keys of every evaluation asset."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from decguard_pipeline.core.contract import LoadedContract
from decguard_pipeline.core.decision import DecisionRequest
from decguard_pipeline.core.errors import DecGuardError
from decguard_pipeline.core.target_key import (  # the one rule (core/target_key.py)
    MAX_VERSION_CHARS,
    UNVERSIONED,
    backend_of,
    sanitise_version,
    target_key,
)

__all__ = [
    "MAX_VERSION_CHARS",
    "UNVERSIONED",
    "Target",
    "backend_of",
    "discover_target",
    "discover_targets",
    "sanitise_version",
    "target_key",
]


@dataclass(frozen=True)
class Target:
    key: str
    backend: str
    provider: str
    model: str | None
    model_version: str | None  # raw, as the backend reported it
    version_source: str  # contract | health | server | probe | canary | model | none

    def as_row(self) -> dict[str, Any]:
        return asdict(self)


def discover_target(
    loaded: LoadedContract, backend_name: str, *, canary_input: Any = None
) -> Target:
    """Which version a backend serves now: its configuration or health answer, else the
    ``model_version`` of a one-case canary decision, else its configured model name.

    Raises DecGuardError when the backend is unhealthy or the canary fails."""
    from decguard_pipeline.runs.golden import check_health, make_backend

    backend = make_backend(loaded, backend_name)
    try:
        check_health(backend)
        version, source = backend.version_hint(), backend.version_hint_source()
        if version is None and canary_input is not None:
            spec = loaded.contract.spec()
            result = backend.decide(
                DecisionRequest("canary", spec, canary_input),
                tolerance=loaded.contract.evaluation.probability_tolerance,
            )
            version, source = result["model_version"], "canary"
            model = result["model"]
        else:
            model = backend.model
    except DecGuardError:
        raise
    except Exception as exc:  # a failing canary: the backend is not usable now
        raise DecGuardError(f"backend {backend_name!r}: canary decision failed: {exc}") from exc
    finally:
        backend.close()
    if version is None:
        version, source = (model, "model") if model else (UNVERSIONED, "none")
        reported = None
    else:
        reported = version
    provider = loaded.contract.backend_config(backend_name).provider
    return Target(
        target_key(backend_name, version), backend_name, provider, model, reported, source
    )


def discover_targets(
    loaded: LoadedContract, *, canary_input: Any = None, backends: list[str] | None = None
) -> tuple[list[Target], dict[str, str]]:
    """Current targets of every backend, and the backends skipped with the reason."""
    targets, skipped = [], {}
    for name in backends or loaded.contract.backend_names():
        try:
            targets.append(discover_target(loaded, name, canary_input=canary_input))
        except DecGuardError as exc:
            skipped[name] = str(exc)
    return targets, skipped
