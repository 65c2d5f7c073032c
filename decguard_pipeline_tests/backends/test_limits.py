"""What every language-model provider does around the scoring: typed errors, retries that
honour Retry-After, pacing under rate limits, secrets, model versions, health, usage and
cost. Loopback servers answer; the pacing arithmetic is checked on a fake clock."""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from decguard_pipeline.backends import create_backend
from decguard_pipeline.backends.ratelimit import Bucket, Pacer, backoff_s, retry_after_s
from decguard_pipeline.backends.runner import Cases, run_cases
from decguard_pipeline.core.contract import BackendConfig, DecisionSpec
from decguard_pipeline.core.decision import DecisionRequest
from decguard_pipeline.core.errors import ContractError
from decguard_pipeline.core.usage import Pricing, case_cost, run_cost
from decguard_pipeline_tests.support.llm_servers import Seen, chat_answer, llm_server

SPEC = DecisionSpec("route", "choice", ("billing", "technical", "sales"))
LETTERS = [("A", -0.1), ("B", -2.0), ("C", -3.0)]


def backend(url: str, **settings: Any) -> Any:
    config = BackendConfig.model_validate(
        {
            "provider": "openai",
            "model": "gpt-test",
            "base_url": f"{url}/v1",
            "retry_backoff_s": 0,
            **settings,
        }
    )
    return create_backend(config, decision=SPEC)


def run(b: Any, inputs: list[str], concurrency: int = 4) -> Any:
    ids = [f"c{i}" for i in range(len(inputs))]
    cases = Cases(ids, inputs, [None] * len(inputs), [{} for _ in inputs])
    return run_cases(b, SPEC, cases, max_concurrency=concurrency, tolerance=1e-3)


def case_of(seen: Seen) -> str:
    return seen.body["messages"][0]["content"].split("Input:\n")[1].split("\n")[0]


# -- typed errors and retries --------------------------------------------------------------------


@pytest.mark.usefixtures("batch_client")
def test_every_failure_is_a_typed_error_and_no_body_is_kept():
    attempts: Counter[str] = Counter()

    def answer(seen: Seen) -> tuple[int, Any, dict[str, str]]:
        case = case_of(seen)
        attempts[case] += 1
        body = {"error": {"message": "secret-echo sk-live-123"}}
        if case == "limited":
            return 429, body, {}
        if case == "overloaded":
            return 503, body, {}
        if case == "broken":
            return 500, body, {}
        if case == "refused":
            return 400, body, {}
        if case == "garbage":
            return 200, b"{not json", {}
        if case == "list":
            return 200, [1, 2], {}
        if case == "flaky" and attempts[case] <= 2:
            return 502, body, {}
        return 200, chat_answer("A", top_logprobs=LETTERS), {}

    cases = ["limited", "overloaded", "broken", "refused", "garbage", "list", "flaky", "fine"]
    with llm_server(answer) as server:
        b = backend(server.url, max_retries=2)
        results = run(b, cases)
    assert dict(zip(cases, results.error_kind, strict=True)) == {
        "limited": "rate_limited",
        "overloaded": "unavailable",
        "broken": "unavailable",
        "refused": "backend_error",
        "garbage": "invalid_response",
        "list": "invalid_response",
        "flaky": None,
        "fine": None,
    }
    assert dict(attempts) == {
        "limited": 3,
        "overloaded": 3,
        "broken": 3,
        "refused": 1,
        "garbage": 1,
        "list": 1,
        "flaky": 3,
        "fine": 1,
    }
    assert results.error_message[:5] == [
        "backend 'default' returned HTTP 429 (rate limited) after 2 retries",
        "backend 'default' returned HTTP 503",
        "backend 'default' returned HTTP 500",
        "backend 'default' returned HTTP 400",
        "backend 'default' returned invalid JSON",
    ]
    assert "secret-echo" not in repr(results.error_message) + repr(results.result_metadata)
    stats = b.run_stats()
    assert stats["retries"] == 2 + 2 + 2 + 2 and stats["requests"] == sum(attempts.values())


@pytest.mark.usefixtures("batch_client")
def test_timeouts_and_refused_connections_are_typed():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    results = run(backend(f"http://127.0.0.1:{port}", max_retries=1), ["x"])
    assert results.error_kind == ["unavailable"]
    assert results.error_message == ["cannot connect to backend 'default': ConnectError"]
    ok = (200, chat_answer("A", top_logprobs=LETTERS), {})
    with llm_server(lambda s: ok, delay_s=1.0) as server:
        results = run(backend(server.url, timeout_s=0.2, max_retries=0), ["x"])
    assert results.error_kind == ["timeout"]
    assert results.error_message == ["backend 'default' timed out after 0.2s"]


