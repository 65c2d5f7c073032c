"""A lean HTTP/1.1 client for batch requests to plain ``http://`` models, on asyncio's public
Protocol/transport API: a keep-alive connection pool per origin, the request's bytes built
once per case, and a minimal response parser (status line, headers, ``Content-Length``,
chunked and close-delimited bodies; 1xx interim answers skipped).

Why: at 64 requests in flight on a loopback model, aiohttp's request machinery (a request
object, its headers, the connector, trace signals, a response stream per request) costs
350-500 µs of CPU a request on the event loop that also times every case; answers then wait
in their sockets for the loop, and the recorded latency grows with them. Here a request is
one ``transport.write`` and its answer is parsed in ``data_received``: one task wake-up
per request.

What it keeps of the batch transport (``transport.py`` maps its failures to the same typed
errors as aiohttp's): one total deadline per attempt, from asking for a connection to the
last body byte (a head or body trickling a byte at a time ends as a timeout); bodies read
within the size limit and decoded as they arrive (``body.py``); only 2xx bodies read (any
other status closes the connection, as an unread aiohttp response does); at most ``limit``
connections in use per origin, further requests waiting for one within their deadline.

It is used only for ``http://`` URLs that no proxy applies to (``transport.py`` decides;
https, proxies and ``DECGUARD_HTTP_CLIENT=aiohttp`` go through aiohttp).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Iterator, Mapping
from typing import Any

from decguard_pipeline.backends.body import BoundedBody

CLOCK = time.perf_counter  # the runner's clock: answers are stamped when read whole
MAX_HEAD_BYTES = 64 * 1024  # status line and headers together (aiohttp: 8 KiB a line)


class ConnectFailed(Exception):
    """No connection: ``what`` is ``ConnectError`` or ``ConnectTimeout`` (httpx's names)."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


class TimedOut(Exception):
    """The attempt's deadline passed after it had a connection."""


class Broken(Exception):
    """The connection failed or the answer is not HTTP/1.x: ``what`` is httpx's name for it
    (``ReadError``: reset or a socket error; ``RemoteProtocolError``: closed early or
    malformed)."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


class Headers(Mapping[str, str]):
    """Response headers, case-insensitive; a repeated header's values joined by ``, ``."""

    __slots__ = ("_items",)

    def __init__(self, items: dict[str, str]) -> None:
        self._items = items  # lower-case names

    def __getitem__(self, name: str) -> str:
        return self._items[name.lower()]

    def get(self, name: str, default: Any = None) -> Any:
        return self._items.get(name.lower(), default)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


def _parse_head(head: bytes) -> tuple[int, bool, Headers]:
    """(status, HTTP/1.0, headers) of a response head without its final blank line."""
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    version, code = parts[0], parts[1] if len(parts) > 1 else b""
    if version not in (b"HTTP/1.1", b"HTTP/1.0") or len(code) != 3 or not code.isdigit():
        raise Broken("RemoteProtocolError")
    items: dict[str, str] = {}
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip():
            raise Broken("RemoteProtocolError")
        key = name.decode("latin-1").lower()
        text = value.strip().decode("latin-1")
        items[key] = f"{items[key]}, {text}" if key in items else text
    return int(code), version == b"HTTP/1.0", Headers(items)


class _Answer:
    """What one request is reading: its head, then its body (by length, chunks or until the
    connection closes)."""

    __slots__ = ("body", "chunk_left", "framing", "headers", "keep", "left", "status", "trailers")

    def __init__(self) -> None:
        self.status = 0
        self.headers: Headers | None = None
        self.body: BoundedBody | None = None  # None: the body is not read (not 2xx)
        self.framing = ""  # "length", "chunked" or "close"
        self.left = 0  # bytes of a length-framed body still to come
        self.chunk_left = -1  # bytes of the current chunk still to come; -1: at a size line
        self.trailers = False  # past the last chunk, reading trailer lines
        self.keep = True  # the connection may carry another request afterwards


class _Connection(asyncio.Protocol):
    """One keep-alive connection; at most one request on it at a time."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.buffer = bytearray()
        self.waiter: asyncio.Future[tuple[int, Headers, bytes, float]] | None = None
        self.answer: _Answer | None = None
        self.limit = 0
        self.timer: asyncio.TimerHandle | None = None

    # -- asyncio's protocol --------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self.waiter is None:  # bytes nobody asked for: the connection is out of step
            self.abort()
            return
        self.buffer += data
        try:
            self._advance()
        except Exception as exc:  # TooLarge, a decoding error, a malformed answer
            self._fail(exc)

    def eof_received(self) -> bool:
        answer = self.answer
        if self.waiter is not None and answer is not None and answer.framing == "close":
            answer.keep = False
            self._finish()
        else:
            self._fail(Broken("RemoteProtocolError"))  # closed before the answer was whole
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.transport = None
        if self.waiter is not None:
            self._fail(Broken("RemoteProtocolError" if exc is None else "ReadError"))

    # -- one request ---------------------------------------------------------------------

    def send(self, data: bytes, deadline: float, limit: int) -> asyncio.Future[Any]:
        """Write a whole request; the future gives (status, headers, body, when it was read
        whole) by ``deadline`` (loop time), the body read only for a 2xx status, within
        ``limit`` decoded bytes."""
        waiter = self.waiter = self.loop.create_future()
        if self.transport is None:  # closed by the server before the request went out
            self.waiter = None
            waiter.set_exception(Broken("RemoteProtocolError"))
            return waiter
        self.answer, self.limit = _Answer(), limit
        self.timer = self.loop.call_at(deadline, self._expire)
        self.transport.write(data)
        return waiter

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def _expire(self) -> None:
        self.timer = None
        self._fail(TimedOut())

    def _fail(self, exc: Exception) -> None:
        waiter, self.waiter, self.answer = self.waiter, None, None
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.abort()  # whatever is left of the answer is unread: never reused
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    def _finish(self) -> None:
        waiter, answer = self.waiter, self.answer
        assert waiter is not None and answer is not None and answer.headers is not None
        try:
            body = answer.body.finish() if answer.body is not None else b""
        except Exception as exc:  # TooLarge or a decoding error at the end of the stream
            self._fail(exc)
            return
        self.waiter = self.answer = None
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if not answer.keep or self.buffer:  # bytes past the answer: out of step
            self.abort()
        if not waiter.done():
            waiter.set_result((answer.status, answer.headers, body, CLOCK()))

    # -- parsing -------------------------------------------------------------------------

    def _advance(self) -> None:
        answer = self.answer
        assert answer is not None
        while answer.headers is None:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buffer) > MAX_HEAD_BYTES:
                    raise Broken("RemoteProtocolError")
                return
            head = bytes(self.buffer[:end])
            del self.buffer[: end + 4]
            self._start_body(answer, head)
            if answer.headers is None:  # a 1xx interim answer: the real head follows
                continue
            if answer.body is None:  # a status whose body is never read
                answer.keep = False
                self._finish()
                return
        if answer.framing == "length":
            take = min(answer.left, len(self.buffer))
            if take:
                answer.left -= take
                piece = bytes(self.buffer[:take])
                del self.buffer[:take]
                answer.body.feed(piece)  # type: ignore[union-attr]
            if answer.left == 0:
                self._finish()
        elif answer.framing == "chunked":
            if self._chunks(answer):
                self._finish()
        elif self.buffer:  # until the connection closes
            piece = bytes(self.buffer)
            self.buffer.clear()
            answer.body.feed(piece)  # type: ignore[union-attr]

    def _start_body(self, answer: _Answer, head: bytes) -> None:
        status, old, headers = _parse_head(head)
        if 100 <= status < 200 and status != 101:
            return
        answer.status, answer.headers = status, headers
        connection = headers.get("connection", "").lower()
        answer.keep = "keep-alive" in connection if old else "close" not in connection
        if not 200 <= status < 300:
            return
        answer.body = BoundedBody(headers, self.limit)
        coding = headers.get("transfer-encoding")
        length = headers.get("content-length")
        if status in (204, 304):
            answer.framing, answer.left = "length", 0
        elif coding is not None:
            if coding.lower().rsplit(",", 1)[-1].strip() != "chunked":
                answer.framing = "close"
            else:
                answer.framing = "chunked"
        elif length is not None:
            if not length.isdigit():
                raise Broken("RemoteProtocolError")
            answer.framing, answer.left = "length", int(length)
        else:
            answer.framing = "close"
        if answer.framing == "close":
            answer.keep = False

    def _chunks(self, answer: _Answer) -> bool:
        """Feed the whole chunks in the buffer; True once the last chunk and the trailers
        are read."""
        buffer = self.buffer
        body = answer.body
        assert body is not None
        while True:
            if answer.trailers:
                end = buffer.find(b"\r\n")
                if end < 0:
                    if len(buffer) > MAX_HEAD_BYTES:
                        raise Broken("RemoteProtocolError")
                    return False
                del buffer[: end + 2]
                if end == 0:
                    return True
                continue
            if answer.chunk_left < 0:
                end = buffer.find(b"\r\n")
                if end < 0:
                    if len(buffer) > MAX_HEAD_BYTES:
                        raise Broken("RemoteProtocolError")
                    return False
                size = bytes(buffer[:end]).split(b";", 1)[0].strip()
                del buffer[: end + 2]
                try:
                    answer.chunk_left = int(size, 16)
                except ValueError:
                    raise Broken("RemoteProtocolError") from None
                if answer.chunk_left < 0:
                    raise Broken("RemoteProtocolError")
                if answer.chunk_left == 0:
                    answer.trailers = True
                    continue
            take = min(answer.chunk_left, len(buffer))
            if take:
                body.feed(bytes(buffer[:take]))
                del buffer[:take]
                answer.chunk_left -= take
            if answer.chunk_left > 0:
                return False
            if len(buffer) < 2:
                return False
            if buffer[:2] != b"\r\n":
                raise Broken("RemoteProtocolError")
            del buffer[:2]
            answer.chunk_left = -1


class Pool:
    """Keep-alive connections to one origin, at most ``limit`` in use at once."""

    def __init__(self, host: str, port: int, limit: int) -> None:
        self.host, self.port = host, port
        self.limit = max(limit, 1)
        self.idle: list[_Connection] = []
        self.busy = 0
        self.waiting: deque[asyncio.Future[None]] = deque()

    async def request(
        self, data: bytes, timeout_s: float, limit: int
    ) -> tuple[int, Headers, bytes, float]:
        """Send ``data`` (a whole request) and read its answer, all within ``timeout_s``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        await self._slot(deadline)
        connection: _Connection | None = None
        try:
            connection = await self._connection(loop, deadline)
            reply = await connection.send(data, deadline, limit)
            if not connection.closed:
                self.idle.append(connection)
            connection = None
            return reply
        finally:
            if connection is not None:  # failed or cancelled mid-request: never reused
                connection.abort()
            self._release()

    async def _slot(self, deadline: float) -> None:
        if self.busy < self.limit and not self.waiting:
            self.busy += 1
            return
        turn = asyncio.get_running_loop().create_future()
        self.waiting.append(turn)
        try:
            async with asyncio.timeout_at(deadline):
                await turn  # the slot is handed over with it (busy unchanged)
        except BaseException as exc:
            if turn.done() and not turn.cancelled():
                self._release()  # handed a slot as time ran out: pass it on
            else:
                turn.cancel()
                self.waiting.remove(turn)
            if isinstance(exc, TimeoutError):  # still waiting: as aiohttp's connector wait
                raise ConnectFailed("ConnectTimeout") from None
            raise

    def _release(self) -> None:
        while self.waiting:
            turn = self.waiting.popleft()
            if not turn.done():
                turn.set_result(None)  # the slot passes to the next request
                return
        self.busy -= 1

    async def _connection(self, loop: asyncio.AbstractEventLoop, deadline: float) -> _Connection:
        while self.idle:
            connection = self.idle.pop()  # the most recently used: the least likely closed
            if not connection.closed and connection.transport is not None:
                return connection
        try:
            async with asyncio.timeout_at(deadline):
                _, protocol = await loop.create_connection(
                    lambda: _Connection(loop), self.host, self.port
                )
        except TimeoutError:
            raise ConnectFailed("ConnectTimeout") from None
        except OSError:
            raise ConnectFailed("ConnectError") from None
        return protocol

    def close(self) -> None:
        idle, self.idle = self.idle, []
        for connection in idle:
            if connection.transport is not None:
                connection.transport.close()


_FRAMING = frozenset({"content-length", "transfer-encoding", "connection"})


def request_head(
    method: str, url: str, headers: Mapping[str, str], with_body: bool
) -> tuple[str, int, bytes] | None:
    """(host, port, the request's bytes up to the value of its ``Content-Length``) for
    ``method`` to ``url`` with ``headers`` (a later header of the same name wins, as in
    aiohttp); None where this client does not send it: not a plain ``http://`` URL, or a
    header it cannot put on the wire as is (not Latin-1, or with a line break)."""
    import httpx

    parsed = httpx.URL(url)
    if parsed.scheme != "http" or not parsed.raw_host:
        return None
    merged: dict[str, tuple[str, str]] = {"accept": ("Accept", "*/*")}
    for name, value in headers.items():
        if name.lower() not in _FRAMING:
            merged[name.lower()] = (name, value)
    if with_body:
        merged["content-type"] = ("Content-Type", "application/json")
    merged.setdefault("host", ("Host", parsed.netloc.decode("ascii")))
    lines = [method.encode("ascii") + b" " + parsed.raw_path + b" HTTP/1.1"]
    for name, value in [merged.pop("host"), *merged.values()]:
        text = f"{name}: {value}"
        if any((ord(c) < 32 and c != "\t") or ord(c) == 127 for c in text):
            return None  # a line break would end the header (or the head) early
        try:
            lines.append(text.encode("latin-1"))
        except UnicodeEncodeError:
            return None
    lines.append(b"Content-Length: ")
    return parsed.raw_host.decode("ascii"), parsed.port or 80, b"\r\n".join(lines)
