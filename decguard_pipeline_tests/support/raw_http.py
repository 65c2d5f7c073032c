"""A loopback server that answers each request with raw bytes, for HTTP/1.1 framings a
framework server does not produce on demand: chunked bodies with extensions and trailers,
1xx interim answers, bodies ended by closing the connection, HTTP/1.0, malformed heads.

The request picks its answer: the first key of ``answers`` found in the request's bytes
(the case id travels in the JSON body). ``answers[key]`` is ``(raw bytes, close)``: the
bytes are written as they are, then the connection is closed when ``close``.

    with raw_http({"chunked": (b"HTTP/1.1 200 OK\\r\\n...", False)}) as server:
        server.url, server.asked, server.connections
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Raw:
    url: str
    asked: Counter[str] = field(default_factory=Counter)
    connections: int = 0


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    return head + (await reader.readexactly(length) if length else b"")


@contextmanager
def raw_http(answers: dict[str, tuple[bytes, bool]]) -> Iterator[Raw]:
    """Serve on an ephemeral loopback port from a background thread."""
    state = Raw("")
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict[str, Any] = {}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        state.connections += 1
        try:
            while True:
                request = await _read_request(reader)
                key = next(k for k in answers if k.encode() in request)
                state.asked[key] += 1
                data, close = answers[key]
                writer.write(data)
                await writer.drain()
                if close:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # the client closed the connection, or the server stops
        finally:
            writer.close()
            with suppress(ConnectionError):
                await writer.wait_closed()

    async def start() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        holder["server"] = server
        holder["port"] = server.sockets[0].getsockname()[1]

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        ready.set()
        loop.run_forever()

    async def stop() -> None:
        holder["server"].close()
        pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    thread = threading.Thread(target=run, name="raw-http-server", daemon=True)
    thread.start()
    if not ready.wait(10):
        raise RuntimeError("the raw HTTP server did not start")
    state.url = f"http://127.0.0.1:{holder['port']}/decide"
    try:
        yield state
    finally:
        asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
