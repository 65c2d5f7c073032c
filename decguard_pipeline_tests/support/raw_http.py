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
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from decguard_pipeline_tests.support.socket_server import hang_up, read_request, socket_server


@dataclass
class Raw:
    url: str
    asked: Counter[str] = field(default_factory=Counter)
    connections: int = 0


@contextmanager
def raw_http(answers: dict[str, tuple[bytes, bool]]) -> Iterator[Raw]:
    """Serve on an ephemeral loopback port from a background thread."""
    state = Raw("")

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        state.connections += 1
        try:
            while True:
                request = await read_request(reader)
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
            await hang_up(writer)

    with socket_server(handle, "raw-http-server") as port:
        state.url = f"http://127.0.0.1:{port}/decide"
        yield state
