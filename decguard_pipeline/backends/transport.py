"""HTTP transport shared by every network provider: pooled clients, credentials from the
environment, retries and the mapping of transport failures to typed per-case errors.

Batch runs to a plain ``http://`` URL without a proxy go through the lean client of
``plain_http.py`` (keep-alive pool, request bytes built once per case, one task wake-up per
answer); to any other URL (https, a proxy), or with ``DECGUARD_HTTP_CLIENT=aiohttp``, through
one pooled aiohttp session. Both reuse connections and keep at most ``max_concurrency``
requests in flight. Single calls (``run``, health checks, canaries) use httpx. A provider
decides what to send and how to read the answer; it may also pace requests (``admit``) and
choose the wait before a retry (``retry_delay``). The defaults are those of
``decguard.http/0.1``: no pacing, ``retry_backoff_s × 2^attempt``.

Secrets: header values named by ``*_env`` settings are read from the environment at the
first request, kept only in :meth:`HttpTransport.request_headers` (listed by
:meth:`HttpTransport.secret_values`) and registered with ``core.secrets`` as they are read,
so they are redacted by value wherever a model echoes them; they never reach a report, an
error message or a log.

Answers are read within ``max_response_bytes`` (decoded here, not by the client; over it:
``invalid_response``), only when they are 2xx (``body.py``), and every attempt ends within
``timeout_s`` from sending, whole: connecting, the response head and the body together
(``deadline.py`` for httpx, whose timeouts bound each read only; aiohttp's total timeout
and the lean client's own timer here), so a model that sends a gzip bomb or trickles its
head or its answer byte by byte cannot exhaust memory or hold a worker. An attempt out of
time is a ``timeout`` (retried only while it was still connecting, as DecGuard retries
``ConnectTimeout``).
"""

from __future__ import annotations

import asyncio
import functools
import os
import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import httpx

from decguard_pipeline.backends.base import ANSWERED_AT, Backend
from decguard_pipeline.backends.body import ACCEPT_ENCODING, BoundedBody, TooLarge, read_within
from decguard_pipeline.backends.plain_http import (
    Broken,
    ConnectFailed,
    Pool,
    TimedOut,
    request_head,
)
from decguard_pipeline.backends.proxy import env_proxy, register_proxy_passwords
from decguard_pipeline.core.errors import (
    BackendError,
    BackendTimeout,
    BackendUnavailable,
    ContractError,
    InvalidResponse,
)
from decguard_pipeline.core.product import __version__
from decguard_pipeline.core.secrets import register_secret

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


def no_literal_secrets(value: dict[str, str]) -> dict[str, str]:
    """Static headers must not carry credentials (they would sit in the contract)."""
    for header in value:
        if header.lower() in SECRET_HEADERS:
            raise ValueError(
                f"{header!r} looks like a credential; put it in an environment variable "
                "and use headers_from_env or bearer_token_env"
            )
    return value


def same_origin(a: str, b: str) -> bool:
    first, second = httpx.URL(a), httpx.URL(b)
    return (first.scheme, first.host, first.port) == (second.scheme, second.host, second.port)


@dataclass(frozen=True, slots=True)
class Reply:
    """An HTTP answer, whichever client fetched it. ``queued_s``: time the request waited
    for the provider's own pacing (``admit``) before it was sent, retries included."""

    status: int
    body: bytes
    headers: Mapping[str, str]  # case-insensitive (the client's own header mapping)
    queued_s: float = 0.0

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


@functools.lru_cache(maxsize=4)
def _verifying_context(cert_file: str | None, cert_dir: str | None) -> Any:
    return httpx.create_ssl_context()  # reads SSL_CERT_FILE / SSL_CERT_DIR as httpx would


def tls_context() -> Any:
    """httpx's default certificate-verifying ``ssl.SSLContext``, made once per process for
    the trust settings in the environment (``SSL_CERT_FILE``, ``SSL_CERT_DIR``) and shared by
    every client: each ``httpx.Client`` otherwise loads the CA bundle again (20-40 ms, about a
    tenth of a small target run against an HTTP model)."""
    return _verifying_context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


