"""What every language-model provider shares (``openai``, ``openjev``): settings for
credentials, limits, retries, versions and prices; one driver that runs a provider's scoring
flow over the shared HTTP transport, synchronously or on the run's event loop.

A provider writes its scoring as a *flow*: a generator that yields the requests it needs
(:class:`Call`), receives each parsed answer (or the typed error it ended in, thrown into
the generator) and returns one probability per option shown. The driver owns everything
else: pacing under ``requests_per_minute`` / ``tokens_per_minute``, retries that honour
``Retry-After``, typed errors, the model version (the answer's ``model``, optionally with
``system_fingerprint``) and the tokens the case cost. Answer bodies are read within
``max_response_bytes`` (the transport), parsed and dropped: never stored, never quoted in an
error.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import threading
from collections.abc import Generator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import orjson
from pydantic import Field, ValidationInfo, field_validator, model_validator

from decguard_pipeline.backends.base import backend_metadata, health
from decguard_pipeline.backends.body import DEFAULT_MAX_RESPONSE_BYTES
from decguard_pipeline.backends.prompts import check_template
from decguard_pipeline.backends.ratelimit import Pacer, backoff_s, retry_after_s
from decguard_pipeline.backends.transport import (
    HttpTransport,
    Reply,
    check_url,
    no_literal_secrets,
    public_url,
    same_origin,
)
from decguard_pipeline.core.decision import DEFAULT_MAX_METADATA_BYTES, DecisionRequest, Prediction
from decguard_pipeline.core.env_placeholders import VARIABLE, expand
from decguard_pipeline.core.errors import (
    BackendError,
    BackendUnavailable,
    InvalidResponse,
    RateLimited,
)
from decguard_pipeline.core.usage import Pricing, known_usage
from decguard_pipeline.core.validation import Strict

# Rate limits (429), overload (503) and gateway failures are worth another try; OpenAI's own
# clients retry 500 too.
RETRYABLE = frozenset({429, 500, 502, 503, 504})
SERVER_PAUSES = frozenset({429, 503})  # the statuses whose Retry-After is honoured
CHARS_PER_TOKEN = 4  # the usual estimate for English text, corrected once usage is known
# How servers refuse a request shape they do not support: 400/422 (validation), 404/405
# (no such route or method), 415, 500 (llama-cpp-python's server asserts on a list of
# prompts and fails validation of an unknown response_format with 500), 501.
SHAPE_REFUSALS = frozenset({400, 404, 405, 415, 422, 500, 501})
# Set while a request of a shape whose support is not known yet is sent: its 500 is taken as
# a refusal at once, not retried (the fallback is the next try).
_PROBING: ContextVar[bool] = ContextVar("decguard_engine_probing", default=False)


class EngineSettings(Strict):
    """Settings every language-model provider takes."""

    # first: the URL settings' validators read it (the variables their ${NAME} may expand)
    url_env: list[str] = []
    health_url: str | None = None
    timeout_s: float = Field(default=60.0, gt=0.0, le=600.0)
    max_retries: int = Field(default=3, ge=0, le=10)
    retry_backoff_s: float = Field(default=0.5, ge=0.0, le=60.0)
    max_retry_wait_s: float = Field(default=60.0, ge=0.0, le=3600.0)
    headers: dict[str, str] = {}
    headers_from_env: dict[str, str] = {}
    api_key_env: str | None = None
    requests_per_minute: float | None = Field(default=None, gt=0.0, allow_inf_nan=False)
    tokens_per_minute: float | None = Field(default=None, gt=0.0, allow_inf_nan=False)
    max_pacing_wait_s: float = Field(default=300.0, gt=0.0, le=86400.0)
    version_from: Literal["model", "model+fingerprint"] = "model"
    pricing: Pricing | None = None
    prompt: str | None = None
    # as for the http provider (docs/contracts.md#backend-limits)
    max_response_bytes: int = Field(default=DEFAULT_MAX_RESPONSE_BYTES, ge=1, le=1 << 30)
    max_metadata_bytes: int = Field(default=DEFAULT_MAX_METADATA_BYTES, ge=1, le=1 << 30)

    _health = field_validator("health_url")(check_url)
    _no_literal_secrets = field_validator("headers")(no_literal_secrets)

    @field_validator("url_env")
    @classmethod
    def _variables(cls, value: list[str]) -> list[str]:
        for name in value:
            if not VARIABLE.fullmatch(name):
                raise ValueError(f"{name!r} is not an environment variable name")
        return value

    # ${NAME} / ${NAME:-default} in the URLs, for the variables url_env lists, expanded before
    # they are checked (the providers declare base_url / url themselves)
    @field_validator("base_url", "url", "health_url", mode="before", check_fields=False)
    @classmethod
    def _from_environment(cls, value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, str):
            return value
        return expand(value, info.data.get("url_env") or ())

    @field_validator("prompt")
    @classmethod
    def _template(cls, value: str | None) -> str | None:
        return None if value is None else check_template(value)

    @property
    def endpoint(self) -> str:
        """The URL decisions are sent to (its origin is where credentials may go)."""
        raise NotImplementedError

    @model_validator(mode="after")
    def _credentials_stay_on_origin(self) -> EngineSettings:
        env_headers = {header.lower() for header in self.headers_from_env}
        if self.api_key_env and "authorization" in env_headers:
            raise ValueError("set either api_key_env or an Authorization header, not both")
        with_env = self.api_key_env or self.headers_from_env
        if self.health_url and with_env and not same_origin(self.endpoint, self.health_url):
            raise ValueError(
                "health_url must use the backend URL's origin when environment headers "
                "are configured"
            )
        return self


class RejectedRequest(BackendError):
    """The server refused the request (4xx other than 429, or 5xx not retried); ``shape``:
    the request shape it refused, when the call named one."""

    def __init__(self, message: str, status: int, shape: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.shape = shape


@dataclass(frozen=True, slots=True)
class Call:
    """One request of a flow: where and what (a JSON object). ``shape`` names a request
    shape some servers do not support (a list of prompts, a ``response_format``): a 500 to
    it is the server refusing that shape, reported as ``backend_error`` naming it, never as
    ``unavailable``. ``probing``: its support is not known yet, so a 500 is not retried and
    any refusal (:data:`SHAPE_REFUSALS`) is thrown into the flow at once, for the flow to
    try its fallback."""

    url: str
    payload: dict[str, Any]
    shape: str | None = None
    probing: bool = False


# A flow yields Calls, is sent each parsed answer, and returns (probabilities in the order
# shown, result metadata).
Flow = Generator[Call, dict[str, Any], tuple[list[float], dict[str, Any]]]


@dataclass
class Ledger:
    """What one case's requests cost and said."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    usage_known: bool = False
    queued_s: float = 0.0
    version: str | None = None
    stamp: bool = True  # False while the model's identity is being found (version_from)

    def charge(self, error: BackendError) -> None:
        """The case failed: the tokens its answers cost go with the error (``usage``), for
        the runner to count."""
        if self.usage_known:
            error.usage = (self.prompt_tokens, self.completion_tokens)  # type: ignore[attr-defined]


