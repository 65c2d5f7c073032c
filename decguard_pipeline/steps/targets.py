"""Targets: ``<backend>@<model_version>``, the partition keys of every evaluation asset."""

from __future__ import annotations

import hashlib
import re
from dataclasses import asdict, dataclass
from typing import Any

from decguard_pipeline.core.contract import LoadedContract
from decguard_pipeline.core.decision import DecisionRequest
from decguard_pipeline.core.errors import DecGuardError

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
MAX_VERSION_CHARS = 64
UNVERSIONED = "unversioned"


def sanitise_version(version: str) -> str:
    """A version as a key segment: ``[A-Za-z0-9._-]``, at most 64 characters (a long one is
    cut and suffixed with a short hash so that two versions never collide)."""
    clean = _UNSAFE.sub("-", version).strip("-.") or UNVERSIONED
    if clean != version or len(clean) > MAX_VERSION_CHARS:
        digest = hashlib.sha256(version.encode()).hexdigest()[:8]
        clean = (
            f"{clean[: MAX_VERSION_CHARS - 9]}-{digest}"
            if len(clean) > MAX_VERSION_CHARS
            else clean
        )
    return clean


def target_key(backend: str, version: str) -> str:
    return f"{backend}@{sanitise_version(version)}"


def backend_of(key: str) -> str:
    """The contract backend name of a target key (backend names cannot contain ``@``)."""
    return key.split("@", 1)[0]


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
