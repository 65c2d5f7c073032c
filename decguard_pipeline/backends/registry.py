"""Resolve a contract's ``provider`` to a backend class.

Built-ins cannot be shadowed. Third-party providers are installed packages exposing a
:class:`Backend` subclass in the ``decguard.backends`` entry-point group: contracts never
name import paths. The group is DecGuard's own, so a plugin written for DecGuard 0.1 (a
``decguard`` ``DecisionBackend`` subclass) is found there too, and is run through an adapter.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from decguard_pipeline.backends.base import Backend, backend_metadata, health
from decguard_pipeline.core.contract import BackendConfig, DecisionSpec
from decguard_pipeline.core.decision import DecisionRequest, Prediction
from decguard_pipeline.core.errors import BackendError, ContractError
from decguard_pipeline.core.secrets import register_env_secrets

ENTRY_POINT_GROUP = "decguard.backends"
# provider -> (module, class); imported when first used, so a mock run never loads the
# HTTP clients (httpx alone pulls in ~0.1 s of imports)
BUILTIN: dict[str, tuple[str, str]] = {
    "mock": ("decguard_pipeline.backends.mock", "MockBackend"),
    "http": ("decguard_pipeline.backends.http", "HttpBackend"),
    "systemone": ("decguard_pipeline.backends.systemone", "SystemOneBackend"),
    # pipeline extensions: language-model deciders (docs/engines.md)
    "openai": ("decguard_pipeline.backends.openai", "OpenAIBackend"),
    "openjev": ("decguard_pipeline.backends.openjev", "OpenJevBackend"),
}
# DecGuard's own built-ins: the only ones its "unknown provider" message lists, so that the
# message stays DecGuard's word for word
DECGUARD_BUILTIN = ("http", "mock", "systemone")


def entry_points(*, group: str, name: str | None = None) -> tuple[Any, ...]:
    """Installed plugins of ``group`` (importlib.metadata is imported only when needed)."""
    from importlib.metadata import entry_points as installed

    found = installed(group=group) if name is None else installed(group=group, name=name)
    return tuple(found)


def available_providers(*, extensions: bool = True) -> list[str]:
    plugins = {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)}
    return sorted(set(BUILTIN if extensions else DECGUARD_BUILTIN) | plugins)


def backend_class(provider: str) -> type[Backend]:
    if provider in BUILTIN:
        module, name = BUILTIN[provider]
        builtin: type[Backend] = getattr(import_module(module), name)
        return builtin
    found = entry_points(group=ENTRY_POINT_GROUP, name=provider)
    if not found:
        raise ContractError(
            f"unknown backend provider {provider!r}; available: "
            + ", ".join(available_providers(extensions=False))
        )
    entry_point = found[0]
    try:
        loaded = entry_point.load()
    except Exception as exc:
        raise ContractError(
            f"cannot load backend provider {provider!r} from {entry_point.value}: {exc}"
        ) from exc
    if isinstance(loaded, type) and issubclass(loaded, Backend):
        return loaded
    adapted = _decguard_plugin(loaded)
    if adapted is None:
        raise ContractError(
            f"backend provider {provider!r} ({entry_point.value}) is not a decguard_pipeline "
            "Backend"
        )
    return adapted


def _decguard_plugin(plugin: Any) -> type[Backend] | None:
    """A backend class written for DecGuard itself, wrapped so that it speaks this
    project's interface; None when ``plugin`` is not one (or DecGuard is not installed,
    which such a plugin needs anyway)."""
    try:
        from decguard.backends.base import DecisionBackend
        from decguard.contracts.models import BackendConfig as TheirConfig
        from decguard.decisions import DecisionRequest as TheirRequest
        from decguard.decisions import DecisionSpec as TheirSpec
        from decguard.errors import BackendError as TheirBackendError
        from decguard.errors import DecGuardError as TheirError
    except ImportError:
        return None
    if not (isinstance(plugin, type) and issubclass(plugin, DecisionBackend)):
        return None

    def ours(exc: Exception) -> Exception:
        """DecGuard's per-case errors keep their kind; its other errors abort the run."""
        if isinstance(exc, TheirBackendError):
            error = BackendError(str(exc))
            error.kind = exc.kind  # type: ignore[misc]
            return error
        return ContractError(str(exc))

    def their_spec(spec: DecisionSpec) -> Any:
        return TheirSpec(
            name=spec.name, type=spec.type, labels=spec.labels, description=spec.description
        )

    class DecGuardPlugin(Backend):
        provider = plugin.provider

        def __init__(self, inner: Any) -> None:
            super().__init__(name=inner.name, model=inner.model)
            self.inner = inner
            self._specs: dict[DecisionSpec, Any] = {}

        @classmethod
        def from_config(
            cls, config: BackendConfig, *, name: str, decision: DecisionSpec
        ) -> DecGuardPlugin:
            try:
                inner = plugin.from_config(
                    TheirConfig.model_validate(config.model_dump()),
                    name=name,
                    decision=their_spec(decision),
                )
            except TheirError as exc:
                raise ours(exc) from exc
            return cls(inner)

        def predict(self, request: DecisionRequest) -> Prediction:
            spec = self._specs.get(request.decision)
            if spec is None:
                spec = self._specs[request.decision] = their_spec(request.decision)
            asked = TheirRequest(case_id=request.case_id, decision=spec, input=request.input)
            try:
                answer = self.inner.predict(asked)
            except TheirError as exc:
                raise ours(exc) from exc
            return Prediction(
                answer.probabilities, answer.model, answer.model_version, dict(answer.metadata)
            )

        def healthcheck(self) -> dict[str, str]:
            status = self.inner.healthcheck()
            return health(status.status, status.detail)

        def metadata(self) -> dict[str, Any]:
            about = self.inner.metadata()
            return backend_metadata(
                about.name, about.provider, about.model, about.model_version, about.details
            )

        def close(self) -> None:
            self.inner.close()

    DecGuardPlugin.__name__ = DecGuardPlugin.__qualname__ = f"DecGuardPlugin_{plugin.__name__}"
    return DecGuardPlugin


def adopt_decguard_backend(instance: Any) -> Backend | None:
    """A backend object built for DecGuard (a ``decguard`` ``DecisionBackend`` instance, such
    as its ``CallableBackend``) behind our interface, as the SDK's ``from_contract`` accepts
    it; None when ``instance`` is not one."""
    adapter = _decguard_plugin(type(instance))
    return None if adapter is None else adapter(instance)  # type: ignore[call-arg]


def create_backend(
    config: BackendConfig, *, decision: DecisionSpec, name: str = "default"
) -> Backend:
    """Build a backend from contract configuration. No network I/O. The credentials its
    settings name (``*_env``, ``*_from_env``, as DecGuard's providers do) are registered as
    secrets now, so that a plugin's too are redacted wherever a model echoes them."""
    register_env_secrets(config.settings)
    return backend_class(config.provider).from_config(config, name=name, decision=decision)
