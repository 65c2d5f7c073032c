"""One total deadline per synchronous HTTP attempt: connect, TLS, request, head and body.

httpx (and httpcore under it) time single socket operations only, so a server that sends
``HTTP/1.1 200 OK`` and then a header byte a second is never timed out, and a body deadline
can only start once the head has come. The synchronous clients (single calls, health checks,
canaries, version discovery, the paraphraser) therefore send through
:func:`deadline_client`: an ``httpx.Client`` whose transports are httpcore connection pools
(its public API) over a network backend that clamps every connect, TLS handshake, write and
read to what is left of the attempt's deadline (:func:`deadline`, set per attempt by the
caller, per thread). When it has run out, httpcore's own timeout is raised (``ConnectTimeout``
while connecting, ``ReadTimeout`` or ``WriteTimeout`` after) and handed on as httpx's
exception of the same name, as httpx's own transport does.

Proxies from the environment (``HTTP_PROXY``, ``HTTPS_PROXY``, ``ALL_PROXY``, ``NO_PROXY``)
apply as httpx applies them, through the client's ``mounts``. The batch client (aiohttp) has
a total timeout of its own (``transport.py``).
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any
from urllib.request import getproxies

import httpcore
import httpx

_deadline: ContextVar[float | None] = ContextVar("decguard_http_deadline", default=None)


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Requests sent (and bodies read) in this block end within ``seconds`` from now."""
    token = _deadline.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _deadline.reset(token)


def _left(timeout: float | None, expired: type[Exception]) -> float | None:
    """``timeout`` shortened to what is left of the deadline; ``expired`` once none is."""
    end = _deadline.get()
    if end is None:
        return timeout
    left = end - time.monotonic()
    if left <= 0.0:
        raise expired("the attempt's deadline has passed")
    return left if timeout is None else min(timeout, left)


class _Stream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        inner = self._inner.start_tls(
            ssl_context, server_hostname, _left(timeout, httpcore.ConnectTimeout)
        )
        return _Stream(inner)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Network(httpcore.NetworkBackend):
    def __init__(self) -> None:
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        wait = _left(timeout, httpcore.ConnectTimeout)
        return _Stream(self._inner.connect_tcp(host, port, wait, local_address, socket_options))

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        wait = _left(timeout, httpcore.ConnectTimeout)
        return _Stream(self._inner.connect_unix_socket(path, wait, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


_HTTPCORE_ERRORS = (
    httpcore.TimeoutException,
    httpcore.NetworkError,
    httpcore.ProtocolError,
    httpcore.ProxyError,
    httpcore.UnsupportedProtocol,
)


@contextmanager
def _as_httpx() -> Iterator[None]:
    """httpcore's exceptions as httpx's of the same name (httpx's own mapping)."""
    try:
        yield
    except _HTTPCORE_ERRORS as exc:
        for kind in type(exc).__mro__:
            mapped = getattr(httpx, kind.__name__, None)
            if isinstance(mapped, type) and issubclass(mapped, httpx.TransportError):
                raise mapped(str(exc)) from exc
        raise


class _Body(httpx.SyncByteStream):
    def __init__(self, stream: Iterable[bytes]) -> None:
        self._stream = stream

    def __iter__(self) -> Iterator[bytes]:
        with _as_httpx():
            yield from self._stream

    def close(self) -> None:
        close = getattr(self._stream, "close", None)
        if close is not None:
            close()


class DeadlineTransport(httpx.BaseTransport):
    """httpx's transport contract over an httpcore pool whose sockets keep the deadline."""

    def __init__(self, ssl_context: Any, proxy: str | None = None) -> None:
        limits = httpx.Limits(max_connections=100, max_keepalive_connections=20)
        core_proxy = None
        if proxy is not None:
            parsed = httpx.Proxy(proxy)  # splits user:password off into Proxy-Authorization
            core_proxy = httpcore.Proxy(
                url=httpcore.URL(
                    scheme=parsed.url.raw_scheme,
                    host=parsed.url.raw_host,
                    port=parsed.url.port,
                    target=parsed.url.raw_path,
                ),
                auth=parsed.raw_auth,
                headers=parsed.headers.raw,
            )
        self._pool = httpcore.ConnectionPool(
            ssl_context=ssl_context,
            proxy=core_proxy,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=_Network(),
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        sent = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path
            ),
            headers=request.headers.raw,
            content=request.stream,  # type: ignore[arg-type]
            extensions=request.extensions,
        )
        with _as_httpx():
            answer = self._pool.handle_request(sent)
        return httpx.Response(
            status_code=answer.status,
            headers=answer.headers,
            stream=_Body(answer.stream),  # type: ignore[arg-type]
            extensions=answer.extensions,
        )

    def close(self) -> None:
        self._pool.close()


def _no_proxy_pattern(host: str) -> str:
    """A ``NO_PROXY`` entry as an httpx mount pattern (curl's rules, as httpx reads them)."""
    if "://" in host:
        return host
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return f"all://{host}" if host.lower() == "localhost" else f"all://*{host}"
    return f"all://[{host}]" if address.version == 6 else f"all://{host}"


def deadline_client(ssl_context: Any, **options: Any) -> httpx.Client:
    """An ``httpx.Client`` (``options``: headers, timeout, ...) whose every transport keeps
    the :func:`deadline`, the environment's proxies included."""
    direct = DeadlineTransport(ssl_context)
    mounts: dict[str, httpx.BaseTransport | None] = {}
    found = getproxies()
    no_proxy = [host.strip() for host in found.get("no", "").split(",") if host.strip()]
    if "*" not in no_proxy:
        for scheme in ("http", "https", "all"):
            if found.get(scheme):
                url = found[scheme] if "://" in found[scheme] else f"http://{found[scheme]}"
                mounts[f"{scheme}://"] = DeadlineTransport(ssl_context, proxy=url)
        if mounts:
            mounts.update({_no_proxy_pattern(host): direct for host in no_proxy})
    return httpx.Client(transport=direct, mounts=mounts, trust_env=False, **options)