def test_429_waits_as_long_as_retry_after_says_and_holds_the_whole_backend():
    asked: Counter[str] = Counter()

    def answer(seen: Seen) -> tuple[int, Any, dict[str, str]]:
        case = case_of(seen)
        asked[case] += 1
        if asked[case] == 1 and case == "seconds":
            return 429, {}, {"Retry-After": "1"}
        if asked[case] == 1 and case == "millis":
            return 503, {}, {"retry-after-ms": "20"}
        if asked[case] == 1 and case == "date":  # an HTTP-date in the past: no wait
            return 429, {}, {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}
        if case == "too long":
            return 429, {}, {"Retry-After": "120"}
        return 200, chat_answer("A", top_logprobs=LETTERS), {}

    with llm_server(answer) as server:
        b = backend(server.url, max_retry_wait_s=60)
        results = run(b, ["seconds", "millis", "date", "too long"], concurrency=1)
    assert results.error_kind == [None, None, None, "rate_limited"]
    assert asked["too long"] == 1  # a wait beyond max_retry_wait_s is not waited
    stats = b.run_stats()
    assert (stats["retries"], stats["retry_after_honoured"]) == (3, 3)
    assert stats["retry_wait_s"] == pytest.approx(1.0 + 0.02 + 0.0)
    # a retry's wait is part of the case's latency, as with the http provider
    assert results.latency_ms[0] >= 1000.0


def test_retry_after_reads_seconds_dates_and_milliseconds():
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    later = format_datetime(now + timedelta(seconds=30), usegmt=True)
    assert retry_after_s({"retry-after": "120"}) == 120.0
    assert retry_after_s({"retry-after": later}, now=now.timestamp()) == 30.0
    assert retry_after_s({"retry-after": "Thu, 01 Jan 2026 00:00:00 GMT"}, now=now.timestamp()) == 0
    assert retry_after_s({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after_s({"retry-after-ms": "soon", "retry-after": "9"}) == 9.0
    for unreadable in ("-1", "soon", "nan", "Thu, 01 Jan 2026 00:00:00"):  # no zone: not a date
        assert retry_after_s({"retry-after": unreadable}) is None
    assert retry_after_s({}) is None


def test_backoff_doubles_with_jitter_between_half_and_one_and_a_half():
    rng = random.Random(7)
    for attempt in range(5):
        waits = [backoff_s(0.5, attempt, rng) for _ in range(200)]
        assert 0.25 * 2**attempt <= min(waits) and max(waits) < 0.75 * 2**attempt
        assert len(set(waits)) == 200


# -- pacing --------------------------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_request_bucket_spreads_requests_evenly_and_is_shared():
    clock = FakeClock()
    pacer = Pacer(requests_per_minute=600, clock=clock)  # one every 0.1 s
    waits = [pacer.reserve(0) for _ in range(5)]  # five requests at once
    assert waits == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.4])
    clock.now += 10.0  # idle: no credit is saved up for a burst
    assert [pacer.reserve(0) for _ in range(2)] == pytest.approx([0.0, 0.1])
    assert pacer.snapshot()["paced"] == 5
    assert pacer.snapshot()["paced_wait_s"] == pytest.approx(1.1)


def test_token_bucket_charges_the_estimate_and_settles_on_the_real_count():
    clock = FakeClock()
    pacer = Pacer(tokens_per_minute=6000, clock=clock)  # 100 tokens per second
    assert pacer.reserve(500) == 0.0
    assert pacer.reserve(100) == pytest.approx(5.0)  # waits for the first 500
    pacer.settle(estimated=500, actual=200)  # the first cost 200: 3 s given back
    assert pacer.reserve(100) == pytest.approx(3.0)
    bucket = Bucket(60)
    assert [bucket.reserve(1, 0.0), bucket.reserve(1, 0.0), bucket.reserve(1, 5.0)] == [0, 1, 0]


def test_a_server_pause_holds_every_request_of_the_backend():
    clock = FakeClock()
    pacer = Pacer(clock=clock)
    pacer.hold(2.0)
    clock.now += 0.5
    assert pacer.reserve(0) == pytest.approx(1.5)
    clock.now += 2.0
    assert pacer.reserve(0) == 0.0


