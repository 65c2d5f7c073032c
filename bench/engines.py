"""The ``openai`` provider under load: throughput against a loopback OpenAI-compatible server,
and how closely ``requests_per_minute`` is kept.

The server runs in its own process (this file with ``--serve``) so the client does not share
its interpreter (or its GIL). It answers every chat completion after ``--delay-ms`` (20) with
letter log-probabilities, and enforces a rate limit of its own when given one: a token bucket
holding one second of the limit, refusing with 429 when empty. Two runs of the runner
(``run_cases``, the code path of ``test`` and the pipeline), 64 requests in flight:

  (a) 10,000 cases, ``scoring: logprobs``, no limit: requests/s as a share of the ideal
      64 / 20 ms = 3,200/s (target >= 70%).
  (b) 10,000 cases with ``requests_per_minute: 6000`` (100/s; ~100 s): the rate the server
      saw, first to last request, against the limit (target within 5%), and how many it
      refused (target 0).

    .venv/bin/python bench/engines.py
    .venv/bin/python bench/engines.py --only a --repeat 3
    .venv/bin/python bench/engines.py --only b --rpm-cases 3000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONCURRENCY = 64
LABELS = ("billing", "technical", "sales")
ANSWER = {
    "id": "bench",
    "object": "chat.completion",
    "model": "bench-model-2026-01-01",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "A"},
            "finish_reason": "length",
            "logprobs": {
                "content": [
                    {
                        "token": "A",
                        "logprob": -0.3,
                        "top_logprobs": [
                            {"token": "A", "logprob": -0.3},
                            {"token": " B", "logprob": -1.6},
                            {"token": "C", "logprob": -2.9},
                            {"token": "The", "logprob": -4.0},
                        ],
                    }
                ]
            },
        }
    ],
    "usage": {"prompt_tokens": 60, "completion_tokens": 1, "total_tokens": 61},
}


# -- the server ----------------------------------------------------------------------------------


def serve(port: int, delay_ms: float, rpm: float | None) -> None:
    from aiohttp import web

    body = json.dumps(ANSWER).encode()
    rate = (rpm or 0) / 60.0
    state: dict[str, Any] = {"level": rate, "at": time.monotonic(), "arrivals": [], "refused": 0}

    async def chat(request: web.Request) -> web.Response:
        await request.read()
        now = time.monotonic()
        if rate:
            state["level"] = min(rate, state["level"] + (now - state["at"]) * rate)
            state["at"] = now
            if state["level"] < 1.0:
                state["refused"] += 1
                return web.Response(status=429, headers={"Retry-After": "1"})
            state["level"] -= 1.0
        state["arrivals"].append(now)
        await asyncio.sleep(delay_ms / 1000.0)
        return web.Response(body=body, content_type="application/json")

    async def stats(request: web.Request) -> web.Response:
        arrivals = state["arrivals"]
        span = arrivals[-1] - arrivals[0] if len(arrivals) > 1 else 0.0
        answer = {"requests": len(arrivals), "refused": state["refused"], "span_s": span}
        state["arrivals"], state["refused"] = [], 0
        return web.json_response(answer)

    decided = json.dumps({"probabilities": {"billing": 0.7, "technical": 0.2, "sales": 0.1}})

    async def decide(request: web.Request) -> web.Response:  # decguard.http/0.1, a baseline
        await request.read()
        await asyncio.sleep(delay_ms / 1000.0)
        return web.Response(text=decided, content_type="application/json")

    app = web.Application()
    app.router.add_post("/decide", decide)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/stats", stats)
    web.run_app(app, host="127.0.0.1", port=port, access_log=None, print=None)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(delay_ms: float, rpm: float | None) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    command = [sys.executable, __file__, "--serve", str(port), "--delay-ms", str(delay_ms)]
    if rpm:
        command += ["--server-rpm", str(rpm)]
    child = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return child, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)
    child.kill()
    raise SystemExit("the loopback server did not start")


# -- the client ----------------------------------------------------------------------------------


def run(url: str, n: int, provider: str = "openai", **settings: Any) -> tuple[float, Any, Any]:
    from decguard_pipeline.backends import create_backend
    from decguard_pipeline.backends.runner import Cases, run_cases
    from decguard_pipeline.core.contract import BackendConfig, DecisionSpec

    spec = DecisionSpec("route", "choice", LABELS, "Route the support ticket.")
    where = {"url": f"{url}/decide"} if provider == "http" else {"base_url": f"{url}/v1"}
    config = BackendConfig.model_validate(
        {"provider": provider, "model": "bench", **where, **settings}
    )
    backend = create_backend(config, decision=spec)
    inputs = [f"Ticket {i}: I was charged twice this month." for i in range(n)]
    cases = Cases([f"c{i}" for i in range(n)], inputs, [None] * n, [{} for _ in range(n)])
    start = time.perf_counter()
    results = run_cases(backend, spec, cases, max_concurrency=CONCURRENCY, tolerance=1e-3)
    wall = time.perf_counter() - start
    errors = results.errors_by_kind()
    if errors:
        print(f"    errors: {errors}")
    return wall, results, backend.run_stats()


def server_stats(url: str) -> dict[str, Any]:
    import httpx

    return dict(httpx.get(f"{url}/stats").json())


def part_a(cases: int, delay_ms: float, repeat: int) -> None:
    """The openai provider, and the http provider on the same server as a baseline (same
    runner and transport, a smaller request and answer): on a busy machine the ratio of the
    two says more than either share of the ideal."""
    ideal = CONCURRENCY / (delay_ms / 1000.0)
    print(
        f"(a) {cases:,} cases, scoring logprobs, {CONCURRENCY} in flight, server answers in "
        f"{delay_ms:g} ms (ideal {ideal:,.0f} requests/s)"
    )
    child, url = start_server(delay_ms, None)
    try:
        best: dict[str, float] = {}
        for provider in ("openai", "http"):
            run(url, 200, provider)  # warm-up: imports, first connections
        server_stats(url)
        for _ in range(repeat):  # interleaved, so both meet the same load
            for provider in ("openai", "http"):
                wall, results, _stats = run(url, cases, provider)
                server_stats(url)
                rps = cases / wall
                best[provider] = max(best.get(provider, 0.0), rps)
                p50 = float(sorted(results.latency_ms.tolist())[cases // 2])
                print(
                    f"    {provider:<7}{rps:7,.0f} requests/s = {rps / ideal:6.1%} of ideal · "
                    f"p50 latency {p50:.1f} ms · wall {wall:.2f} s"
                )
        share = best["openai"] / ideal
        verdict = "OK" if share >= 0.70 else "BELOW TARGET"
        print(
            f"    best: openai {share:.1%} of ideal (target >= 70%): {verdict}; "
            f"{best['openai'] / best['http']:.0%} of the http provider's rate"
        )
    finally:
        child.terminate()
        child.wait(10)


def part_b(cases: int, delay_ms: float, rpm: float) -> None:
    limit = rpm / 60.0
    print(
        f"(b) {cases:,} cases with requests_per_minute {rpm:g} ({limit:g}/s; the server "
        f"refuses beyond it), {CONCURRENCY} in flight (~{cases / limit:.0f} s)"
    )
    child, url = start_server(delay_ms, rpm)
    try:
        wall, _results, stats = run(url, cases, requests_per_minute=rpm, max_retries=0)
        seen = server_stats(url)
        rate = (seen["requests"] - 1) / seen["span_s"] if seen["span_s"] else float("nan")
        off = rate / limit - 1.0
        print(
            f"    server saw {seen['requests']:,} requests at {rate:.2f}/s "
            f"({off:+.2%} vs the limit) · refused {seen['refused']} · client wall "
            f"{wall:.1f} s ({cases / wall:.2f}/s) · paced {stats['paced']:,} requests, "
            f"{stats['paced_wait_s'] / max(stats['paced'], 1) * 1000:.0f} ms mean wait"
        )
        verdict = "OK" if abs(off) <= 0.05 and seen["refused"] == 0 else "BELOW TARGET"
        print(f"    target within 5% of the limit and nothing refused: {verdict}")
    finally:
        child.terminate()
        child.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", choices=["a", "b"])
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--rpm-cases", type=int, default=10_000)
    parser.add_argument("--rpm", type=float, default=6000.0)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--server-rpm", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.delay_ms, args.server_rpm)
        return
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    if args.only in (None, "a"):
        part_a(args.cases, args.delay_ms, args.repeat)
    if args.only in (None, "b"):
        part_b(args.rpm_cases, args.delay_ms, args.rpm)


if __name__ == "__main__":
    main()
