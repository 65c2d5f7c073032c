"""The ``http`` provider: protocol ``decguard.http/0.1``.

    POST <url>  {"protocol": "decguard.http/0.1", "case_id", "model", "decision": {"name",
                 "type", "labels"}, "input"}
    200 OK      {"probabilities": {...}, "model"?, "model_version"?, "metadata"?}

Batch runs go through one pooled aiohttp session (connection reuse, at most
``max_concurrency`` requests in flight); single calls (``run``, health checks, replays) use
httpx. Credentials come only from environment variables, are read at the first request
(when they are registered as secrets: ``core.secrets`` redacts them wherever a model echoes
them), and never reach a report, an error message or a log.

Answers are read within ``max_response_bytes`` (decoded; over it: ``invalid_response``), and
a body must arrive within ``timeout_s`` of the response headers, so a model that sends a
gzip bomb or trickles its answer byte by byte cannot exhaust memory or hold a worker.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Self

import httpx
from pydantic import Field, field_validator, model_validator

from decguard_pipeline import __version__
from decguard_pipeline.backends.base import Backend, backend_metadata, backend_settings, health
from decguard_pipeline.backends.body import (
    ACCEPT_ENCODING,
    DEFAULT_MAX_RESPONSE_BYTES,
    BoundedBody,
    TooLarge,
)
from decguard_pipeline.core.contract import BackendConfig, DecisionSpec
from decguard_pipeline.core.decision import (
    DEFAULT_MAX_METADATA_BYTES,
    DecisionRequest,
    Prediction,
)
from decguard_pipeline.core.errors import (
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    ContractError,
    InvalidResponse,
)
from decguard_pipeline.core.secrets import register_secret
from decguard_pipeline.core.validation import Strict

PROTOCOL = "decguard.http/0.1"
USER_AGENT = f"decguard-pipeline/{__version__}"
RETRYABLE = frozenset({502, 503, 504})
SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "x-api-key", "api-key"})
SECRET_QUERY_KEYS = frozenset(
    {"api_key", "apikey", "access_token", "token", "key", "signature", "auth", "password"}
)


def check_url(value: str | None) -> str | None:
    """An absolute http(s) URL without embedded credentials."""
    if value is None:
        return None
    try:
        url = httpx.URL(value)
    except httpx.InvalidURL as exc:
        raise ValueError("invalid URL") from exc
    if url.scheme not in {"http", "https"} or not url.host:
        raise ValueError("must be an absolute http:// or https:// URL")
    if url.userinfo:
        raise ValueError("must not embed credentials; use bearer_token_env or headers_from_env")
    for key, _ in url.params.multi_items():
        if key.lower() in SECRET_QUERY_KEYS:
            raise ValueError(
                f"query parameter {key!r} looks like a credential; use an environment "
                "variable and a request header"
            )
    return value


def public_url(url: str) -> str:
    """The URL without query and fragment, which may carry tokens."""
    return str(httpx.URL(url).copy_with(query=None, fragment=None))


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

    @field_validator("headers")
    @classmethod
    def _no_literal_secrets(cls, value: dict[str, str]) -> dict[str, str]:
        for header in value:
            if header.lower() in SECRET_HEADERS:
                raise ValueError(
                    f"{header!r} looks like a credential; put it in an environment variable "
                    "and use headers_from_env or bearer_token_env"
                )
        return value

    @model_validator(mode="after")
    def _credentials_stay_on_origin(self) -> HttpSettings:
        env_headers = {header.lower() for header in self.headers_from_env}
        if self.bearer_token_env and "authorization" in env_headers:
            raise ValueError("set either bearer_token_env or an Authorization header, not both")
        if self.health_url is not None and (self.bearer_token_env or self.headers_from_env):
            target, probe = httpx.URL(self.url), httpx.URL(self.health_url)
            if (target.scheme, target.host, target.port) != (probe.scheme, probe.host, probe.port):
                raise ValueError(
                    "health_url must use the backend URL's origin when environment headers "
                    "are configured"
                )
        return self


@dataclass(frozen=True, slots=True)
class Reply:
    """An HTTP answer, whichever client fetched it."""

    status: int
    body: bytes
    headers: Mapping[str, str]  # case-insensitive (the client's own header mapping)

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


class HttpBackend(Backend):
    provider = "http"
    protocol: ClassVar[str] = PROTOCOL
    retryable: ClassVar[frozenset[int]] = RETRYABLE

    def __init__(
        self, settings: HttpSettings, *, name: str = "default", model: str | None = None
    ) -> None:
        super().__init__(name=name, model=model)
        self.settings = settings
        self.max_metadata_bytes = settings.max_metadata_bytes
        self._to_backend_label = {v: k for k, v in settings.label_map.items()}
        self._headers: dict[str, str] | None = None
        self._lock = threading.Lock()
        self._client: httpx.Client | None = None
        self._session: Any = None  # aiohttp.ClientSession, created inside the running loop
        self._session_loop: asyncio.AbstractEventLoop | None = None
        self._session_limit = 0
        self._proxy: tuple[Any, Any] = (None, None)  # (proxy URL, auth) from the environment

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

    def request_headers(self) -> dict[str, str]:
        """Static plus environment headers; read once, at the first request."""
        with self._lock:
            if self._headers is None:
                headers = {"User-Agent": USER_AGENT, **self.settings.headers}
                wanted = dict(self.settings.headers_from_env)
                if self.settings.bearer_token_env:
                    wanted["Authorization"] = self.settings.bearer_token_env
                for header, variable in wanted.items():
                    value = os.environ.get(variable)
                    if not value:
                        raise ContractError(
                            f"http backend {self.name!r}: environment variable {variable} is "
                            "not set"
                        )
                    register_secret(value)  # before any request can carry it
                    if header == "Authorization" and variable == self.settings.bearer_token_env:
                        value = f"Bearer {value}"
                    headers[header] = value
                self._headers = headers
            return self._headers

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
        return json.dumps(
            self.payload(request), ensure_ascii=False, separators=(",", ":"), allow_nan=False
        ).encode("utf-8")

    # -- synchronous path (httpx): single calls and health checks -------------------------

    def _sync_client(self) -> httpx.Client:
        headers = {"Accept-Encoding": ACCEPT_ENCODING, **self.request_headers()}
        with self._lock:
            if self._client is None:
                self._client = httpx.Client(
                    headers=headers, timeout=self.settings.timeout_s, follow_redirects=False
                )
            return self._client

    def _send_sync(
        self, method: str, url: str, body: bytes | None = None, *, read: bool = True
    ) -> Reply:
        """The final answer (retries done). Only a 2xx body is read, and only when ``read``:
        the body of any other status is never used."""
        client = self._sync_client()
        extra = {"Content-Type": "application/json"} if body is not None else None
        attempts = self.settings.max_retries + 1
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                with client.stream(method, url, content=body, headers=extra) as response:
                    status = response.status_code
                    if status not in self.retryable or last:
                        wanted = read and 200 <= status < 300
                        content = self._read_sync(response) if wanted else b""
                        return Reply(status, content, response.headers)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                if last:
                    raise self._connect_error(type(exc).__name__) from exc
            except httpx.TimeoutException as exc:
                raise self._timeout() from exc
            except httpx.TransportError as exc:
                raise self._transport_error(type(exc).__name__) from exc
            time.sleep(self.settings.retry_backoff_s * 2**attempt)
        raise AssertionError("unreachable")

    def _read_sync(self, response: httpx.Response) -> bytes:
        # each read waits at most timeout_s (the client's timeout); the whole body about as long
        deadline = time.monotonic() + self.settings.timeout_s
        try:
            body = BoundedBody(response.headers, self.settings.max_response_bytes)
            for chunk in response.iter_raw():
                body.feed(chunk)
                if time.monotonic() > deadline:
                    raise self._timeout()
            return body.finish()
        except TooLarge:
            raise self._too_large() from None

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

    # -- asynchronous path (aiohttp): batch runs ---------------------------------------

    def open_session(self, limit: int) -> None:
        """Size the pool for a run of at most ``limit`` requests in flight."""
        self._session_limit = limit

    def _async_session(self) -> Any:
        import aiohttp

        loop = asyncio.get_running_loop()
        if self._session is None or self._session_loop is not loop:
            connector = aiohttp.TCPConnector(
                limit=max(self._session_limit, 1), limit_per_host=0, ttl_dns_cache=300
            )
            timeout = aiohttp.ClientTimeout(
                total=None,
                sock_connect=self.settings.timeout_s,
                sock_read=self.settings.timeout_s,
            )
            # Proxy variables are honoured as httpx honours them, but resolved once per run:
            # aiohttp's trust_env looks them (and ~/.netrc) up on a worker thread for every
            # request, two thread hand-offs that cost more than the request on loopback.
            self._proxy = _env_proxy(self.settings.url)
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=timeout,
                headers=self.request_headers(),
                trust_env=False,
                auto_decompress=False,  # bodies are decoded within the limit (body.py)
                skip_auto_headers=("Accept-Encoding",),
            )
            self._session_loop = loop
        return self._session

    async def _send_async(self, method: str, url: str, body: bytes | None = None) -> Reply:
        import aiohttp

        session = self._async_session()
        extra = {"Content-Type": "application/json"} if body is not None else None
        attempts = self.settings.max_retries + 1
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                async with session.request(
                    method,
                    url,
                    data=body,
                    headers=extra,
                    allow_redirects=False,
                    proxy=self._proxy[0],
                    proxy_auth=self._proxy[1],
                ) as response:
                    status = response.status
                    if status not in self.retryable or last:
                        wanted = 200 <= status < 300
                        content = await self._read_async(response) if wanted else b""
                        return Reply(status, content, response.headers)
            except aiohttp.ConnectionTimeoutError as exc:
                if last:
                    raise self._connect_error("ConnectTimeout") from exc
            except aiohttp.ClientConnectorError as exc:
                if last:
                    raise self._connect_error("ConnectError") from exc
            except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
                raise self._timeout() from exc
            except aiohttp.ServerDisconnectedError as exc:
                raise self._transport_error("RemoteProtocolError") from exc
            except aiohttp.ClientError as exc:
                raise self._transport_error(_httpx_name(exc)) from exc
            await asyncio.sleep(self.settings.retry_backoff_s * 2**attempt)
        raise AssertionError("unreachable")

    async def _read_async(self, response: Any) -> bytes:
        try:
            body = BoundedBody(response.headers, self.settings.max_response_bytes)
            async with asyncio.timeout(self.settings.timeout_s):
                async for chunk in response.content.iter_any():
                    body.feed(chunk)
            return body.finish()
        except TooLarge:
            raise self._too_large() from None

    async def apredict(self, request: DecisionRequest) -> Prediction:
        reply = await self._send_async("POST", self.settings.url, self.encode(request))
        return self.parse(request, reply)

    # -- errors, metadata, lifecycle -------------------------------------------------------

    def _connect_error(self, what: str) -> BackendError:
        kind = BackendTimeout if what == "ConnectTimeout" else BackendUnavailable
        return kind(f"cannot connect to backend {self.name!r}: {what}")

    def _timeout(self) -> BackendError:
        return BackendTimeout(f"backend {self.name!r} timed out after {self.settings.timeout_s:g}s")

    def _transport_error(self, what: str) -> BackendError:
        return BackendUnavailable(f"transport error from backend {self.name!r}: {what}")

    def _too_large(self) -> BackendError:
        limit = self.settings.max_response_bytes
        return InvalidResponse(
            f"backend {self.name!r} answered more than {limit} bytes (max_response_bytes)"
        )

    def metadata(self) -> dict[str, Any]:
        return backend_metadata(
            self.name,
            self.provider,
            self.model,
            details={"url": public_url(self.settings.url), "protocol": self.protocol},
        )

    async def aclose(self) -> None:
        session, self._session, self._session_loop = self._session, None, None
        if session is not None:
            await session.close()

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()


def _env_proxy(url: str) -> tuple[Any, Any]:
    """The proxy (and its credentials) the environment assigns to ``url``, or (None, None)."""
    from aiohttp.helpers import get_env_proxy_for_url
    from yarl import URL

    try:
        return get_env_proxy_for_url(URL(url))
    except LookupError:
        return None, None


_SOCKET_ERROR = re.compile(r"\. \w+Error\(\d+, .*\)$")


def _httpx_name(exc: Exception) -> str:
    """The httpx exception name DecGuard reports for an aiohttp transport failure."""
    import aiohttp

    if isinstance(exc, aiohttp.ClientPayloadError):
        # a body cut short by a socket error (a reset) is httpx's ReadError; aiohttp keeps
        # that error only in the message, as "... . ConnectionResetError(104, '...')"
        return "ReadError" if _SOCKET_ERROR.search(str(exc)) else "RemoteProtocolError"
    if isinstance(exc, aiohttp.ClientOSError):
        return "ReadError"
    return "TransportError"
