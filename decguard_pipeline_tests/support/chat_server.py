"""An OpenAI-style chat server on loopback for the paraphrase provider: it records each request
and answers by the user text (markers choose failures, otherwise three paraphrases)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from decguard_pipeline.demo.threaded import serve_in_thread

SECRET = "sk-test-never-in-a-report"


@dataclass
class Chat:
    url: str
    bodies: list[dict[str, Any]] = field(default_factory=list)
    authorizations: list[str | None] = field(default_factory=list)


def _chat_app(chat: Chat) -> web.Application:
    """Answers by the user text: markers choose failures, otherwise three paraphrases."""

    async def completions(request: web.Request) -> web.Response:
        body = await request.json()
        chat.bodies.append(body)
        chat.authorizations.append(request.headers.get("Authorization"))
        text = body["messages"][1]["content"]
        if "FAIL500" in text:
            return web.json_response({"error": {"message": f"echo {SECRET}"}}, status=500)
        if "SLOW" in text:
            await asyncio.sleep(1)
        if "HUGE" in text:  # over the 1 MiB limit: whitespace, then a valid answer
            return web.Response(body=b" " * (2 << 20) + b"{}", content_type="application/json")
        if "NOCHOICES" in text:
            return web.json_response({"object": "chat.completion"})
        content = json.dumps([text.upper(), f"  {text} indeed ", text.lower()])
        if "BADJSON" in text:
            content = "Sure! Here they are: one, two"
        if "FENCED" in text:
            content = f"```json\n{content}\n```"
        if "BLANK" in text:
            content = json.dumps(["fine", "   "])
        if "ECHOKEY" in text:  # a provider repeating the key it was sent
            key = request.headers.get("Authorization", "").removeprefix("Bearer ")
            content = json.dumps([f"KEY {key} ECHOED"])
            return web.json_response(
                {"model": f"served-{key}", "choices": [{"message": {"content": content}}]}
            )
        answer = {
            "model": "para-served-1",
            "system_fingerprint": "fp_123",
            "choices": [{"message": {"role": "assistant", "content": content}}],
        }
        return web.json_response(answer)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", completions)
    return app


@contextmanager
def chat_server() -> Iterator[Chat]:
    chat = Chat("")
    with serve_in_thread(_chat_app(chat)) as port:
        chat.url = f"http://127.0.0.1:{port}/v1"
        yield chat
