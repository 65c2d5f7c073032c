"""The ``http`` provider: protocol ``decguard.http/0.1``.

    POST <url>  {"protocol": "decguard.http/0.1", "case_id", "model", "decision": {"name",
                 "type", "labels"}, "input"}
    200 OK      {"probabilities": {...}, "model"?, "model_version"?, "metadata"?}

The transport (pooled clients, retries, credentials from the environment, error mapping)
is shared with the other network providers (``transport.py``).

Answers are read within ``max_response_bytes`` (decoded; over it: ``invalid_response``) and
credentials are registered as secrets as they are read (both in ``transport.py``); result
metadata larger than ``max_metadata_bytes`` is an ``invalid_response`` (the runner).
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Self

import httpx
from pydantic import Field, field_validator, model_validator

from decguard_pipeline.backends.base import backend_metadata, backend_settings, health
from decguard_pipeline.backends.body import DEFAULT_MAX_RESPONSE_BYTES
from decguard_pipeline.backends.transport import (
    RETRYABLE,
    SECRET_HEADERS,
    SECRET_QUERY_KEYS,
    USER_AGENT,
    HttpTransport,
    Reply,
    check_url,
    no_literal_secrets,
    public_url,
    same_origin,
)
from decguard_pipeline.core.contract import BackendConfig, DecisionSpec
from decguard_pipeline.core.decision import (
    DEFAULT_MAX_METADATA_BYTES,
    DecisionRequest,
    Prediction,
)
from decguard_pipeline.core.errors import (
    BackendError,
    BackendUnavailable,
    ContractError,
    InvalidResponse,
)
from decguard_pipeline.core.validation import Strict

__all__ = [
    "PROTOCOL",
    "RETRYABLE",
    "SECRET_HEADERS",
    "SECRET_QUERY_KEYS",
    "USER_AGENT",
    "HttpBackend",
    "HttpSettings",
    "Reply",
    "check_url",
    "public_url",
]

PROTOCOL = "decguard.http/0.1"
# one encoder for every body (json.dumps with options builds a new one per call)
_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


class HttpSettings(Strict):
    url: str
    health_url: str | None = None
    timeout_s: float = Field(default=30.0, gt=0.0, le=600.0)
    max_retries: int = Field(default=0, ge=0, le=5)
    retry_backoff_s: float = Field(default=0.5, ge=0.0, le=60.0)
    headers: dict[str, str] = {}
    headers_from_env: dict[str, str] = {}
    bearer_token_env: str | None = None
    label_map: dict[str, str] = {}  # backend label -> contract label
    # pipeline extensions (docs/contracts.md#backend-limits); DecGuard reads without limits
    max_response_bytes: int = Field(default=DEFAULT_MAX_RESPONSE_BYTES, ge=1, le=1 << 30)
    max_metadata_bytes: int = Field(default=DEFAULT_MAX_METADATA_BYTES, ge=1, le=1 << 30)

    _urls = field_validator("url", "health_url")(check_url)

    _no_literal_secrets = field_validator("headers")(no_literal_secrets)

    @model_validator(mode="after")
    def _credentials_stay_on_origin(self) -> HttpSettings:
        env_headers = {header.lower() for header in self.headers_from_env}
        if self.bearer_token_env and "authorization" in env_headers:
            raise ValueError("set either bearer_token_env or an Authorization header, not both")
        with_env = self.bearer_token_env or self.headers_from_env
        if self.health_url is not None and with_env and not same_origin(self.url, self.health_url):
            raise ValueError(
                "health_url must use the backend URL's origin when environment headers "
                "are configured"
            )
        return self


class HttpBackend(HttpTransport):
    provider = "http"
    protocol: ClassVar[str] = PROTOCOL
    retryable: ClassVar[frozenset[int]] = RETRYABLE

    def __init__(
        self, settings: HttpSettings, *, name: str = "default", model: str | None = None
    ) -> None:
        super().__init__(settings, name=name, model=model)
        self.settings: HttpSettings = settings
        self._to_backend_label = {v: k for k, v in settings.label_map.items()}
        # id(decision) -> (decision, the body's bytes before case_id, between, after input)
        self._templates: dict[int, tuple[DecisionSpec, bytes, bytes, bytes]] = {}

    @classmethod
    def from_config(cls, config: BackendConfig, *, name: str, decision: DecisionSpec) -> Self:
        settings = backend_settings(HttpSettings, config, name=name)
        cls.check_label_map(settings, decision, name=name)
        return cls(settings, name=name, model=config.model)

    @classmethod
    def check_label_map(cls, settings: HttpSettings, decision: DecisionSpec, *, name: str) -> None:
        targets = list(settings.label_map.values())
        unknown = sorted(set(targets) - set(decision.labels))
        if unknown:
            raise ContractError(
                f"{cls.provider} backend {name!r}: label_map targets {unknown} are not "
                "contract labels"
            )
        if len(set(targets)) != len(targets):
            raise ContractError(
                f"{cls.provider} backend {name!r}: label_map maps two labels to one"
            )

    # -- requests ------------------------------------------------------------------------

    def credential_sources(self) -> dict[str, tuple[str, str]]:
        sources = super().credential_sources()
        if self.settings.bearer_token_env:
            sources["Authorization"] = (self.settings.bearer_token_env, "Bearer ")
        return sources

    def missing_variable(self, variable: str) -> ContractError:
        # DecGuard's wording, for systemone too
        return ContractError(
            f"http backend {self.name!r}: environment variable {variable} is not set"
        )

    def backend_labels(self, labels: tuple[str, ...]) -> list[str]:
        return [self._to_backend_label.get(label, label) for label in labels]

    def payload(self, request: DecisionRequest) -> dict[str, Any]:
        return {
            "protocol": PROTOCOL,
            "case_id": request.case_id,
            "model": self.model,
            "decision": {
                "name": request.decision.name,
                "type": request.decision.type,
                "labels": self.backend_labels(request.decision.labels),
            },
            "input": request.input,
        }

    # -- answers -------------------------------------------------------------------------

    def check_status(self, reply: Reply) -> None:
        if reply.status in self.retryable:
            raise BackendUnavailable(f"backend {self.name!r} returned HTTP {reply.status}")
        if not reply.ok:
            # Bodies are untrusted and may echo credentials or private input: never kept.
            raise BackendError(f"backend {self.name!r} returned HTTP {reply.status}")

    def json_body(self, reply: Reply) -> Any:
        try:
            return json.loads(reply.body)
        except ValueError as exc:
            raise InvalidResponse(f"backend {self.name!r} returned invalid JSON") from exc

    def parse(self, request: DecisionRequest, reply: Reply) -> Prediction:
        self.check_status(reply)
        body = self.json_body(reply)
        if not isinstance(body, dict) or not isinstance(body.get("probabilities"), dict):
            raise InvalidResponse(f"backend {self.name!r} response has no 'probabilities' object")
        probabilities: dict[str, Any] = {}
        for label, value in body["probabilities"].items():
            mapped = self.settings.label_map.get(label, label)
            if mapped in probabilities:
                raise InvalidResponse(f"backend {self.name!r} returned label {mapped!r} twice")
            probabilities[mapped] = value
        model, version, metadata = (
            body.get("model"),
            body.get("model_version"),
            body.get("metadata"),
        )
        if model is not None and not isinstance(model, str):
            raise InvalidResponse("'model' must be a string")
        if version is not None and not isinstance(version, str):
            raise InvalidResponse("'model_version' must be a string")
        if metadata is not None and not isinstance(metadata, dict):
            raise InvalidResponse("'metadata' must be an object")
        return Prediction(probabilities, model, version, metadata or {})

    def encode(self, request: DecisionRequest) -> bytes:
        if type(self).payload is not HttpBackend.payload:  # a provider's own body (systemone)
            return _ENCODE(self.payload(request)).encode("utf-8")
        # the payload's bytes with only case_id and input encoded per case: the rest is the
        # same for every case of a decision (the same bytes as encoding the whole dict)
        decision = request.decision
        template = self._templates.get(id(decision))
        if template is None or template[0] is not decision:
            whole = self.payload(DecisionRequest("\0case", decision, "\0input"))
            text = _ENCODE(whole)
            head, rest = text.split(_ENCODE("\0case"), 1)
            middle, tail = rest.rsplit(_ENCODE("\0input"), 1)  # input is the last field
            template = (decision, head.encode(), middle.encode(), tail.encode())
            self._templates[id(decision)] = template
        _, head_bytes, middle_bytes, tail_bytes = template
        return b"".join((
            head_bytes,
            _ENCODE(request.case_id).encode("utf-8"),
            middle_bytes,
            _ENCODE(request.input).encode("utf-8"),
            tail_bytes,
        ))  # fmt: skip

    # -- calls: httpx for single calls and health checks, aiohttp for batch runs ----------

    def predict(self, request: DecisionRequest) -> Prediction:
        return self.parse(request, self._send_sync("POST", self.settings.url, self.encode(request)))

    def healthcheck(self) -> dict[str, str]:
        if self.settings.health_url is None:
            return health("unknown", "no health_url configured")
        try:
            reply = self._send_sync("GET", self.settings.health_url, read=False)
        except BackendError as exc:
            return health("unhealthy", str(exc))
        return health("ok" if reply.ok else "unhealthy", f"HTTP {reply.status}")

    def version_hint(self) -> str | None:
        """``model_version`` (or ``version``) of a JSON health answer, if it gives one."""
        if self.settings.health_url is None:
            return None
        try:
            reply = self._send_sync("GET", self.settings.health_url)
            body = json.loads(reply.body) if reply.ok else None
        except (BackendError, ValueError, httpx.DecodingError):
            return None
        if isinstance(body, dict):
            for key in ("model_version", "version"):
                if isinstance(body.get(key), str) and body[key]:
                    return str(body[key])
        return None

    async def apredict(self, request: DecisionRequest) -> Prediction:
        reply = await self._send_async("POST", self.settings.url, self.encode(request))
        return self.parse(request, reply)

    # -- provenance -------------------------------------------------------------------------

    def metadata(self) -> dict[str, Any]:
        return backend_metadata(
            self.name,
            self.provider,
            self.model,
            details={"url": public_url(self.settings.url), "protocol": self.protocol},
        )
