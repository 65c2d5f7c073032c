"""A hostile decguard.http/0.1 (and systemone) model on loopback: it misbehaves per request.

The fault is the case id up to ``#`` (``status-503#2`` is the second case of fault
``status-503``); :data:`FAULTS` lists each with the error kind it must give (``None``: an
answer). Faults happen on a real socket: statuses with and without Retry-After, connections
reset or closed mid-body, bodies that stall or trickle past the timeout, bodies of megabytes,
gzip and deflate bombs, corrupt gzip, NaN and sums off, metadata too deep or too large, and
models that echo the credentials they were sent (read from the request's ``Authorization``
and ``X-Api-Key`` headers) into metadata values and keys, model names, error bodies and
response headers.

    with hostile() as server: ...   # .url, .systemone_url, .health_url; background thread
"""

from __future__ import annotations

import asyncio
import functools
import json
import socket
import struct
import zlib
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from decguard_pipeline.demo.threaded import serve_in_thread

TIMEOUT_S = 0.5  # the backend timeout the faults are sized against
BOMB_BYTES = 200 << 20  # what a gzip bomb inflates to (from about 200 KB)
HUGE_BYTES = 2 << 20  # over the default 1 MiB limit


# Runs a command under a 4 GiB address-space cap (a regression then fails the test, not the
# machine) and prints its exit code and peak resident KiB. It is a fresh small process, so the
# peak is the command's own: a child forked straight from pytest would count pytest's pages.
_MEASURE = """
import os, resource, subprocess, sys
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
err = child.stderr.read()
_, status, usage = os.wait4(child.pid, 0)
sys.stderr.buffer.write(err)
print(os.waitstatus_to_exitcode(status), usage.ru_maxrss)
"""


def run_measured(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str, int]:
    """Exit code, stderr and peak resident memory (MiB) of a command."""
    import subprocess
    import sys

    ran = subprocess.run(
        [sys.executable, "-c", _MEASURE, *args], env=env, capture_output=True, text=True
    )
    code, peak_kib = ran.stdout.split()
    return int(code), ran.stderr, int(peak_kib) // 1024


@dataclass(frozen=True)
class Fault:
    kind: str | None  # error kind for the http backend; None: a stored answer
    same_as_decguard: bool = True  # DecGuard 0.1.1 gives the same outcome (and message)
    note: str = ""


FAULTS: dict[str, Fault] = {
    "ok": Fault(None),
    "status-500": Fault("backend_error"),
    "status-502": Fault("unavailable"),
    "status-503": Fault("unavailable"),
    "status-429": Fault("backend_error", note="http retries 502/503/504 only"),
    "status-429-retry-after": Fault("backend_error"),
    "status-503-retry-after": Fault("unavailable", note="Retry-After: 3600 is not obeyed"),
    "reset-mid-body": Fault("unavailable"),
    "close-mid-body": Fault("unavailable"),
    "stall-mid-body": Fault("timeout"),
    "hang": Fault("timeout"),
    "trickle": Fault("timeout", same_as_decguard=False, note="DecGuard waits it out"),
    "huge": Fault("invalid_response", same_as_decguard=False),
    "huge-chunked": Fault("invalid_response", same_as_decguard=False),
    "gzip-bomb": Fault("invalid_response", same_as_decguard=False),
    "deflate-bomb": Fault("invalid_response", same_as_decguard=False),
    "gzip-ok": Fault(None),
    "deflate-ok": Fault(None),
    "gzip-corrupt": Fault("exception"),
    "nan": Fault("invalid_response"),
    "infinity": Fault("invalid_response"),
    "sum-off": Fault("invalid_response"),
    "metadata-nan": Fault(None),
    "metadata-deep": Fault("invalid_response", same_as_decguard=False),
    "metadata-big": Fault("invalid_response", same_as_decguard=False),
    "echo-metadata": Fault(None),
    "echo-model": Fault(None),
    "echo-error": Fault("backend_error"),
    "echo-header": Fault(None),
}


@dataclass
class Hostile:
    url: str
    systemone_url: str
    attempts: Counter[str] = field(default_factory=Counter)

    @property
    def health_url(self) -> str:
        return self.url.replace("/decide", "/healthz")


