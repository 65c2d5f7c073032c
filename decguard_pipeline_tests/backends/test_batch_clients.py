"""The two batch HTTP clients: the lean client for plain http:// URLs (backends/plain_http.py)
and aiohttp (https, proxies, ``DECGUARD_HTTP_CLIENT=aiohttp``). Answers framed every way
HTTP/1.1 allows, written byte for byte by a raw server on loopback, give the same results
through both; which client a run used is seen from the modules its process imported."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from decguard_pipeline_tests.support.raw_http import raw_http
from decguard_pipeline_tests.support.trickling import trickling

ANSWER = b'{"probabilities": {"yes": 0.75, "no": 0.25}}'
PACKED = gzip.compress(ANSWER)


def _chunked(body: bytes, *, trailer: bool) -> bytes:
    pieces = [body[:5], body[5:17], body[17:]]
    out = b"%x;name=value\r\n%s\r\n" % (len(pieces[0]), pieces[0])  # an extension, ignored
    out += b"".join(b"%X\r\n%s\r\n" % (len(p), p) for p in pieces[1:])
    return out + b"0\r\n" + (b"X-Trailer: t\r\n" if trailer else b"") + b"\r\n"


def _sized(body: bytes, status: str = "HTTP/1.1 200 OK", extra: str = "") -> bytes:
    return f"{status}\r\n{extra}Content-Length: {len(body)}\r\n\r\n".encode() + body


ANSWERS: dict[str, tuple[bytes, bool]] = {
    "sized": (_sized(ANSWER), False),
    "chunked": (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + _chunked(ANSWER, trailer=True),
        False,
    ),
    "gzip-chunked": (
        b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n"
        + _chunked(PACKED, trailer=False),
        False,
    ),
    "interim": (b"HTTP/1.1 100 Continue\r\n\r\n" + _sized(ANSWER), False),
    "until-close": (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n" + ANSWER, True),
    "http-1.0": (_sized(ANSWER, "HTTP/1.0 200 OK"), True),
    "close-after": (_sized(ANSWER, extra="Connection: close\r\n"), True),
    "odd-case": (_sized(ANSWER, extra="cOnTeNt-TyPe: application/json\r\n"), False),
    "status-404": (_sized(b"not here", "HTTP/1.1 404 Not Found"), False),
    "chunk-cut": (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n" + ANSWER[:10],
        True,
    ),
    "length-cut": (_sized(ANSWER)[:-5], True),
    "silent-close": (b"", True),
}
ANSWERED = ["sized", "chunked", "gzip-chunked", "interim", "until-close", "http-1.0",
            "close-after", "odd-case"]  # fmt: skip
CUT = "transport error from backend 'default': RemoteProtocolError"


def run_batch(url: str, ids: list[str], concurrency: int = 2) -> Any:
    from decguard_pipeline.backends import create_backend
    from decguard_pipeline.backends.runner import Cases, run_cases
    from decguard_pipeline.core.contract import BackendConfig, DecisionSpec

    spec = DecisionSpec("q", "choice", ("yes", "no"))
    config = BackendConfig.model_validate({"provider": "http", "url": url, "timeout_s": 5})
    cases = Cases(ids, [f"text {i}" for i in ids], [None] * len(ids), [{} for _ in ids])
    with create_backend(config, decision=spec) as backend:
        return run_cases(backend, spec, cases, max_concurrency=concurrency, tolerance=1e-3)


@pytest.mark.usefixtures("batch_client")
def test_every_framing_of_an_answer_reads_alike_through_both_clients():
    ids = [f"{key}#{i}" for i in range(2) for key in ANSWERS]
    with raw_http(ANSWERS) as server:
        results = run_batch(server.url, ids)
    outcome = {
        case: (kind, message, probs[0] if kind is None else None)
        for case, kind, message, probs in zip(
            ids, results.error_kind, results.error_message, results.probs.tolist(), strict=True
        )
    }
    want = {
        **{f"{key}#{i}": (None, None, 0.75) for i in range(2) for key in ANSWERED},
        **{
            f"status-404#{i}": ("backend_error", "backend 'default' returned HTTP 404", None)
            for i in range(2)
        },
        **{
            f"{key}#{i}": ("unavailable", CUT, None)
            for i in range(2)
            for key in ("chunk-cut", "length-cut", "silent-close")
        },
    }
    assert outcome == want


def test_the_lean_client_keeps_connections_alive_unless_the_answer_closes_them(monkeypatch):
    """Eight answers on one connection; an answer that asks to close (or is ended by closing)
    costs a new connection for the next request."""
    monkeypatch.delenv("DECGUARD_HTTP_CLIENT", raising=False)
    with raw_http(ANSWERS) as server:
        run_batch(server.url, [f"sized#{i}" for i in range(4)], concurrency=1)
        kept = server.connections
        run_batch(server.url, [f"close-after#{i}" for i in range(3)], concurrency=1)
        closed = server.connections - kept
    assert (kept, closed) == (1, 3)


def test_a_head_too_large_is_a_protocol_error_not_memory(monkeypatch):
    monkeypatch.delenv("DECGUARD_HTTP_CLIENT", raising=False)
    endless = b"HTTP/1.1 200 OK\r\n" + b"X-Pad: " + b"x" * (200 * 1024) + b"\r\n\r\n"
    with raw_http({"endless": (endless, True)}) as server:
        results = run_batch(server.url, ["endless#0"])
    assert (results.error_kind, results.error_message) == (["unavailable"], [CUT])


IMPORTED = (
    "import sys\n"
    "from decguard_pipeline.cli.app import main\n"
    "sys.argv = ['decguard-pipeline', 'test', 'c.yaml', '--no-healthcheck', '-o', 'r.json']\n"
    "try:\n    main()\nexcept SystemExit:\n    pass\n"
    "print('aiohttp' in sys.modules)\n"
)


def imports_aiohttp(folder: Path, url: str, env: dict[str, str]) -> tuple[bool, Any]:
    """Whether a batch run of ``decguard-pipeline test`` against ``url`` imported aiohttp,
    and its report."""
    (folder / "c.yaml").write_text(
        'schema_version: "0.1"\n'
        'decision: {name: q, type: choice, options: ["yes", "no"]}\n'
        f"backend: {{provider: http, url: {json.dumps(url)}, timeout_s: 5}}\n"
        "dataset: cases.jsonl\n"
    )
    (folder / "cases.jsonl").write_text(
        "".join(json.dumps({"id": f"sized#{i}", "input": "x"}) + "\n" for i in range(3))
    )
    ran = subprocess.run(
        [sys.executable, "-c", IMPORTED], cwd=folder, env=env, capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stderr
    report = json.loads((folder / "r.json").read_text())
    return ran.stdout.strip().splitlines()[-1] == "True", report


def _environment(**extra: str) -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if "PROXY" not in k.upper()}
    env.pop("DECGUARD_HTTP_CLIENT", None)
    return {**env, **extra}


def test_which_client_a_batch_run_uses(tmp_path):
    """Plain http:// without a proxy: the lean client (aiohttp is not even imported);
    ``DECGUARD_HTTP_CLIENT=aiohttp`` or a proxy from the environment: aiohttp, whose run
    reaches a host that does not resolve through the proxy."""
    with raw_http(ANSWERS) as server:
        lean, first = imports_aiohttp(tmp_path, server.url, _environment())
        forced, second = imports_aiohttp(
            tmp_path, server.url, _environment(DECGUARD_HTTP_CLIENT="aiohttp")
        )
    with trickling(ANSWER) as proxy:
        proxied, third = imports_aiohttp(
            tmp_path, "http://model.invalid/decide", _environment(HTTP_PROXY=proxy.url)
        )
        through = dict(proxy.asked)
    assert (lean, forced, proxied) == (False, True, True)
    for report in (first, second, third):
        assert [r["result"]["probabilities"] for r in report["results"]] == [
            {"yes": 0.75, "no": 0.25}
        ] * 3
    assert through == {"ok": 3}


def test_a_case_is_timed_until_its_answer_was_read_not_until_its_task_ran_again():
    """A client that says when it read the answer (``ANSWERED_AT``, as the lean client does)
    stops the case's clock there: the half second the task then spends before the runner
    sees the answer (standing for the wait for the event loop) is not the model's latency.
    Only moments the test itself took bound the figure, whatever the load."""
    import asyncio
    import time

    from decguard_pipeline.backends.base import ANSWERED_AT, Backend
    from decguard_pipeline.backends.runner import Cases, run_cases
    from decguard_pipeline.core.contract import DecisionSpec
    from decguard_pipeline.core.decision import Prediction

    read: list[float] = []

    class Stamping(Backend):
        provider = "stamping"

        async def apredict(self, request: Any) -> Prediction:
            read.append(time.perf_counter())
            ANSWERED_AT.set(read[-1])
            await asyncio.sleep(0.5)
            return Prediction({"yes": 0.75, "no": 0.25})

    spec = DecisionSpec("q", "choice", ("yes", "no"))
    before = time.perf_counter()
    results = run_cases(
        Stamping(), spec, Cases(["a"], ["x"], [None], [{}]), max_concurrency=1, tolerance=1e-3
    )
    assert results.error_kind == [None]
    assert 0.0 <= results.latency_ms[0] <= (read[0] - before) * 1000.0


@pytest.mark.parametrize(
    "value",
    [
        "plain",
        'ünïcødé \u2028 \x00 "quoted" \\ back',
        {"text": "object", "n": [1, 2.5, None, True], "nested": {"k": "\0input"}},
        ["\0case", 10**30],
        "",
    ],
)
def test_a_request_body_is_the_bytes_the_whole_payload_encodes_to(value):
    """The http provider encodes only case_id and input per case; the body is still exactly
    DecGuard's compact JSON of the whole payload, whatever the input holds (the markers the
    template is cut at included), and input that JSON cannot carry still fails the case."""
    from decguard_pipeline.backends import create_backend
    from decguard_pipeline.core.contract import BackendConfig, DecisionSpec
    from decguard_pipeline.core.decision import DecisionRequest

    config = BackendConfig.model_validate(
        {"provider": "http", "url": "http://127.0.0.1:9/decide", "model": "m\0case",
         "label_map": {"Y": "yes", "N": "no"}}
    )  # fmt: skip
    spec = DecisionSpec("q", "choice", ("yes", "no"))
    backend = create_backend(config, decision=spec)
    for case_id in ("c1", "c\0case\0input", "ü"):
        request = DecisionRequest(case_id, spec, value)
        whole = json.dumps(
            backend.payload(request), ensure_ascii=False, separators=(",", ":"), allow_nan=False
        ).encode()
        assert backend.encode(request) == whole
    with pytest.raises(ValueError, match="Out of range float values are not JSON compliant"):
        backend.encode(DecisionRequest("c", spec, {"x": float("nan")}))
