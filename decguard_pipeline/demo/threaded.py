"""Serve an aiohttp application on loopback from a background thread: what the demo LLM
server needs when a command starts it, and what every loopback model of the tests needs."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

from aiohttp import web

Start = Callable[[], Awaitable[int]]  # starts serving on the loop, gives the port
Cleanup = Callable[[], Awaitable[None]]


@contextmanager
def loop_in_thread(start: Start, cleanup: Cleanup, name: str) -> Iterator[int]:
    """Run ``start`` on an event loop of its own in a daemon thread and yield the port it
    gives; at the end ``cleanup``, then every task still running (a handler that hangs: a
    test's fault) is cancelled, not left for the collector. An ``OSError`` of ``start`` (a
    port that cannot be bound) is raised in the caller's thread."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    state: dict[str, Any] = {}

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            state["port"] = loop.run_until_complete(start())
        except OSError as exc:
            state["error"] = exc
        ready.set()
        if "error" not in state:
            loop.run_forever()

    async def stop() -> None:
        await cleanup()
        pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    if not ready.wait(10):
        raise RuntimeError(f"{name}: did not start within 10 s")
    if "error" in state:
        thread.join(10)
        loop.run_until_complete(cleanup())
        loop.close()
        raise state["error"]
    try:
        yield state["port"]
    finally:
        asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


@contextmanager
def serve_in_thread(
    app: web.Application,
    *,
    port: int = 0,
    name: str = "loopback-server",
    backlog: int = 128,
    shutdown_timeout: float = 0.5,
) -> Iterator[int]:
    """Serve ``app`` on 127.0.0.1:``port`` (0: any free port) from its own event loop in a
    daemon thread, and yield the port. A port that cannot be bound raises ``OSError`` in the
    caller's thread. The short ``shutdown_timeout`` keeps a handler that hangs (a test's
    fault) from holding the teardown for a minute."""
    runners: list[web.AppRunner] = []

    async def start() -> int:
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=shutdown_timeout)
        await runner.setup()
        runners.append(runner)
        site = web.TCPSite(runner, "127.0.0.1", port, backlog=backlog)
        await site.start()
        return site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def cleanup() -> None:
        for runner in runners:
            await runner.cleanup()

    with loop_in_thread(start, cleanup, name) as bound:
        yield bound