class HttpTransport(Backend):
    """A backend that talks HTTP. ``settings`` has at least ``timeout_s``, ``max_retries``,
    ``retry_backoff_s``, ``headers``, ``max_response_bytes`` and ``max_metadata_bytes``;
    subclasses say where credentials come from (``credential_sources``) and which URL's
    proxy applies (``proxy_target``)."""

    retryable: ClassVar[frozenset[int]] = RETRYABLE
    settings: Any

    def __init__(self, settings: Any, *, name: str = "default", model: str | None = None) -> None:
        super().__init__(name=name, model=model)
        self.settings = settings
        self.max_metadata_bytes = settings.max_metadata_bytes
        self._headers: dict[str, str] | None = None
        self._secrets: tuple[str, ...] = ()
        self._lock = threading.Lock()
        self._client: httpx.Client | None = None
        self._session: Any = None  # aiohttp.ClientSession, created inside the running loop
        self._session_loop: asyncio.AbstractEventLoop | None = None
        self._session_limit = 0
        self._proxy: tuple[Any, Any] = (None, None)  # (proxy URL, auth) from the environment
        self._batch_loop: asyncio.AbstractEventLoop | None = None
        self._pools: dict[tuple[str, int], Any] = {}  # (host, port) -> plain_http.Pool
        self._plain: dict[tuple[str, str, bool], Any] = {}  # (method, url, body?) -> (pool, head)

    # -- what a provider says ------------------------------------------------------------

    def credential_sources(self) -> dict[str, tuple[str, str]]:
        """Header -> (environment variable, value prefix) for every secret header."""
        return {header: (variable, "") for header, variable in self.headers_from_env().items()}

    def headers_from_env(self) -> dict[str, str]:
        return dict(getattr(self.settings, "headers_from_env", {}))

    def missing_variable(self, variable: str) -> ContractError:
        return ContractError(
            f"{self.provider} backend {self.name!r}: environment variable {variable} is not set"
        )

    def proxy_target(self) -> str:
        """The URL whose proxy (from the environment) the batch session uses."""
        return str(self.settings.url)

    def admit(self, body: bytes | None) -> float:
        """Seconds to wait before sending ``body`` (a provider's own rate limit)."""
        return 0.0

    def retry_delay(self, attempt: int, reply: Reply | None) -> float | None:
        """Seconds to wait before retry ``attempt + 1`` after ``reply`` (None: the connection
        failed); None gives up and hands ``reply`` back as the answer."""
        return float(self.settings.retry_backoff_s * 2**attempt)

    # -- credentials -----------------------------------------------------------------------

    def request_headers(self) -> dict[str, str]:
        """Static plus environment headers; read once, at the first request."""
        with self._lock:
            if self._headers is None:
                headers = {"User-Agent": USER_AGENT, **self.settings.headers}
                secrets = []
                for header, (variable, prefix) in self.credential_sources().items():
                    value = os.environ.get(variable)
                    if not value:
                        raise self.missing_variable(variable)
                    register_secret(value)  # before any request can carry it
                    headers[header] = prefix + value
                    secrets.append(value)
                register_proxy_passwords()  # both clients send them to the proxy
                self._headers, self._secrets = headers, tuple(secrets)
            return self._headers

    def secret_values(self) -> tuple[str, ...]:
        """The secret values read from the environment so far (for redaction by value)."""
        with self._lock:
            return self._secrets

    # -- synchronous path (httpx): single calls and health checks -------------------------

    def _sync_client(self) -> httpx.Client:
        from decguard_pipeline.backends.deadline import deadline_client  # httpcore: sync only

        headers = {"Accept-Encoding": ACCEPT_ENCODING, **self.request_headers()}
        with self._lock:
            if self._client is None:
                self._client = deadline_client(
                    tls_context(),
                    headers=headers,
                    timeout=self.settings.timeout_s,
                    follow_redirects=False,
                )
            return self._client

    def _send_sync(
        self, method: str, url: str, body: bytes | None = None, *, read: bool = True
    ) -> Reply:
        """The final answer (retries done). Only a 2xx body is read, and only when ``read``:
        the body of any other status is never used (a reply handed to ``retry_delay`` has
        its status and headers only)."""
        from decguard_pipeline.backends.deadline import deadline

        client = self._sync_client()
        extra = {"Content-Type": "application/json"} if body is not None else None
        attempts = self.settings.max_retries + 1
        queued = 0.0
        for attempt in range(attempts):
            last = attempt == attempts - 1
            pause = self.admit(body)
            if pause > 0.0:
                time.sleep(pause)
                queued += pause
            reply: Reply | None = None
            try:
                with (
                    deadline(self.settings.timeout_s),
                    client.stream(method, url, content=body, headers=extra) as response,
                ):
                    status = response.status_code
                    if status not in self.retryable or last:
                        wanted = read and 200 <= status < 300
                        content = self._read_sync(response) if wanted else b""
                        return Reply(status, content, response.headers, queued)
                    reply = Reply(status, b"", response.headers, queued)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                if last:
                    raise self._connect_error(type(exc).__name__) from exc
            except httpx.TimeoutException as exc:
                raise self._timeout() from exc
            except httpx.TransportError as exc:
                raise self._transport_error(type(exc).__name__) from exc
            delay = self.retry_delay(attempt, reply)
            if delay is None and reply is not None:
                return reply
            time.sleep(delay or 0.0)
        raise AssertionError("unreachable")

    def _read_sync(self, response: httpx.Response) -> bytes:
        try:
            return read_within(response, self.settings.max_response_bytes)
        except TooLarge:
            raise self._too_large() from None

    # -- asynchronous path (aiohttp): batch runs ---------------------------------------

    def open_session(self, limit: int) -> None:
        """Size the pool for a run of at most ``limit`` requests in flight."""
        self._session_limit = limit

    def _batch_state(self) -> None:
        """Per event loop: the proxy the environment sets for this backend (resolved once:
        aiohttp's trust_env looks it and ~/.netrc up on a worker thread for every request),
        and no pooled connection of an earlier loop."""
        loop = asyncio.get_running_loop()
        if self._batch_loop is not loop:
            from urllib.request import getproxies

            # without proxy variables there is nothing to look up (nor aiohttp to import)
            self._proxy = env_proxy(self.proxy_target()) if getproxies() else (None, None)
            self._pools, self._plain = {}, {}
            self._batch_loop = loop

    def _plain_target(self, method: str, url: str, body: bytes | None) -> Any:
        """(pool, request head) of the lean client for ``url``, or None: aiohttp sends it
        (https, a proxy, a header the lean client cannot write, or
        ``DECGUARD_HTTP_CLIENT=aiohttp``)."""
        key = (method, url, body is not None)
        found = self._plain.get(key, False)
        if found is not False:
            return found
        target = None
        wanted = os.environ.get("DECGUARD_HTTP_CLIENT", "").strip().lower() != "aiohttp"
        if wanted and self._proxy[0] is None:
            head = request_head(method, url, self.request_headers(), body is not None)
            if head is not None:
                host, port, prefix = head
                pool = self._pools.get((host, port))
                if pool is None:
                    pool = self._pools[(host, port)] = Pool(host, port, self._session_limit)
                target = (pool, prefix)
        self._plain[key] = target
        return target

    def _async_session(self) -> Any:
        import aiohttp

        loop = asyncio.get_running_loop()
        if self._session is None or self._session_loop is not loop:
            connector = aiohttp.TCPConnector(
                limit=max(self._session_limit, 1), limit_per_host=0, ttl_dns_cache=300
            )
            # total: connecting, the head and the body of one attempt together (each read
            # alone is no bound: a head or body may trickle in a byte at a time)
            timeout = aiohttp.ClientTimeout(
                total=self.settings.timeout_s,
                sock_connect=self.settings.timeout_s,
                sock_read=self.settings.timeout_s,
            )
            # Proxy variables are honoured as httpx honours them, resolved once per run
            # (_batch_state)
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=timeout,
                trace_configs=[_connection_trace()],
                headers=self.request_headers(),
                trust_env=False,
                auto_decompress=False,  # bodies are decoded within the limit (body.py)
                skip_auto_headers=("Accept-Encoding",),
            )
            self._session_loop = loop
        return self._session

    async def _send_async(self, method: str, url: str, body: bytes | None = None) -> Reply:
        """The final answer (retries done), as :meth:`_send_sync`: through the lean client
        (``plain_http.py``) for a plain ``http://`` URL without a proxy, aiohttp otherwise."""
        self._batch_state()
        plain = self._plain_target(method, url, body)
        if plain is not None:
            pool, head = plain
            data = head + b"%d\r\n\r\n" % len(body or b"") + (body or b"")  # once per case
        attempts = self.settings.max_retries + 1
        queued = 0.0
        for attempt in range(attempts):
            last = attempt == attempts - 1
            pause = self.admit(body)
            if pause > 0.0:
                await asyncio.sleep(pause)
                queued += pause
            if plain is not None:
                reply = await self._plain_attempt(pool, data, last, queued)
            else:
                reply = await self._aiohttp_attempt(method, url, body, last, queued)
            if reply is not None and (reply.status not in self.retryable or last):
                return reply
            delay = self.retry_delay(attempt, reply)
            if delay is None and reply is not None:
                return reply
            await asyncio.sleep(delay or 0.0)
        raise AssertionError("unreachable")

    async def _plain_attempt(
        self, pool: Any, data: bytes, last: bool, queued: float
    ) -> Reply | None:
        """One attempt through the lean client: its reply (a retryable status's without its
        body), or None when it could not connect and may be retried."""
        try:
            status, headers, content, read_at = await pool.request(
                data, self.settings.timeout_s, self.settings.max_response_bytes
            )
        except ConnectFailed as exc:
            if last:
                raise self._connect_error(exc.what) from exc
            return None
        except TimedOut as exc:
            raise self._timeout() from exc
        except Broken as exc:
            raise self._transport_error(exc.what) from exc
        except TooLarge:
            raise self._too_large() from None
        ANSWERED_AT.set(read_at)
        return Reply(status, content, headers, queued)

    async def _aiohttp_attempt(
        self, method: str, url: str, body: bytes | None, last: bool, queued: float
    ) -> Reply | None:
        """One attempt through aiohttp, as :meth:`_plain_attempt`."""
        import aiohttp

        session = self._async_session()
        extra = {"Content-Type": "application/json"} if body is not None else None
        progress = _Progress()
        try:
            async with session.request(
                method,
                url,
                data=body,
                headers=extra,
                allow_redirects=False,
                proxy=self._proxy[0],
                proxy_auth=self._proxy[1],
                trace_request_ctx=progress,
            ) as response:
                status = response.status
                if status not in self.retryable or last:
                    wanted = 200 <= status < 300
                    content = await self._read_async(response) if wanted else b""
                    return Reply(status, content, response.headers, queued)
                return Reply(status, b"", response.headers, queued)
        except aiohttp.ConnectionTimeoutError as exc:
            if last:
                raise self._connect_error("ConnectTimeout") from exc
        except aiohttp.ClientConnectorError as exc:
            if last:
                raise self._connect_error("ConnectError") from exc
        except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
            if progress.connected:
                raise self._timeout() from exc
            if last:  # out of time while still connecting: DecGuard's ConnectTimeout
                raise self._connect_error("ConnectTimeout") from exc
        except aiohttp.ServerDisconnectedError as exc:
            raise self._transport_error("RemoteProtocolError") from exc
        except aiohttp.ClientError as exc:
            raise self._transport_error(_httpx_name(exc)) from exc
        return None

    async def _read_async(self, response: Any) -> bytes:
        try:
            body = BoundedBody(response.headers, self.settings.max_response_bytes)
            async for chunk in response.content.iter_any():  # within the session's total
                body.feed(chunk)
            return body.finish()
        except TooLarge:
            raise self._too_large() from None

    # -- errors and lifecycle ---------------------------------------------------------------

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

    async def aclose(self) -> None:
        pools, self._pools, self._plain, self._batch_loop = self._pools, {}, {}, None
        for pool in pools.values():
            pool.close()
        session, self._session, self._session_loop = self._session, None, None
        if session is not None:
            await session.close()

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()


class _Progress:
    """How far one aiohttp attempt got (set by :func:`_connection_trace`)."""

    __slots__ = ("connected",)

    def __init__(self) -> None:
        self.connected = False


async def _connected(session: Any, context: Any, params: Any) -> None:
    progress = context.trace_request_ctx
    if isinstance(progress, _Progress):
        progress.connected = True


def _connection_trace() -> Any:
    """Marks an attempt connected once it holds a connection (new or reused): the session's
    total timeout firing before that is a connect timeout, retried as DecGuard retries one."""
    import aiohttp

    trace = aiohttp.TraceConfig()
    trace.on_connection_create_end.append(_connected)
    trace.on_connection_reuseconn.append(_connected)
    return trace


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
