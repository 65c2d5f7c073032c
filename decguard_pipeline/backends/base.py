"""The interface every backend implements.

A backend turns a :class:`DecisionRequest` into a raw :class:`Prediction`; validation and
normalisation are shared (``core.decision``) so no adapter can diverge in result semantics.
Adapters implement ``predict`` (synchronous; called from worker threads, so it must be
thread-safe) and may implement ``apredict`` for native asyncio I/O.

What a backend says about itself (``metadata``, ``healthcheck``, ``version_hint``,
``run_stats``) is scrubbed of registered secrets whichever class implements it
(``__init_subclass__``); what it answers is scrubbed and size-checked by the runner and
:func:`build_result`.
"""

from __future__ import annotations

import functools
import time
from abc import ABC
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from types import TracebackType
from typing import Any, ClassVar, Self, TypeVar

from pydantic import BaseModel, ValidationError

from decguard_pipeline.core.contract import BackendConfig, DecisionSpec
from decguard_pipeline.core.decision import (
    DEFAULT_MAX_METADATA_BYTES,
    DEFAULT_TOLERANCE,
    DecisionRequest,
    Prediction,
    metadata_problem,
    select_index,
    validate_probabilities,
)
from decguard_pipeline.core.errors import ContractError, InvalidResponse
from decguard_pipeline.core.secrets import redact, scrub, scrub_optional
from decguard_pipeline.core.usage import Pricing
from decguard_pipeline.core.validation import format_errors

SettingsT = TypeVar("SettingsT", bound=BaseModel)

# When the current task's last answer was read whole (``time.perf_counter``), set by a client
# that knows (the lean HTTP client reads answers in its protocol callback): the runner stops a
# case's clock there rather than when the event loop next runs the case's task.
ANSWERED_AT: ContextVar[float] = ContextVar("decguard_answered_at", default=0.0)


def health(status: str, detail: str = "") -> dict[str, str]:
    """A health answer: ``ok``, ``unhealthy`` or ``unknown``, with a short detail."""
    return {"status": status, "detail": detail}


