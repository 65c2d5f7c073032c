"""A real llama-cpp-python server for the slow engine tests, and a recording proxy in front of
it (what it answered is kept, to be replayed on loopback where no such server can run).

llama-cpp-python builds llama.cpp from source (minutes), so it is not a test dependency: the
tests find an interpreter that has it in ``$DECGUARD_LLAMA_PYTHON`` (or this one), and the
vocabulary GGUF for the tiny model (``support/tiny_gguf.py``) in ``$DECGUARD_LLAMA_VOCAB``.
The independent recomputation (``recompute``) runs in that interpreter too: llama_cpp's
``Llama`` in-process, no server, none of the provider's code."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from aiohttp import ClientSession, web

from decguard_pipeline.demo.threaded import serve_in_thread

LLAMA_PYTHON_ENV = "DECGUARD_LLAMA_PYTHON"
VOCAB_ENV = "DECGUARD_LLAMA_VOCAB"


def llama_python() -> str | None:
    """An interpreter with llama_cpp (and its server) installed, or None."""
    candidates = [os.environ.get(LLAMA_PYTHON_ENV), sys.executable]
    for python in filter(None, candidates):
        probe = subprocess.run(
            [python, "-c", "import llama_cpp.server, gguf"], capture_output=True, check=False
        )
        if probe.returncode == 0:
            return python
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def llama_cpp_server(python: str, model: Path, alias: str) -> Iterator[str]:
    """``python -m llama_cpp.server`` serving ``model`` as ``alias``; yields its base URL."""
    port = _free_port()
    command = [
        python, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", alias,
        "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--verbose", "False",
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 180
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited: {process.stderr.read()[-2000:]!r}")  # type: ignore[union-attr]
            try:
                if httpx.get(f"{base}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("llama_cpp.server did not start within 180 s")
            time.sleep(0.5)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@dataclass
class Recording:
    url: str  # the proxy's base URL (…/v1)
    exchanges: list[dict[str, Any]] = field(default_factory=list)


@contextmanager
def recording_proxy(target: str) -> Iterator[Recording]:
    """A loopback proxy to ``target`` (a base URL ending in /v1) that keeps every exchange:
    method, path, JSON body, status and JSON answer."""
    recording = Recording("")
    upstream = target.removesuffix("/v1")

    async def forward(request: web.Request) -> web.Response:
        raw = await request.read()
        async with ClientSession() as session, session.request(
            request.method, upstream + request.path_qs, data=raw or None,
            headers={"Content-Type": "application/json"} if raw else None,
        ) as answer:  # fmt: skip
            body = await answer.read()
            status = answer.status
        recording.exchanges.append(
            {
                "method": request.method,
                "path": request.path,
                "request": json.loads(raw) if raw else None,
                "status": status,
                "answer": json.loads(body) if body else None,
            }
        )
        return web.Response(status=status, body=body, content_type="application/json")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", forward)
    with serve_in_thread(app) as port:
        recording.url = f"http://127.0.0.1:{port}/v1"
        yield recording


RECOMPUTE = r"""
import json, sys
import numpy as np
from llama_cpp import Llama

tasks = json.load(sys.stdin)
llm = Llama(model_path=tasks["model"], n_ctx=2048, logits_all=True, verbose=False)
out = []
for task in tasks["tasks"]:
    if task["kind"] == "chat":
        answer = llm.create_chat_completion(
            messages=task["messages"], max_tokens=1, temperature=0.0, logprobs=True,
            top_logprobs=20,
        )
        top = answer["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
        out.append([[t["token"], float(t["logprob"])] for t in top])
    else:  # the mean log-probability of each option's tokens after the context, from logits
        scores = []
        context = llm.tokenize(task["context"].encode(), add_bos=True)
        for option in task["options"]:
            full = llm.tokenize((task["context"] + " " + option).encode(), add_bos=True)
            assert full[: len(context)] == context, "the context's tokens are not a prefix"
            llm.reset()
            llm.eval(full)
            logits = np.asarray(llm.scores[: len(full)], dtype=np.float64)
            shifted = logits - logits.max(axis=1, keepdims=True)
            logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
            own = [logp[i - 1, full[i]] for i in range(len(context), len(full))]
            scores.append(float(np.mean(own)))
        out.append(scores)
print(json.dumps(out))
"""


def recompute(python: str, model: Path, tasks: list[dict[str, Any]]) -> list[Any]:
    """What llama_cpp computes in-process for ``tasks`` (see RECOMPUTE)."""
    done = subprocess.run(
        [python, "-c", RECOMPUTE],
        input=json.dumps({"model": str(model), "tasks": tasks}),
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def replay_answer(exchanges: list[dict[str, Any]]) -> Any:
    """A handler for ``llm_server`` answering each request as the recording did (by method,
    path and exact JSON body; each recorded answer once, in order)."""
    remaining = list(exchanges)

    def answer(seen: Any) -> tuple[int, Any, dict[str, str]]:
        for i, exchange in enumerate(remaining):
            if (exchange["method"], exchange["path"], exchange["request"]) == (
                seen.method, seen.path, seen.body,
            ):  # fmt: skip
                remaining.pop(i)
                return exchange["status"], exchange["answer"], {}
        return 599, {"error": "not recorded"}, {}

    return answer