@pytest.mark.usefixtures("batch_client")
def test_rate_limits_pace_real_requests_and_queueing_is_not_latency():
    with llm_server(lambda s: (200, chat_answer("A", top_logprobs=LETTERS), {})) as server:
        b = backend(server.url, requests_per_minute=600)  # one every 100 ms
        started = time.monotonic()
        results = run(b, [f"x{i}" for i in range(8)], concurrency=8)
        elapsed = time.monotonic() - started
    stats = b.run_stats()
    assert results.error_kind == [None] * 8
    assert stats["requests"] == 8 and stats["paced"] == 7
    # nobody goes early: the eighth request cannot leave before 700 ms (a loaded machine
    # only makes it later, and then the waits themselves may be shorter)
    assert elapsed >= 0.7 - 0.05
    # latency is the server's answer time: were the waits counted in, the latencies would add
    # up to at least the waits
    assert float(np.nansum(results.latency_ms)) / 1000 < stats["paced_wait_s"]


def test_single_calls_share_the_pacing_of_the_backend():
    with llm_server(lambda s: (200, chat_answer("A", top_logprobs=LETTERS), {})) as server:
        b = backend(server.url, requests_per_minute=60)  # one a second
        b.decide(DecisionRequest("a", SPEC, "x"))
        second = b.decide(DecisionRequest("b", SPEC, "y"))  # sent at once: waits its turn
    stats = b.run_stats()
    assert (stats["requests"], stats["paced"]) == (2, 1)
    assert 0.0 < stats["paced_wait_s"] <= 1.0
    # the wait is not the model's latency (it would be at least the wait)
    assert second["latency_ms"] < 1000 * stats["paced_wait_s"]


# -- secrets -------------------------------------------------------------------------------------


@pytest.mark.usefixtures("batch_client")
def test_the_api_key_comes_from_the_environment_and_goes_nowhere_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ours: Any
):
    secret = "sk-test-7f3a9c"
    monkeypatch.setenv("DG_TEST_LLM_KEY", secret)
    monkeypatch.setenv("DG_TEST_ORG", "org-42")

    def answer(seen: Seen) -> tuple[int, Any, dict[str, str]]:
        if case_of(seen) == "boom":
            return 401, {"error": f"bad key {secret}"}, {}
        return 200, chat_answer("A", top_logprobs=LETTERS), {}

    (tmp_path / "cases.jsonl").write_text(
        "".join(
            json.dumps({"id": c, "input": c, "expected": "billing"}) + "\n" for c in ("ok", "boom")
        )
    )
    with llm_server(answer) as server:
        (tmp_path / "c.yaml").write_text(
            f"""schema_version: "0.1"
decision: {{name: route, type: choice, options: [billing, technical, sales]}}
backend:
  provider: openai
  model: m
  base_url: "{server.url}/v1"
  api_key_env: DG_TEST_LLM_KEY
  headers_from_env: {{OpenAI-Organization: DG_TEST_ORG}}
dataset: cases.jsonl
"""
        )
        ran = ours("test", tmp_path / "c.yaml", "-o", tmp_path / "r.json", "-f", "json")
        headers = [s.headers for s in server.seen]
    assert ran.exit_code == 1  # the failed case breaks the implicit error-rate gate
    assert {h["Authorization"] for h in headers} == {f"Bearer {secret}"}  # health check too
    assert {h["OpenAI-Organization"] for h in headers} == {"org-42"}
    for text in (ran.stdout, ran.stderr, (tmp_path / "r.json").read_text()):
        assert secret not in text and "org-42" not in text
    errors = [r["error"] for r in json.loads((tmp_path / "r.json").read_text())["results"]]
    assert errors == [
        None,
        {"kind": "backend_error", "message": "backend 'default' returned HTTP 401"},
    ]
    monkeypatch.delenv("DG_TEST_LLM_KEY")
    ran = ours("test", tmp_path / "c.yaml")
    assert (ran.exit_code, ran.stderr) == (
        2,
        "error: openai backend 'default': environment variable DG_TEST_LLM_KEY is not set\n",
    )