class Backend(ABC):
    """Base class of decision backends (built-in and ``decguard.backends`` plugins)."""

    provider: ClassVar[str]
    # In-process and CPU-cheap (the mock): the runner calls ``predict`` in a plain loop,
    # skipping thread hand-offs that would cost more than the call itself.
    inline: ClassVar[bool] = False
    # the largest metadata (as compact JSON) stored with one answer; over it: invalid_response
    max_metadata_bytes: int = DEFAULT_MAX_METADATA_BYTES
    # the response cache the runner replays and records this backend's answers through (set
    # by the run that made the backend: a ``backends.cache.ResponseCache``); None: every
    # request is asked
    response_cache: Any = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in _SELF_DESCRIPTIONS:
            method = cls.__dict__.get(name)
            if callable(method) and not getattr(method, "_scrubbed", False):
                setattr(cls, name, _scrubbing(method))

    def __init__(self, *, name: str = "default", model: str | None = None) -> None:
        self.name = name
        self.model = model

    @classmethod
    def from_config(cls, config: BackendConfig, *, name: str, decision: DecisionSpec) -> Self:
        """Build from a contract's backend section; validates settings, does no I/O."""
        raise ContractError(f"provider {cls.provider!r} cannot be configured from a contract")

    def predict(self, request: DecisionRequest) -> Prediction:
        """Raw label probabilities for one request. Raise ``BackendError`` subclasses for
        failures of this request only; they become typed per-case errors."""
        raise NotImplementedError(f"{type(self).__name__} implements neither predict nor apredict")

    async def apredict(self, request: DecisionRequest) -> Prediction:
        """Async variant; by default ``predict`` on a worker thread."""
        import asyncio  # only async runs need it; a mock run never imports asyncio

        return await asyncio.to_thread(self.predict, request)

    @property
    def has_native_async(self) -> bool:
        return type(self).apredict is not Backend.apredict

    def decide(
        self, request: DecisionRequest, *, tolerance: float = DEFAULT_TOLERANCE
    ) -> dict[str, Any]:
        """One validated decision (a DecisionResult dict) for single calls (``run``, SDK)."""
        start = time.perf_counter()
        prediction = self.predict(request)
        latency_ms = (time.perf_counter() - start) * 1000.0 - prediction.queued_ms
        return build_result(self, request, prediction, latency_ms, tolerance=tolerance)

    def metadata(self) -> dict[str, Any]:
        """Provenance recorded in reports: never a secret."""
        return backend_metadata(self.name, self.provider, self.model)

    def healthcheck(self) -> dict[str, str]:
        return health("unknown", "healthcheck not implemented")

    def run_stats(self) -> dict[str, Any]:
        """Counters of the requests made so far (retries, waits, tokens) for extension
        reports; empty for backends that keep none. Never a secret, never a body."""
        return {}

    def note_replayed(
        self, model_versions: Sequence[str | None], metadata: Sequence[Mapping[str, Any]]
    ) -> None:
        """Answers were replayed from the response cache instead of asked (their model
        versions and result metadata). A backend that records provenance from its answers
        (the versions that answered, for ``metadata()``) records these too, so that a report
        made from cached answers says what a clean run's says."""

    def pricing(self) -> Pricing | None:
        """What the backend's tokens cost (its ``pricing`` setting); None when it has none."""
        return None

    def version_hint(self) -> str | None:
        """The model version the backend says it serves without deciding anything (from its
        configuration or its health answer); None when it does not say."""
        return None

    def version_hint_source(self) -> str:
        """Where :meth:`version_hint` read the version (a target's ``version_source``)."""
        return "contract" if self.inline else "health"

    async def aclose(self) -> None:
        """Release async resources (connection pools) inside the loop that made them."""

    def close(self) -> None:
        """Release resources such as connection pools."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


_SELF_DESCRIPTIONS = ("metadata", "healthcheck", "version_hint", "run_stats")


def _scrubbing(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def scrubbed(self: Backend, *args: Any, **kwargs: Any) -> Any:
        return scrub(method(self, *args, **kwargs))

    scrubbed._scrubbed = True  # type: ignore[attr-defined]
    return scrubbed


def backend_metadata(
    name: str,
    provider: str,
    model: str | None,
    model_version: str | None = None,
    details: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "name": name,
        "provider": provider,
        "model": scrub_optional(model),
        "model_version": scrub_optional(model_version),
        "details": redact(details or {}),
    }


def build_result(
    backend: Backend,
    request: DecisionRequest,
    prediction: Prediction,
    latency_ms: float,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
) -> dict[str, Any]:
    """Validate one prediction into a DecisionResult dict (raises InvalidResponse)."""
    labels = request.decision.labels
    probabilities = validate_probabilities(labels, prediction.probabilities, tolerance=tolerance)
    problem = metadata_problem(prediction.metadata, backend.max_metadata_bytes)
    if problem is not None:
        raise InvalidResponse(problem)
    values = list(probabilities.values())
    selected = labels[select_index(values)]
    return {
        "case_id": request.case_id,
        "decision": request.decision.name,
        "decision_type": request.decision.type,
        "labels": list(labels),
        "probabilities": probabilities,
        "selected": selected,
        "confidence": probabilities[selected],
        "backend": backend.name,
        "provider": backend.provider,
        "model": scrub_optional(prediction.model) or backend.model,
        "model_version": scrub_optional(prediction.model_version),
        "latency_ms": latency_ms,
        "metadata": redact(dict(prediction.metadata)),
    }


def backend_settings(model: type[SettingsT], config: BackendConfig, *, name: str) -> SettingsT:
    """Validate provider settings, naming errors by their place in the contract."""
    prefix = "backend" if name == "default" else f"backends.{name}"
    try:
        return model.model_validate(config.settings)
    except ValidationError as exc:
        raise ContractError(
            f"invalid settings for provider {config.provider!r}:\n"
            + format_errors(exc, prefix=prefix)
        ) from exc
