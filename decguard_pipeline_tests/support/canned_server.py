"""A loopback HTTP server answering canned replies (status, body, delay) for backend answers the
loopback model never gives."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class Canned:
    url: str
    bodies: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    peers: list[tuple[str, int]] = field(default_factory=list)


Reply = tuple[int, Any, dict[str, str]]  # status, body (bytes/str or JSON), headers


@contextmanager
def canned(
    reply: Callable[[dict[str, Any]], Reply], path: str = "/decide", delay_s: float = 0.0
) -> Iterator[Canned]:
    """Serve ``reply(request body)`` on 127.0.0.1 from a background thread."""
    state: dict[str, Any] = {}
    loop = asyncio.new_event_loop()
    ready = threading.Event()

    async def handle(request: web.Request) -> web.Response:
        body = await request.json()
        server: Canned = state["server"]
        server.bodies.append(body)
        server.headers.append(dict(request.headers))
        assert request.transport is not None
        server.peers.append(request.transport.get_extra_info("peername")[:2])
        if delay_s:
            await asyncio.sleep(delay_s)
        status, payload, headers = reply(body)
        if not isinstance(payload, bytes | str):
            payload = json.dumps(payload)
        return web.Response(status=status, body=payload, headers=headers)

    async def start() -> None:
        app = web.Application()
        app.router.add_post(path, handle)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        state["runner"] = runner
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        state["server"] = Canned(f"http://127.0.0.1:{port}{path}")

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        yield state["server"]
    finally:
        asyncio.run_coroutine_threadsafe(state["runner"].cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