def test_secret_values_are_listed_in_one_place_once_read(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("DG_TEST_LLM_KEY", "sk-abc")
    monkeypatch.setenv("DG_TEST_AZURE", "az-def")
    b = backend(
        "http://127.0.0.1:9",
        api_key_env="DG_TEST_LLM_KEY",
        headers_from_env={"api-key": "DG_TEST_AZURE"},
    )
    assert b.secret_values() == ()  # nothing is read before the first request
    headers = b.request_headers()
    assert set(b.secret_values()) == {"sk-abc", "az-def"}
    assert headers["Authorization"] == "Bearer sk-abc" and headers["api-key"] == "az-def"
    assert "sk-abc" not in json.dumps(b.metadata())
    with pytest.raises(ContractError, match="either api_key_env or an Authorization header"):
        backend("http://x", api_key_env="A", headers_from_env={"authorization": "B"})
    with pytest.raises(ContractError, match="health_url must use the backend URL's origin"):
        backend("http://x", api_key_env="A", health_url="http://elsewhere/models")


# -- versions and health -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version_from", "expected"),
    [("model", "gpt-4o-mini-2024-07-18"), ("model+fingerprint", "gpt-4o-mini-2024-07-18+fp_44")],
)
def test_the_model_version_is_the_served_snapshot(version_from, expected):
    answer = chat_answer(
        "A", top_logprobs=LETTERS, model="gpt-4o-mini-2024-07-18", fingerprint="fp_44"
    )
    with llm_server(lambda s: (200, answer, {})) as server:
        b = backend(server.url, version_from=version_from)
        results = run(b, ["a", "b"])
        decided = b.decide(DecisionRequest("c", SPEC, "x"))
    assert results.model_version == [expected, expected]
    assert results.model == ["gpt-test", "gpt-test"]  # the configured alias
    assert decided["model_version"] == expected
    meta = b.metadata()
    assert meta["model_version"] == expected
    assert meta["details"]["served_models"] == [expected]


def test_two_snapshots_in_one_run_leave_the_run_unversioned():
    served = iter(["snap-1", "snap-2"] * 5)

    def answer(seen: Seen) -> tuple[int, Any, dict[str, str]]:
        return 200, chat_answer("A", top_logprobs=LETTERS, model=next(served)), {}

    with llm_server(answer) as server:
        b = backend(server.url)
        results = run(b, ["a", "b"], concurrency=1)
    assert results.model_version == ["snap-1", "snap-2"]
    assert b.metadata()["model_version"] is None
    assert b.metadata()["details"]["served_models"] == ["snap-1", "snap-2"]


def test_target_discovery_asks_one_canary_case_for_the_version(tmp_path: Path):
    from decguard_pipeline.core.contract import load_contract
    from decguard_pipeline.steps.targets import discover_target

    answer = chat_answer("A", top_logprobs=LETTERS, model="gpt-4o-2024-08-06")
    with llm_server(lambda s: (200, answer, {})) as server:
        (tmp_path / "c.yaml").write_text(
            f"""schema_version: "0.1"
decision: {{name: route, type: choice, options: [billing, technical, sales]}}
backend: {{provider: openai, model: gpt-4o, base_url: "{server.url}/v1"}}
"""
        )
        target = discover_target(
            load_contract(tmp_path / "c.yaml"), "default", canary_input="a canary"
        )
        paths = [(s.method, s.path) for s in server.seen]
    assert (target.key, target.model_version, target.version_source) == (
        "default@gpt-4o-2024-08-06",
        "gpt-4o-2024-08-06",
        "canary",
    )
    assert paths == [("GET", "/v1/models"), ("POST", "/v1/chat/completions")]


def test_health_is_get_models_unless_a_health_url_is_set():
    statuses = iter([200, 500, 204])
    with llm_server(lambda s: (200, {}, {}), get=lambda s: (next(statuses), {}, {})) as server:
        b = backend(server.url, max_retries=0)
        assert b.healthcheck() == {"status": "ok", "detail": "HTTP 200"}
        assert b.healthcheck() == {"status": "unhealthy", "detail": "HTTP 500"}
        probe = backend(server.url, health_url=f"{server.url}/healthz")
        assert probe.healthcheck() == {"status": "ok", "detail": "HTTP 204"}
        assert [s.path for s in server.seen] == ["/v1/models", "/v1/models", "/healthz"]


# -- usage and cost ------------------------------------------------------------------------------


