"""Loopback servers for the language-model providers' tests: each test says what the server
answers (``handler(seen) -> (status, body, headers)``), the server records what it was sent.

    with llm_server(handler) as server:   # server.url is http://127.0.0.1:<port>
        ...
        server.seen   # every request: method, path, JSON body, headers
"""

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
class Seen:
    method: str
    path: str
    body: Any
    headers: dict[str, str]


Answer = tuple[int, Any, dict[str, str]]  # status, body (JSON value, str or bytes), headers


@dataclass
class LLMServer:
    url: str
    seen: list[Seen] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0

    def posts(self, path: str | None = None) -> list[Seen]:
        return [s for s in self.seen if s.method == "POST" and (path is None or s.path == path)]


def models(seen: Seen) -> Answer:
    """``GET /models``: the list of models served."""
    return 200, {"object": "list", "data": [{"id": "gpt-test", "object": "model"}]}, {}


@contextmanager
def llm_server(
    handler: Callable[[Seen], Answer],
    *,
    get: Callable[[Seen], Answer] = models,
    delay_s: float = 0.0,
) -> Iterator[LLMServer]:
    """Serve ``handler`` for POSTs (any path) and ``get`` for GETs on 127.0.0.1, from a
    background thread."""
    server = LLMServer("")

    async def handle(request: web.Request) -> web.Response:
        raw = await request.read()
        body = json.loads(raw) if raw else None
        seen = Seen(request.method, request.path, body, dict(request.headers))
        server.seen.append(seen)
        server.in_flight += 1
        server.max_in_flight = max(server.max_in_flight, server.in_flight)
        try:
            if delay_s:
                await asyncio.sleep(delay_s)
            status, payload, headers = (get if request.method == "GET" else handler)(seen)
        finally:
            server.in_flight -= 1
        if not isinstance(payload, bytes | str):
            payload = json.dumps(payload)
        return web.Response(
            status=status, body=payload, headers=headers, content_type="application/json"
        )

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    with serve_in_thread(app) as port:
        server.url = f"http://127.0.0.1:{port}"
        yield server


# -- answers in the shapes of the APIs ---------------------------------------------------------


def chat_answer(
    *contents: str,
    model: str = "test-model-2026-01-01",
    fingerprint: str | None = None,
    top_logprobs: list[tuple[str, float]] | None = None,
    usage: tuple[int, int] | None = (10, 1),
) -> dict[str, Any]:
    """A chat completion: one choice per content; top_logprobs for the first token."""
    choices = []
    for i, content in enumerate(contents):
        choice: dict[str, Any] = {
            "index": i,
            "message": {"role": "assistant", "content": content},
            "finish_reason": "length",
        }
        if top_logprobs is not None:
            alternatives = [{"token": t, "logprob": lp, "bytes": None} for t, lp in top_logprobs]
            first = {"token": content, "logprob": top_logprobs[0][1], "top_logprobs": alternatives}
            choice["logprobs"] = {"content": [first]}
        choices.append(choice)
    answer: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": model,
        "choices": choices,
    }
    if fingerprint is not None:
        answer["system_fingerprint"] = fingerprint
    if usage is not None:
        answer["usage"] = {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": sum(usage),
        }
    return answer