@dataclass
class Served:
    """Model versions that answered during the run (thread-safe)."""

    versions: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, version: str) -> None:
        if version not in self.versions:
            with self.lock:
                self.versions.add(version)

    def sorted(self) -> list[str]:
        with self.lock:
            return sorted(self.versions)


class EngineBackend(HttpTransport):
    """Base of the language-model providers; subclasses implement ``flow``."""

    retryable: ClassVar[frozenset[int]] = RETRYABLE
    protocol: ClassVar[str]
    settings: EngineSettings

    def __init__(self, settings: EngineSettings, *, name: str, model: str | None) -> None:
        super().__init__(settings, name=name, model=model)
        self.pacer = Pacer(
            settings.requests_per_minute,
            settings.tokens_per_minute,
            max_wait_s=settings.max_pacing_wait_s,
        )
        self._rng = random.Random()
        self._served = Served()
        # tokens an answer may take, for the tokens_per_minute estimate of a request
        self.completion_allowance = 1
        # what the server says it serves beyond the answer's ``model`` (version_from: server
        # or probe): found once per backend, before the first answer is stamped
        self._identity: str | None = None
        self._identified = False
        self._identity_lock = threading.Lock()

    # -- what a provider implements -----------------------------------------------------------

    def flow(self, request: DecisionRequest) -> Flow:
        raise NotImplementedError

    def default_health_url(self) -> str | None:
        return None

    def details(self) -> dict[str, Any]:
        """Provider-specific, non-secret provenance for the report's backend section."""
        return {}

    def identify(self) -> str | None:
        """What identifies the model served beyond its name (server metadata, a probe), for
        ``version_from`` modes that ask for it; None: nothing (the default). Raises
        BackendError when the server cannot be reached to say."""
        return None

    # -- transport hooks ------------------------------------------------------------------------

    def credential_sources(self) -> dict[str, tuple[str, str]]:
        sources = super().credential_sources()
        if self.settings.api_key_env:
            sources["Authorization"] = (self.settings.api_key_env, "Bearer ")
        return sources

    def proxy_target(self) -> str:
        return self.settings.endpoint

    def estimate_tokens(self, body: bytes | None) -> float:
        return math.ceil(len(body or b"") / CHARS_PER_TOKEN) + self.completion_allowance

    def admit(self, body: bytes | None) -> float:
        if body is None:  # health checks are not paced
            return 0.0
        return self.pacer.reserve(self.estimate_tokens(body))

    def retry_delay(self, attempt: int, reply: Reply | None) -> float | None:
        if reply is not None and reply.status == 500 and _PROBING.get():
            return None  # a shape being tried: its 500 is a refusal, the fallback comes next
        if reply is not None and reply.status in SERVER_PAUSES:
            asked = retry_after_s(reply.headers)
            if asked is not None:
                if asked > self.settings.max_retry_wait_s:
                    return None  # longer than we may wait: the case fails now
                self.pacer.hold(asked)
                self.pacer.retried(asked, server_said=True)
                return asked
        delay = backoff_s(self.settings.retry_backoff_s, attempt, self._rng)
        self.pacer.retried(delay, server_said=False)
        return delay

    # -- the driver -------------------------------------------------------------------------------

    def predict(self, request: DecisionRequest) -> Prediction:
        self.ensure_identity()
        ledger = Ledger()
        return self.prediction(request, self.drive(request, ledger), ledger)

    def drive(self, request: DecisionRequest, ledger: Ledger) -> tuple[list[float], dict[str, Any]]:
        """Run ``request``'s flow on the synchronous client: its outcome (probabilities in
        the order shown, result metadata)."""
        flow = self.flow(request)
        try:
            call = next(flow)
            while True:
                try:
                    body = orjson.dumps(call.payload)
                    token = _PROBING.set(call.probing)
                    try:
                        reply = self._send_sync("POST", call.url, body)
                    finally:
                        _PROBING.reset(token)
                    answer = self.read(reply, body, ledger, call)
                except BackendError as exc:
                    call = flow.throw(exc)
                else:
                    call = flow.send(answer)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        except BackendError as exc:
            ledger.charge(exc)
            raise

    async def apredict(self, request: DecisionRequest) -> Prediction:
        if not self._identified:  # normally found before the batch (open_session)
            await asyncio.to_thread(self.ensure_identity)
        ledger = Ledger()
        flow = self.flow(request)
        try:
            call = next(flow)
            while True:
                try:
                    body = orjson.dumps(call.payload)
                    token = _PROBING.set(call.probing)
                    try:
                        reply = await self._send_async("POST", call.url, body)
                    finally:
                        _PROBING.reset(token)
                    answer = self.read(reply, body, ledger, call)
                except BackendError as exc:
                    call = flow.throw(exc)
                else:
                    call = flow.send(answer)
        except StopIteration as done:
            return self.prediction(request, done.value, ledger)
        except BackendError as exc:
            ledger.charge(exc)
            raise

    def open_session(self, limit: int) -> None:
        super().open_session(limit)
        # before the batch, so every answer is stamped the same way; when the server cannot
        # be reached each case tries again, and fails with the error if it persists
        with contextlib.suppress(BackendError):
            self.ensure_identity()

    def ensure_identity(self) -> str | None:
        """The model's identity (:meth:`identify`), found once per backend; a failure to
        reach the server is raised and tried again by the next caller."""
        if self._identified:
            return self._identity
        with self._identity_lock:
            if not self._identified:
                self._identity = self.identify()
                self._identified = True
        return self._identity

    def read(
        self, reply: Reply, body: bytes, ledger: Ledger, call: Call | None = None
    ) -> dict[str, Any]:
        """Check and parse one answer; account its tokens and version in ``ledger``."""
        ledger.queued_s += reply.queued_s
        if call is not None and call.shape is not None:
            self.check_shape(reply, call)
        self.check_status(reply)
        try:
            answer = orjson.loads(reply.body)
        except orjson.JSONDecodeError as exc:
            raise InvalidResponse(f"backend {self.name!r} returned invalid JSON") from exc
        if not isinstance(answer, dict):
            raise InvalidResponse(f"backend {self.name!r} returned JSON that is not an object")
        usage = _usage(answer.get("usage"))
        if usage is not None:
            ledger.usage_known = True
            ledger.prompt_tokens += usage[0]
            ledger.completion_tokens += usage[1]
            self.pacer.used(*usage)
            self.pacer.settle(self.estimate_tokens(body), usage[0] + usage[1])
        version = self.version_of(answer) if ledger.stamp else None
        if version is not None and ledger.version is None:
            ledger.version = version
            self._served.add(version)
        return answer

    def check_status(self, reply: Reply) -> None:
        # Bodies are untrusted and may echo credentials or private input: never kept.
        if reply.status == 429:
            raise RateLimited(
                f"backend {self.name!r} returned HTTP 429 (rate limited) after "
                f"{self.settings.max_retries} retries"
            )
        if reply.status in self.retryable:
            raise BackendUnavailable(f"backend {self.name!r} returned HTTP {reply.status}")
        if not reply.ok:
            message = f"backend {self.name!r} returned HTTP {reply.status}"
            raise RejectedRequest(message, reply.status)

    def check_shape(self, reply: Reply, call: Call) -> None:
        """A refusal of a named request shape (a 500 too, after its retries: the server
        refused that shape, it is not unavailable), thrown into the flow naming the shape;
        while probing, the flow tries its fallback."""
        if reply.status in SHAPE_REFUSALS:
            raise RejectedRequest(
                f"backend {self.name!r} returned HTTP {reply.status} to {call.shape}",
                reply.status,
                call.shape,
            )

    def version_of(self, answer: dict[str, Any]) -> str | None:
        """The served model (``model``), with ``+<system_fingerprint>`` when configured;
        with an identity (``version_from: server | probe``), the model asked for and it."""
        if self._identity is not None:
            return f"{self.model}+{self._identity}"
        model = answer.get("model")
        if not isinstance(model, str) or not model:
            return None
        fingerprint = answer.get("system_fingerprint")
        wanted = self.settings.version_from == "model+fingerprint"
        if wanted and isinstance(fingerprint, str) and fingerprint:
            return f"{model}+{fingerprint}"
        return model

    def prediction(
        self,
        request: DecisionRequest,
        outcome: tuple[list[float], dict[str, Any]],
        ledger: Ledger,
    ) -> Prediction:
        values, metadata = outcome
        shown = request.decision.labels
        return Prediction(
            dict(zip(shown, canonical(values), strict=True)),
            None,
            ledger.version,
            metadata,
            (ledger.prompt_tokens, ledger.completion_tokens) if ledger.usage_known else None,
            ledger.queued_s * 1000.0,
        )

    # -- health, provenance, counters -----------------------------------------------------------

    def healthcheck(self) -> dict[str, str]:
        url = self.settings.health_url or self.default_health_url()
        if url is None:
            return health("unknown", "no health_url configured")
        try:
            reply = self._send_sync("GET", url, read=False)  # the status is the answer
        except BackendError as exc:
            return health("unhealthy", str(exc))
        return health("ok" if reply.ok else "unhealthy", f"HTTP {reply.status}")

    def metadata(self) -> dict[str, Any]:
        """Provenance, including the model versions that actually answered during the run."""
        served = self._served.sorted()
        details: dict[str, Any] = {
            "url": public_url(self.settings.endpoint),
            "protocol": self.protocol,
            **self.details(),
        }
        if served:
            details["served_models"] = served
        version = served[0] if len(served) == 1 else None
        return backend_metadata(self.name, self.provider, self.model, version, details)

    def run_stats(self) -> dict[str, Any]:
        return self.pacer.snapshot()

    def version_hint(self) -> str | None:
        """With an identity (``version_from: server | probe``), the version every answer
        will carry, known before any case is asked; else None (the answers say it)."""
        identity = self.ensure_identity()
        return None if identity is None else f"{self.model}+{identity}"

    def version_hint_source(self) -> str:
        return str(self.settings.version_from)  # server or probe: what found the identity

    def note_replayed(
        self, model_versions: Sequence[str | None], metadata: Sequence[Mapping[str, Any]]
    ) -> None:
        for version in set(model_versions):
            if version is not None:
                self._served.add(version)

    def pricing(self) -> Pricing | None:
        return self.settings.pricing


def canonical(values: Sequence[Any]) -> list[Any]:
    """Numbers as a report should hold them: ``-0.0`` (what a model writing ``-0E541``
    parses to) becomes ``0.0``; anything else is left for validation to judge."""
    return [v + 0.0 if isinstance(v, float) and v == 0.0 else v for v in values]


def _usage(raw: Any) -> tuple[int, int] | None:
    """(prompt_tokens, completion_tokens) of an OpenAI-style ``usage`` object, if given as
    JSON integers that can be real token counts (``core.usage.token_count``): anything else
    is no usage, for the report and for pacing alike."""
    if not isinstance(raw, dict):
        return None
    prompt, completion = raw.get("prompt_tokens"), raw.get("completion_tokens", 0)
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    return known_usage((prompt, completion))
