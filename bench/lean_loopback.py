"""A lean decguard.http/0.1 model for latency benches: raw asyncio (uvloop when installed), one
protocol object per connection, HTTP/1.1 keep-alive, every POST answered after ``--delay-ms``.

It measures itself: for each request, from the moment its last byte was read to the moment
the answer was handed to the socket (the model's true latency as its own clock sees it), and
answers ``GET /stats`` with the count, p50, p90 and p99 of those in milliseconds, then resets
them. ``GET /healthz`` answers ok. With ``--stamp`` every answer also carries ``X-Stamp:
<received> <sent>``, its two moments on ``time.perf_counter`` (CLOCK_MONOTONIC, the clock
every process on the machine shares), so a client can split a request's time into its own
part, the trip to the server and back, and the server's (bench/http_latency_split.py).

    python bench/lean_loopback.py --port 8080 --delay-ms 20 [--labels yes,no]

The answer is the same distribution for every case (the first label 0.7, the rest sharing
0.3): this server exists to take as little CPU as possible from the client under test on a
2-CPU machine, not to model anything.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

CLOCK = time.perf_counter


class _Model:
    def __init__(self, delay_s: float, labels: list[str], stamp: bool = False) -> None:
        self.delay_s = delay_s
        self.stamp = stamp
        rest = 0.3 / max(len(labels) - 1, 1)
        probs = {label: (0.7 if i == 0 else rest) for i, label in enumerate(labels)}
        body = json.dumps({"probabilities": probs}).encode()
        self.answer = (
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
            + str(len(body)).encode()
            + b"\r\n\r\n"
            + body
        )
        self.latencies: list[float] = []

    def stats(self) -> bytes:
        values = sorted(self.latencies)
        self.latencies = []

        def at(q: float) -> float | None:
            if not values:
                return None
            return round(values[min(int(q * len(values)), len(values) - 1)] * 1000, 3)

        body = json.dumps({"n": len(values), "p50_ms": at(0.5), "p90_ms": at(0.9),
                           "p99_ms": at(0.99)}).encode()  # fmt: skip
        return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


class _Connection(asyncio.Protocol):
    def __init__(self, model: _Model) -> None:
        self.model = model
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            head_end = self.buffer.find(b"\r\n\r\n")
            if head_end < 0:
                return
            head = self.buffer[:head_end]
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            end = head_end + 4 + length
            if len(self.buffer) < end:
                return
            self.buffer = self.buffer[end:]
            self._answer(head.split(b" ", 2))

    def _answer(self, request_line: list[bytes]) -> None:
        assert self.transport is not None
        method, target = request_line[0], request_line[1]
        if method == b"GET":
            if target == b"/stats":
                self.transport.write(self.model.stats())
            else:
                self.transport.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            return
        start = CLOCK()
        loop = asyncio.get_running_loop()
        loop.call_later(self.model.delay_s, self._send, start)

    def _send(self, start: float) -> None:
        if self.transport is None or self.transport.is_closing():
            return
        if self.model.stamp:
            head, _, body = self.model.answer.partition(b"\r\n\r\n")
            stamp = b"\r\nX-Stamp: %.9f %.9f\r\n\r\n" % (start, CLOCK())
            self.transport.write(head + stamp + body)
        else:
            self.transport.write(self.model.answer)
        self.model.latencies.append(CLOCK() - start)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None


async def serve(port: int, delay_s: float, labels: list[str], stamp: bool = False) -> None:
    model = _Model(delay_s, labels, stamp)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Connection(model), "127.0.0.1", port, backlog=1024)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--labels", default="yes,no")
    parser.add_argument("--stamp", action="store_true", help="X-Stamp: <received> <sent>")
    args = parser.parse_args()
    runner = asyncio.run
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:
        pass
    runner(serve(args.port, args.delay_ms / 1000.0, args.labels.split(","), args.stamp))


if __name__ == "__main__":
    main()
