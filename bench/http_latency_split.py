"""Where the latency recorded for a case against a loopback model goes: the lean HTTP
client's requests timed at each step, against the server's own stamps.

The model is bench/lean_loopback.py with ``--stamp`` (it answers with the moments it read the
request and handed back its answer, on the clock every process shares); the client is the
batch runner in this process, its transport's steps timed by wrapping them. For each case:

  before write     the runner's clock starts -> the request handed to the socket
  to the server    -> the server has read it (the kernel, and the server's loop)
  server           -> the server hands its answer to the socket (its 20 ms timer)
  back             -> our loop has read the whole answer (the kernel, and our loop)
  wake-up          -> the case's task runs again (one loop turn)
  parse            -> the answer is checked and parsed; the runner's clock stops

    .venv/bin/python bench/http_latency_split.py [--cases 10000] [--concurrency 64]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CLOCK = time.perf_counter
STEPS = ("before write", "to the server", "server", "back", "wake-up", "parse")


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def schedstat(pid: int | str = "self") -> tuple[float, float]:
    """(seconds on a CPU, seconds runnable but waiting for one) of a process's main thread
    so far (/proc/<pid>/schedstat): the second is what the machine's other work took."""
    with open(f"/proc/{pid}/schedstat") as stat:
        on_cpu, waiting, _ = stat.read().split()
    return int(on_cpu) / 1e9, int(waiting) / 1e9


def instrument(records: list[dict[str, float]]) -> None:
    """Time the lean client's steps of every request into ``records``."""
    from decguard_pipeline.backends import plain_http
    from decguard_pipeline.backends.http import HttpBackend

    connection, pool = plain_http._Connection, plain_http.Pool
    send, finish, request, apredict = (
        connection.send,
        connection._finish,
        pool.request,
        HttpBackend.apredict,
    )
    current: dict[int, dict[str, float]] = {}  # id(task) -> its record

    def timed_send(self: Any, data: bytes, deadline: float, limit: int) -> Any:
        import asyncio

        record = current[id(asyncio.current_task())]
        self.record = record
        record["write"] = CLOCK()
        return send(self, data, deadline, limit)

    def timed_finish(self: Any) -> None:
        record = self.record
        record["read"] = CLOCK()
        stamp = self.answer.headers.get("x-stamp")
        if stamp:
            record["received"], record["sent"] = map(float, stamp.split())
        finish(self)

    async def timed_request(self: Any, *args: Any) -> Any:
        import asyncio

        reply = await request(self, *args)
        current[id(asyncio.current_task())]["resumed"] = CLOCK()
        return reply

    async def timed_apredict(self: Any, case: Any) -> Any:
        import asyncio

        record = {"start": CLOCK()}
        current[id(asyncio.current_task())] = record
        prediction = await apredict(self, case)
        record["end"] = CLOCK()
        records.append(record)
        return prediction

    connection.send, connection._finish = timed_send, timed_finish  # type: ignore[method-assign]
    pool.request, HttpBackend.apredict = timed_request, timed_apredict  # type: ignore[method-assign]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    args = parser.parse_args()
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "lean_loopback.py"), "--port", str(port),
         "--delay-ms", str(args.delay_ms), "--stamp"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        run(port, args, server.pid)
    finally:
        server.terminate()
        server.wait(10)


def run(port: int, args: argparse.Namespace, server_pid: int) -> None:
    from decguard_pipeline.backends import create_backend
    from decguard_pipeline.backends.runner import Cases, run_cases
    from decguard_pipeline.core.contract import BackendConfig, DecisionSpec

    records: list[dict[str, float]] = []
    instrument(records)
    spec = DecisionSpec("is_urgent", "noul", ("yes", "no"))
    config = BackendConfig.model_validate(
        {"provider": "http", "url": f"http://127.0.0.1:{port}/decide", "timeout_s": 30}
    )
    n = args.cases
    ids = [f"c{i}" for i in range(n)]
    cases = Cases(ids, [f"text number {i}" for i in ids], [None] * n, [{} for _ in ids])
    load = os.getloadavg()[0]
    cpu = time.process_time()
    ours, theirs = schedstat(), schedstat(server_pid)
    started = CLOCK()
    with create_backend(config, decision=spec) as backend:
        results = run_cases(backend, spec, cases, max_concurrency=args.concurrency, tolerance=1e-3)
    wall, cpu = CLOCK() - started, time.process_time() - cpu
    ours = tuple(b - a for a, b in zip(ours, schedstat(), strict=True))
    theirs = tuple(b - a for a, b in zip(theirs, schedstat(server_pid), strict=True))
    recorded = [float(x) for x in results.latency_ms]
    ideal = args.concurrency / (args.delay_ms / 1000.0)
    print(f"{n:,} cases, {args.concurrency} in flight, server {args.delay_ms:g} ms, load {load:.1f}"
          f" -> {os.getloadavg()[0]:.1f}; {n / wall:,.0f} requests/s = {n / wall / ideal:.1%} of "
          f"ideal; client CPU {cpu / n * 1e6:.0f} µs a request")  # fmt: skip
    for who, (on_cpu, waiting) in (("client", ours), ("server", theirs)):
        share = waiting / wall
        print(
            f"{who}: on a CPU {on_cpu:.2f} s ({on_cpu / n * 1e6:.0f} µs a request), "
            f"runnable but waiting for a CPU {waiting:.2f} s = {share:.0%} of the run"
        )
    print(f"recorded by the runner: p50 {statistics.median(recorded):.2f} ms")
    spans = {
        "before write": ("start", "write"),
        "to the server": ("write", "received"),
        "server": ("received", "sent"),
        "back": ("sent", "read"),
        "wake-up": ("read", "resumed"),
        "parse": ("resumed", "end"),
        "total": ("start", "end"),
    }
    for name, (a, b) in spans.items():
        values = sorted((r[b] - r[a]) * 1000 for r in records if a in r and b in r)
        p90 = values[int(0.9 * len(values))]
        print(f"  {name:<14} p50 {statistics.median(values):7.3f} ms   mean "
              f"{statistics.fmean(values):7.3f} ms   p90 {p90:7.3f} ms")  # fmt: skip


if __name__ == "__main__":
    main()
