"""A plain asyncio socket server on an ephemeral loopback port, run by a background thread:
for test servers that write HTTP bytes themselves (support/raw_http.py, support/trickling.py),
which a framework server would not produce on demand.

    with socket_server(handle, "raw-http-server") as port:
        ...
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager, suppress

from decguard_pipeline.demo.threaded import loop_in_thread

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def read_request(reader: asyncio.StreamReader) -> bytes:
    """One request's bytes: its head and a ``Content-Length`` body."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    return head + (await reader.readexactly(length) if length else b"")


async def hang_up(writer: asyncio.StreamWriter) -> None:
    """Close a connection, whether or not the client already has."""
    writer.close()
    with suppress(ConnectionError):
        await writer.wait_closed()


@contextmanager
def socket_server(handle: Handler, name: str) -> Iterator[int]:
    """Serve ``handle`` until the block ends (its open connections cancelled); the port."""
    servers: list[asyncio.Server] = []

    async def start() -> int:
        servers.append(await asyncio.start_server(handle, "127.0.0.1", 0))
        return servers[0].sockets[0].getsockname()[1]

    async def cleanup() -> None:
        for server in servers:
            server.close()

    with loop_in_thread(start, cleanup, name) as port:
        yield port