def test_usage_is_kept_per_case_and_prices_a_run():
    usage = {"a": (100, 1), "b": (250, 1), "c": (40, 2)}

    def answer(seen: Seen) -> tuple[int, Any, dict[str, str]]:
        case = case_of(seen)
        if case == "d":  # tokens paid for, then an answer that cannot be read
            return 200, chat_answer("x", top_logprobs=[("x", 0.0)], usage=(60, 1)), {}
        if case == "e":
            return 200, chat_answer("A", top_logprobs=LETTERS, usage=None), {}
        return 200, chat_answer("A", top_logprobs=LETTERS, usage=usage[case]), {}

    pricing = {"input_per_million": 0.15, "output_per_million": 0.60}
    with llm_server(answer) as server:
        b = backend(server.url, pricing=pricing)
        results = run(b, ["a", "b", "c", "d", "e"])
    assert results.error_kind == [None, None, None, "invalid_response", None]
    nan = float("nan")
    # a case's tokens are kept even when its answer then cannot be read: they were paid for
    np.testing.assert_array_equal(results.prompt_tokens, [100, 250, 40, 60, nan])
    np.testing.assert_array_equal(results.completion_tokens, [1, 1, 2, 1, nan])
    cost = run_cost(
        results.prompt_tokens, results.completion_tokens, b.settings.pricing, decided=results.ok
    )
    dollars = (450 * 0.15 + 5 * 0.60) / 1e6
    assert cost.as_dict() == {
        "cases": 5,
        "cases_with_usage": 4,
        "decisions": 4,
        "prompt_tokens": 450,
        "completion_tokens": 5,
        "cost": pytest.approx(dollars, rel=1e-15),
        "cost_per_1000": pytest.approx(dollars / 4 * 1000, rel=1e-15),
    }
    assert b.run_stats()["prompt_tokens"] == 450
    assert results.take([1, 0]).prompt_tokens.tolist() == [250.0, 100.0]


def test_cost_without_pricing_or_usage_or_decisions():
    decided = np.array([True, False])
    none = run_cost(None, None, None, decided=decided)
    assert (none.prompt_tokens, none.cost, none.cost_per_1000) == (0, None, None)
    price = Pricing(input_per_million=2.0, output_per_million=8.0)
    assert case_cost(1_000_000, 500_000, price) == 6.0
    all_failed = run_cost(
        np.array([10.0, 5.0]), np.array([1.0, 1.0]), price, decided=np.array([False, False])
    )
    assert all_failed.cost == pytest.approx((15 * 2.0 + 2 * 8.0) / 1e6)
    assert all_failed.cost_per_1000 is None


@pytest.mark.parametrize(
    ("pricing", "message"),
    [
        (
            {"input_per_million": -1, "output_per_million": 1},
            "backend.pricing.input_per_million: Input should be greater than or equal to 0",
        ),
        ({"input_per_million": 1}, "backend.pricing.output_per_million: required field is missing"),
        (
            {"input_per_million": 1, "output_per_million": 1, "currency": "EUR"},
            "backend.pricing.currency: unknown field (check the spelling)",
        ),
    ],
)
def test_pricing_is_validated_with_the_contract(pricing, message):
    with pytest.raises(ContractError) as caught:
        backend("http://127.0.0.1:9", pricing=pricing)
    assert message in str(caught.value)


def test_a_report_with_rate_limited_cases_verifies_with_the_reference(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ours: Any, ref: Any
):
    monkeypatch.chdir(tmp_path)

    def answer(seen: Seen) -> tuple[int, Any, dict[str, str]]:
        if case_of(seen).startswith("busy"):
            return 429, {}, {"Retry-After": "0"}
        return 200, chat_answer("A", top_logprobs=LETTERS, usage=(12, 1)), {}

    inputs = ["fine 1", "busy 1", "fine 2", "fine 3"]
    Path("cases.jsonl").write_text(
        "".join(json.dumps({"id": x, "input": x, "expected": "billing"}) + "\n" for x in inputs)
    )
    with llm_server(answer) as server:
        Path("c.yaml").write_text(
            f"""schema_version: "0.1"
decision: {{name: route, type: choice, options: [billing, technical, sales]}}
backend: {{provider: openai, model: m, base_url: "{server.url}/v1", max_retries: 1,
           pricing: {{input_per_million: 1, output_per_million: 2}}}}
dataset: cases.jsonl
requirements: {{max_error_rate: 0.5}}
"""
        )
        ran = ours("test", "c.yaml", "-o", "r.json")
    assert ran.exit_code == 0, ran.stdout
    report = json.loads(Path("r.json").read_text())
    assert [r["error"]["kind"] for r in report["results"] if r["error"]] == ["rate_limited"]
    assert "usage" not in json.dumps(report)  # extension data stays out of DecGuard's report
    checked = ref("report", "r.json", "-f", "json")
    assert checked.exit_code == 0, checked.stderr
    assert json.loads(checked.stdout)["metrics"] == report["metrics"]
