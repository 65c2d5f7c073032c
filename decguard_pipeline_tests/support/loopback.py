"""A real decguard.http/0.1 model server on loopback, for tests and benchmarks.

It answers like the ``mock`` backend of a contract (rules, default, hashed fallback), after an
optional delay, and injects failures on request: a case id containing ``status=<code>``
answers that HTTP status, ``flaky=<n>`` fails with 503 on the first n attempts of that case,
``hang`` sleeps past any timeout, ``garbage`` answers invalid JSON, ``noprob`` answers JSON
without probabilities, ``drop`` closes the connection without answering.

    with serve(contract_path) as url: ...        # in-process, background thread
    python -m decguard_pipeline_tests.support.loopback CONTRACT --port 8080 --delay-ms 20
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from decguard_pipeline.backends.mock import MockBackend
from decguard_pipeline.core.contract import BackendConfig, DecisionSpec
from decguard_pipeline.core.decision import DecisionRequest
from decguard_pipeline.demo.threaded import serve_in_thread


@dataclass
class Behaviour:
    backend: MockBackend
    delay_s: float = 0.0
    healthy: bool = True
    attempts: Counter[str] = field(default_factory=Counter)
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    keep_requests: bool = True
    in_flight: int = 0
    max_in_flight: int = 0


def _mock_from(settings: dict[str, Any] | None, labels: tuple[str, ...]) -> MockBackend:
    spec = DecisionSpec("loopback", "choice", labels)
    config = BackendConfig.model_validate({"provider": "mock", **(settings or {})})
    return MockBackend.from_config(config, name="loopback", decision=spec)


def make_app(behaviour: Behaviour) -> web.Application:
    async def decide(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        case_id = str(body.get("case_id", ""))
        behaviour.attempts[case_id] += 1
        if behaviour.keep_requests:
            behaviour.requests.append(body)
            behaviour.headers.append(dict(request.headers))
        behaviour.in_flight += 1
        behaviour.max_in_flight = max(behaviour.max_in_flight, behaviour.in_flight)
        try:
            if behaviour.delay_s:
                await asyncio.sleep(behaviour.delay_s)
            if "hang" in case_id:
                await asyncio.sleep(3600)
            if "drop" in case_id:
                assert request.transport is not None
                request.transport.close()
                return web.Response(status=200)
            status = re.search(r"status=(\d{3})", case_id)
            if status:
                return web.json_response({"error": "secret-echo"}, status=int(status.group(1)))
            flaky = re.search(r"flaky=(\d+)", case_id)
            if flaky and behaviour.attempts[case_id] <= int(flaky.group(1)):
                return web.Response(status=503)
            if "garbage" in case_id:
                return web.Response(text="{not json", content_type="application/json")
            if "noprob" in case_id:
                return web.json_response({"answer": "yes"})
            labels = tuple(body["decision"]["labels"])
            prediction = behaviour.backend.predict(
                DecisionRequest(case_id, DecisionSpec("x", body["decision"]["type"], labels),
                                body["input"])
            )  # fmt: skip
            answer: dict[str, Any] = {"probabilities": prediction.probabilities}
            if prediction.model_version is not None:
                answer["model_version"] = prediction.model_version
            if "meta" in case_id:
                answer["metadata"] = {"trace": case_id, "api_key": "sk-should-not-leak"}
            return web.json_response(answer)
        finally:
            behaviour.in_flight -= 1

    async def healthz(request: web.Request) -> web.Response:
        return web.Response(status=200 if behaviour.healthy else 503, text="ok")

    app = web.Application()
    app.router.add_post("/decide", decide)
    app.router.add_get("/healthz", healthz)
    return app


@dataclass
class Server:
    url: str
    health_url: str
    behaviour: Behaviour


@contextmanager
def serve(
    mock_settings: dict[str, Any] | None = None,
    *,
    labels: tuple[str, ...] = ("yes", "no"),
    delay_ms: float = 0.0,
    keep_requests: bool = True,
) -> Iterator[Server]:
    """Run the server on an ephemeral loopback port in a background thread."""
    behaviour = Behaviour(
        _mock_from(mock_settings, labels), delay_s=delay_ms / 1000.0, keep_requests=keep_requests
    )
    with serve_in_thread(make_app(behaviour)) as port:
        base = f"http://127.0.0.1:{port}"
        yield Server(f"{base}/decide", f"{base}/healthz", behaviour)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--settings", help="JSON of mock settings (rules, default, seed)")
    parser.add_argument("--labels", default="yes,no")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--delay-ms", type=float, default=0.0)
    args = parser.parse_args()
    behaviour = Behaviour(
        _mock_from(json.loads(args.settings) if args.settings else None,
                   tuple(args.labels.split(","))),
        delay_s=args.delay_ms / 1000.0,
        keep_requests=False,
    )  # fmt: skip
    web.run_app(make_app(behaviour), host="127.0.0.1", port=args.port, access_log=None,
                print=None)  # fmt: skip


if __name__ == "__main__":
    main()
