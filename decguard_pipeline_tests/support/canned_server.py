"""A loopback HTTP server answering canned replies (status, body, delay) for backend answers the
loopback model never gives."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from decguard_pipeline.demo.threaded import serve_in_thread


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
    server = Canned("")

    async def handle(request: web.Request) -> web.Response:
        body = await request.json()
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

    app = web.Application()
    app.router.add_post(path, handle)
    with serve_in_thread(app) as port:
        server.url = f"http://127.0.0.1:{port}{path}"
        yield server