def fault_of(case_id: str) -> str:
    """``gzip-bomb#2`` -> ``gzip-bomb``; a property pair ``whitespace/gzip-bomb#2/0`` too."""
    return case_id.split("#", 1)[0].rsplit("/", 1)[-1]


@functools.cache
def _bomb(coding: str) -> bytes:
    wbits = zlib.MAX_WBITS | 16 if coding == "gzip" else zlib.MAX_WBITS
    packer = zlib.compressobj(9, zlib.DEFLATED, wbits)
    head = b'{"probabilities": {"yes": 0.5, "no": 0.5}, "metadata": {"pad": "'
    zeros = b"0" * (1 << 20)
    parts = [packer.compress(head)]
    parts += [packer.compress(zeros) for _ in range(BOMB_BYTES >> 20)]
    parts += [packer.compress(b'"}}'), packer.flush()]
    return b"".join(parts)


def _pack(coding: str, data: bytes) -> bytes:
    wbits = zlib.MAX_WBITS | 16 if coding == "gzip" else zlib.MAX_WBITS
    packer = zlib.compressobj(6, zlib.DEFLATED, wbits)
    return packer.compress(data) + packer.flush()


def _secrets(request: web.Request) -> list[str]:
    """What the client sent as credentials (the bearer token without its scheme)."""
    found = []
    auth = request.headers.get("Authorization", "")
    if auth:
        found.append(auth.removeprefix("Bearer "))
    if request.headers.get("X-Api-Key"):
        found.append(request.headers["X-Api-Key"])
    return found


def _answer(fault: str, request: web.Request) -> dict[str, Any]:
    """The decguard.http/0.1 body of faults that answer (or echo) with JSON."""
    answer: dict[str, Any] = {"probabilities": {"yes": 0.75, "no": 0.25}}
    secrets = _secrets(request)
    if fault == "sum-off":
        answer["probabilities"] = {"yes": 0.7, "no": 0.2}
    elif fault == "metadata-nan":
        answer["metadata"] = {"score": float("nan"), "hi": float("inf"), "lo": [float("-inf")]}
    elif fault == "metadata-deep":
        nested: Any = "bottom"
        for _ in range(150):
            nested = [nested]
        answer["metadata"] = {"deep": nested}
    elif fault == "metadata-big":
        answer["metadata"] = {"pad": "x" * 100_000}
    elif fault == "echo-metadata":
        joined = " ".join(secrets)
        answer["metadata"] = {
            "trace": f"auth was {joined}!",
            "nested": {"seen": [joined, {"again": secrets}]},
            **{secret: "as a key" for secret in secrets},
            "authorization": joined,  # a secret-looking key: DecGuard's own rule applies
        }
    elif fault == "echo-model":
        answer["model"] = f"model-{secrets[0]}"
        answer["model_version"] = "v-" + "-".join(secrets)
    return answer


def _systemone_answer(body: dict[str, Any], request: web.Request) -> dict[str, Any]:
    (name,) = body["questions"]
    question = body["questions"][name]
    options = list(question["criteria"])
    probabilities = {option: 1.0 / len(options) for option in options}
    secrets = _secrets(request)
    return {
        "id": "req-" + "-".join(secrets),
        "model": "served-" + secrets[0],
        "provider": "upstream " + " ".join(secrets),
        "answers": {
            name: {"type": question["type"], "choice": options[0], "probabilities": probabilities}
        },
        "usage": {"input_tokens": 3, "output_tokens": 1, "cost": 0.0},
    }


def _linger_reset(request: web.Request) -> None:
    """Close with RST (SO_LINGER 0), as a crashed or killed server does."""
    transport = request.transport
    assert transport is not None
    sock = transport.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


async def _stream(request: web.Request, headers: dict[str, str], pieces: Any) -> Any:
    response = web.StreamResponse(status=200, headers=headers)
    await response.prepare(request)
    try:
        async for piece in pieces:
            await response.write(piece)
        await response.write_eof()
    except (ConnectionError, RuntimeError):  # the client gave up: stop sending
        pass
    return response


