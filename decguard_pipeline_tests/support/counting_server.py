"""A decguard.http/0.1 model on loopback that counts what it is asked, for the response cache's
tests (issue 13): requests received per case id, answers completed, and a model version that
a test can change between runs.

It answers a deterministic distribution per (model version, input): the same model gives the
same answer every time, a new version another one. ``fail`` holds case ids answered with HTTP
503 (until a test clears it); the health answer names the model version, as a real serving
stack's does, so the backend knows its version without deciding anything. ``hold_after``
(when set) answers that many requests, then holds every later one until a test sets it back
to None: a server that stalls in the middle of a run.

    with counting_server(delay_ms=5) as server: server.url, server.health_url
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from decguard_pipeline.demo.threaded import serve_in_thread


def answer_for(version: str, labels: list[str], value: Any) -> dict[str, float]:
    """The model's distribution: a fixed function of its version and the input."""
    text = value if isinstance(value, str) else repr(sorted(value.items()))
    weights = [
        int.from_bytes(hashlib.sha256(f"{version}|{text}|{label}".encode()).digest()[:6], "big") + 1
        for label in labels
    ]
    total = sum(weights)
    return {label: w / total for label, w in zip(labels, weights, strict=True)}


@dataclass
class Counting:
    version: str = "model-v1"
    delay_s: float = 0.0
    fail: set[str] = field(default_factory=set)
    received: Counter[str] = field(default_factory=Counter)
    answered: int = 0  # 200 answers completed
    hold_after: int | None = None  # answer this many, then hold the rest until None
    admitted: int = 0  # requests let through while holding
    lock: threading.Lock = field(default_factory=threading.Lock)

    def admit(self) -> bool:
        """Whether a request may be answered now (False: held)."""
        with self.lock:
            if self.hold_after is None:
                return True
            if self.admitted < self.hold_after:
                self.admitted += 1
                return True
            return False

    @property
    def total(self) -> int:
        with self.lock:
            return sum(self.received.values())

    def reset(self) -> None:
        with self.lock:
            self.received.clear()
            self.answered = 0


def make_app(state: Counting) -> web.Application:
    async def decide(request: web.Request) -> web.Response:
        body = await request.json()
        case_id = str(body["case_id"])
        with state.lock:
            state.received[case_id] += 1
        while not state.admit():
            await asyncio.sleep(0.02)
        if state.delay_s:
            await asyncio.sleep(state.delay_s)
        if case_id in state.fail:
            return web.Response(status=503)
        labels = list(body["decision"]["labels"])
        answer = {
            "probabilities": answer_for(state.version, labels, body["input"]),
            "model_version": state.version,
        }
        response = web.json_response(answer)
        with state.lock:
            state.answered += 1
        return response

    async def healthz(request: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "model_version": state.version})

    app = web.Application()
    app.router.add_post("/decide", decide)
    app.router.add_get("/healthz", healthz)
    return app


@dataclass
class CountingServer:
    url: str
    health_url: str
    state: Counting


@contextmanager
def counting_server(
    *, delay_ms: float = 0.0, version: str = "model-v1"
) -> Iterator[CountingServer]:
    """The server on an ephemeral loopback port, in a background thread."""
    state = Counting(version=version, delay_s=delay_ms / 1000.0)
    with serve_in_thread(make_app(state), backlog=1024) as port:
        base = f"http://127.0.0.1:{port}"
        yield CountingServer(f"{base}/decide", f"{base}/healthz", state)
