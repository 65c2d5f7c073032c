"""A raw HTTP/1.1 server on loopback that answers slowly: the status line at once, then the
rest a byte at a time, so that no single read ever waits long while the whole answer takes
far longer than any timeout. aiohttp's server writes a response head in one piece, hence a
plain asyncio socket server.

The request picks the fault (it is searched for in the request's bytes: path, JSON body,
prompt): ``trickle-headers`` trickles header lines for ever (the body never comes);
``trickle-body`` sends the head at once and trickles a body that never ends;
``trickle-both`` trickles a whole valid answer, head and body each taking ``both_s`` (0.3 s:
either phase alone fits in a timeout of 0.5 s, the two together do not). Any other
request gets ``answer`` (a JSON body) at once, and the connection is closed after it.

    with trickling(answer, interval_s=0.1) as server:   # server.url: http://127.0.0.1:<port>
        ...
        server.asked   # fault -> requests received
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from decguard_pipeline_tests.support.socket_server import hang_up, read_request, socket_server

FAULTS = ("trickle-headers", "trickle-body", "trickle-both")


@dataclass
class Trickling:
    url: str
    asked: Counter[str] = field(default_factory=Counter)


def _fault(request: bytes) -> str:
    for fault in FAULTS:
        if fault.encode() in request:
            return fault
    return "ok"


async def _drip(writer: asyncio.StreamWriter, data: bytes, interval_s: float) -> None:
    for i in range(len(data)):
        writer.write(data[i : i + 1])
        await writer.drain()
        await asyncio.sleep(interval_s)


async def _respond(
    writer: asyncio.StreamWriter, fault: str, answer: bytes, interval_s: float, both_s: float
) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\n")
    await writer.drain()
    if fault == "trickle-headers":
        while True:  # never ends: the client must give up
            await _drip(writer, b"X-Slow: 1\r\n", interval_s)
    if fault == "trickle-body":
        writer.write(b"Content-Type: application/json\r\nContent-Length: 1000000\r\n\r\n")
        await writer.drain()
        while True:  # JSON whitespace, a byte at a time: far fewer than promised arrive
            await _drip(writer, b" " * 64, interval_s)
    head = f"Content-Type: application/json\r\nContent-Length: {len(answer)}\r\n"
    head += "Connection: close\r\n"
    if fault == "trickle-both":
        await _paced(writer, head.encode() + b"\r\n", both_s)
        await _paced(writer, answer, both_s)
        return
    writer.write(head.encode() + b"\r\n" + answer)
    await writer.drain()


async def _paced(writer: asyncio.StreamWriter, data: bytes, total_s: float) -> None:
    """``data`` a byte at a time, evenly over ``total_s`` seconds (never sooner)."""
    loop = asyncio.get_running_loop()
    start, step = loop.time(), total_s / len(data)
    for i in range(len(data)):
        writer.write(data[i : i + 1])
        await writer.drain()
        await asyncio.sleep(max(0.0, start + (i + 1) * step - loop.time()))


@contextmanager
def trickling(
    answer: bytes | Callable[[bytes], bytes],
    *,
    interval_s: float = 0.1,
    both_s: float = 0.3,
) -> Iterator[Trickling]:
    """Serve on an ephemeral loopback port from a background thread. ``answer``: the body of
    a normal answer (or a function of the request's bytes giving it)."""
    state = Trickling("")

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await read_request(reader)
            fault = _fault(request)
            state.asked[fault] += 1
            body = answer(request) if callable(answer) else answer
            await _respond(writer, fault, body, interval_s, both_s)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # the client gave up (as it must) or sent nothing
        except asyncio.CancelledError:
            pass  # the server stops
        finally:
            await hang_up(writer)

    with socket_server(handle, "trickling-server") as port:
        state.url = f"http://127.0.0.1:{port}"
        yield state