def make_app(state: Hostile) -> web.Application:
    async def decide(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        fault = fault_of(str(body.get("case_id", "")))
        state.attempts[fault] += 1
        return await misbehave(fault, request, body)

    async def systemone(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        state.attempts["systemone"] += 1
        secrets = _secrets(request)
        return web.json_response(
            _systemone_answer(body, request),
            headers={"x-typesafe-request-id": "hdr-" + "-".join(secrets)},
        )

    async def healthz(request: web.Request) -> web.Response:
        """A JSON health answer whose model version echoes the credentials."""
        return web.json_response({"status": "ok", "model_version": "v-" + _secrets(request)[0]})

    async def healthz_huge(request: web.Request) -> web.Response:
        return web.Response(body=b" " * HUGE_BYTES + b'{"model_version": "v9"}')

    app = web.Application()
    app.router.add_post("/decide", decide)
    app.router.add_post("/systemone", systemone)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/healthz-huge", healthz_huge)
    return app


async def misbehave(fault: str, request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
    json_type = {"Content-Type": "application/json"}
    if fault.startswith("status-"):
        code = int(fault.split("-")[1])
        headers = {"Retry-After": "3600"} if fault.endswith("retry-after") else {}
        return web.json_response({"error": "busy"}, status=code, headers=headers)
    if fault == "echo-error":
        text = "denied for " + " and ".join(_secrets(request))
        return web.json_response({"error": text, "seen": dict(request.headers)}, status=500)
    if fault == "echo-header":
        secrets = _secrets(request)
        headers = {"X-Echo-Auth": " ".join(secrets), "Set-Cookie": f"s={secrets[0]}"}
        return web.json_response(_answer("ok", request), headers=headers)
    if fault == "hang":
        await asyncio.sleep(TIMEOUT_S * 6)
        return web.json_response(_answer("ok", request))
    answer = json.dumps(_answer(fault, request)).encode()
    if fault in ("reset-mid-body", "close-mid-body", "stall-mid-body"):
        response = web.StreamResponse(
            status=200, headers={**json_type, "Content-Length": str(len(answer))}
        )
        await response.prepare(request)
        await response.write(answer[:10])
        if fault == "stall-mid-body":
            await asyncio.sleep(TIMEOUT_S * 6)
        elif fault == "reset-mid-body":
            _linger_reset(request)
        else:
            assert request.transport is not None
            request.transport.close()
        return response
    if fault == "trickle":  # a byte every TIMEOUT_S/5: no read waits long, the whole takes 10x

        async def drip() -> Any:
            for i in range(len(answer)):
                yield answer[i : i + 1]
                await asyncio.sleep(TIMEOUT_S / 5)

        return await _stream(request, json_type, drip())
    if fault in ("huge", "huge-chunked"):
        pad = b" " * HUGE_BYTES  # valid JSON: whitespace before the object
        if fault == "huge":
            return web.Response(body=pad + answer, headers=json_type)

        async def chunks() -> Any:
            for start in range(0, len(pad), 1 << 16):
                yield pad[start : start + (1 << 16)]
            yield answer

        return await _stream(request, json_type, chunks())
    if fault in ("gzip-bomb", "deflate-bomb"):
        coding = fault.split("-")[0]
        return web.Response(body=_bomb(coding), headers={**json_type, "Content-Encoding": coding})
    if fault in ("gzip-ok", "deflate-ok"):
        coding = fault.split("-")[0]
        packed = _pack(coding, answer)
        return web.Response(body=packed, headers={**json_type, "Content-Encoding": coding})
    if fault == "gzip-corrupt":
        return web.Response(
            body=b"\x1f\x8b\x08\x00garbage-not-deflate" * 4,
            headers={**json_type, "Content-Encoding": "gzip"},
        )
    if fault in ("nan", "infinity"):
        value = b"NaN" if fault == "nan" else b"Infinity"
        return web.Response(
            body=b'{"probabilities": {"yes": ' + value + b', "no": 0.5}}', headers=json_type
        )
    return web.Response(body=answer, headers=json_type)


@contextmanager
def hostile() -> Iterator[Hostile]:
    """Serve the hostile model on an ephemeral loopback port from a background thread."""
    state = Hostile("", "")
    for coding in ("gzip", "deflate"):  # made once, before serving: it takes a second
        _bomb(coding)
    with serve_in_thread(make_app(state)) as port:
        state.url = f"http://127.0.0.1:{port}/decide"
        state.systemone_url = f"http://127.0.0.1:{port}/systemone"
        yield state
