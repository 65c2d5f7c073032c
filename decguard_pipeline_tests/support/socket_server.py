"""A plain asyncio socket server on an ephemeral loopback port, run by a background thread:
for test servers that write HTTP bytes themselves (support/raw_http.py, support/trickling.py),
which a framework server would not produce on demand.

    with socket_server(handle, "raw-http-server") as port:
        ...
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

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
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict[str, Any] = {}

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

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    if not ready.wait(10):
        raise RuntimeError(f"the {name} did not start")
    try:
        yield holder["port"]
    finally:
        asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
