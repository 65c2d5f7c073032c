"""The ``http`` backend (decguard.http/0.1) against real servers on loopback.

Errors, retries, health and load-time checks are compared with decguard==0.1.1 running
against the same server; concurrency, connection reuse and latency are measured at the
server.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from decguard_pipeline_tests.conftest import same_text
from decguard_pipeline_tests.support.canned_server import Reply, canned
from decguard_pipeline_tests.support.golden_cases import comparable

# -- a server answering canned replies, for answers the loopback model never gives ----------


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- contracts ----------------------------------------------------------------------------


def _contract(url: str, labels: str = '["yes", "no"]', **settings: Any) -> str:
    lines = [
        'schema_version: "0.1"',
        f"decision: {{name: q, type: choice, options: {labels}}}",
        "backend:",
        "  provider: http",
        f"  url: {json.dumps(url)}",
    ]
    lines += [f"  {key}: {json.dumps(value)}" for key, value in settings.items()]
    lines += ["dataset: cases.jsonl", "evaluation: {max_concurrency: 4}"]
    return "\n".join(lines) + "\n"


def _cases(ids: list[str], expected: str = "yes") -> None:
    Path("cases.jsonl").write_text(
        "".join(
            json.dumps({"id": i, "input": f"text of {i}", "expected": expected}) + "\n" for i in ids
        )
    )


@pytest.fixture
def workdir(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _both(ours, ref, *args: Any) -> tuple[Any, Any, dict[str, Any] | None, dict[str, Any] | None]:
    a = ours(*args, "-o", "ours.json")
    b = ref(*args, "-o", "ref.json")
    assert a.exit_code == b.exit_code, (a.stderr, b.stderr)
    if a.exit_code == 2:
        assert a.stderr == b.stderr
        return a, b, None, None
    return a, b, json.loads(Path("ours.json").read_text()), json.loads(Path("ref.json").read_text())


# -- error mapping, retries and timeouts, compared with the reference ----------------------

INJECTED = [
    "ok-1", "status=400", "status=404", "status=500", "status=502", "status=503",
    "status=504", "flaky=1", "flaky=2", "flaky=3", "garbage", "noprob", "drop",
    "meta-1", "hang", "ok-2",
]  # fmt: skip


@pytest.mark.usefixtures("batch_client")
def test_error_kinds_and_messages_match_reference(workdir, loopback, ours, ref):
    server = loopback({"rules": [{"contains": "ok-1", "probabilities": {"yes": 0.9, "no": 0.1}}]})
    _cases(INJECTED)
    settings = {"timeout_s": 0.3, "max_retries": 2, "retry_backoff_s": 0.01, "model": "m1"}
    Path("c.yaml").write_text(_contract(server.url, **settings))
    a = ours("test", "c.yaml", "-o", "ours.json")
    ours_attempts = dict(server.behaviour.attempts)
    server.behaviour.attempts.clear()
    b = ref("test", "c.yaml", "-o", "ref.json")
    assert a.exit_code == b.exit_code == 1
    assert ours_attempts == dict(server.behaviour.attempts)  # same retries, case by case
    assert ours_attempts["status=503"] == 3 and ours_attempts["status=500"] == 1
    assert ours_attempts["flaky=2"] == 3 and ours_attempts["hang"] == 1
    mine = json.loads(Path("ours.json").read_text())
    theirs = json.loads(Path("ref.json").read_text())
    assert comparable(mine) == comparable(theirs)
    errors = {r["case_id"]: r["error"] for r in mine["results"] if r["error"]}
    assert errors["status=404"] == {
        "kind": "backend_error",
        "message": "backend 'default' returned HTTP 404",
    }
    assert errors["status=502"]["kind"] == errors["flaky=3"]["kind"] == "unavailable"
    assert errors["hang"] == {
        "kind": "timeout",
        "message": "backend 'default' timed out after 0.3s",
    }
    assert errors["drop"]["kind"] == "unavailable"
    assert "secret-echo" not in Path("ours.json").read_text()  # error bodies are never kept
    meta = next(r for r in mine["results"] if r["case_id"] == "meta-1")["result"]["metadata"]
    assert meta == {"trace": "meta-1", "api_key": "[REDACTED]"}
    assert same_text(a.stdout, b.stdout)[0] == same_text(a.stdout, b.stdout)[1]


@pytest.mark.usefixtures("batch_client")
def test_retry_backoff_doubles(workdir, loopback, ours):
    server = loopback()
    _cases(["flaky=2", "flaky=3"])
    Path("c.yaml").write_text(_contract(server.url, max_retries=2, retry_backoff_s=0.1))
    ran = ours("test", "c.yaml", "-f", "json")
    doc = json.loads(ran.stdout)
    flaky2, flaky3 = doc["results"]
    # latency covers the whole request, retries and their 0.1 s + 0.2 s of backoff included
    assert 300 <= flaky2["result"]["latency_ms"] < 3000
    assert flaky3["error"]["kind"] == "unavailable"
    assert server.behaviour.attempts == {"flaky=2": 3, "flaky=3": 3}


def test_no_retries_by_default(workdir, loopback, ours, ref):
    server = loopback()
    _cases(["flaky=1", "ok"])
    Path("c.yaml").write_text(_contract(server.url))
    assert ours("test", "c.yaml", "-o", "ours.json").exit_code == 1
    assert server.behaviour.attempts == {"flaky=1": 1, "ok": 1}
    server.behaviour.attempts.clear()
    assert ref("test", "c.yaml", "-o", "ref.json").exit_code == 1
    mine = json.loads(Path("ours.json").read_text())
    assert comparable(mine) == comparable(json.loads(Path("ref.json").read_text()))
    assert mine["results"][0]["error"]["message"] == "backend 'default' returned HTTP 503"


@pytest.mark.usefixtures("batch_client")
def test_connection_refused_is_unavailable_after_retries(workdir, ours, ref):
    url = f"http://127.0.0.1:{_free_port()}/decide"
    _cases(["a", "b"])
    Path("c.yaml").write_text(_contract(url, max_retries=2, retry_backoff_s=0.05))
    start = time.perf_counter()
    a, _, _, _ = _both(ours, ref, "test", "c.yaml", "--no-healthcheck")
    assert a.exit_code == 2
    assert a.stderr == (
        "error: backend 'default' failed on every case; first error: unavailable: "
        "cannot connect to backend 'default': ConnectError\n"
    )
    assert time.perf_counter() - start >= 2 * (0.05 + 0.1)  # both runs backed off


def test_every_case_failing_exits_2(workdir, loopback, ours, ref):
    server = loopback()
    _cases(["status=500-a", "status=404-b", "garbage"])
    Path("c.yaml").write_text(_contract(server.url))
    a, _, _, _ = _both(ours, ref, "test", "c.yaml")
    assert a.exit_code == 2
    assert a.stderr == (
        "error: backend 'default' failed on every case; first error: backend_error: "
        "backend 'default' returned HTTP 500\n"
    )


# -- answers the model never should give ---------------------------------------------------

BAD_ANSWERS: dict[str, Any] = {
    "nan": b'{"probabilities": {"yes": NaN, "no": 0.5}}',
    "infinity": b'{"probabilities": {"yes": Infinity, "no": 0}}',
    "negative": {"probabilities": {"yes": -0.2, "no": 1.2}},
    "sum-high": {"probabilities": {"yes": 0.7, "no": 0.302}},
    "sum-low": {"probabilities": {"yes": 0.7, "no": 0.29}},
    "sum-edge": {"probabilities": {"yes": 0.7, "no": 0.3009}},
    "string": {"probabilities": {"yes": "0.7", "no": 0.3}},
    "bool": {"probabilities": {"yes": True, "no": 0}},
    "null": {"probabilities": {"yes": None, "no": 1}},
    "missing": {"probabilities": {"yes": 1.0}},
    "unknown": {"probabilities": {"yes": 0.5, "no": 0.5, "maybe": 0.0}},
    "list": {"probabilities": [0.5, 0.5]},
    "not-object": [1, 2],
    "model-int": {"probabilities": {"yes": 0.5, "no": 0.5}, "model": 3},
    "version-int": {"probabilities": {"yes": 0.5, "no": 0.5}, "model_version": 3},
    "metadata-list": {"probabilities": {"yes": 0.5, "no": 0.5}, "metadata": []},
    "tie": {"probabilities": {"no": 0.5, "yes": 0.5}, "model": "served", "model_version": "7"},
    "ints": {"probabilities": {"yes": 0, "no": 1}},
    "huge int": b'{"probabilities": {"yes": 1' + b"0" * 400 + b', "no": 0}}',
    "exponent": b'{"probabilities": {"yes": 1e400, "no": 0}}',
    "empty-body": b"",
    "html": b"<html>oops</html>",
    "redirect": None,
    "accepted": None,
}


def _bad_reply(body: dict[str, Any]) -> Reply:
    case_id = body["case_id"]
    if case_id == "redirect":
        return 302, b"", {"Location": "/elsewhere"}
    if case_id == "accepted":
        return 202, {"probabilities": {"yes": 1.0, "no": 0.0}}, {}
    return 200, BAD_ANSWERS[case_id], {"Content-Type": "application/json"}


def test_invalid_answers_match_reference(workdir, ours, ref):
    _cases(list(BAD_ANSWERS))
    with canned(_bad_reply) as server:
        Path("c.yaml").write_text(_contract(server.url))
        _, _, mine, theirs = _both(ours, ref, "test", "c.yaml")
    assert mine is not None and theirs is not None
    assert comparable(mine) == comparable(theirs)
    outcome = {r["case_id"]: r["error"] or r["result"] for r in mine["results"]}
    assert outcome["nan"]["message"] == "probability for 'yes' is not finite: nan"
    assert outcome["negative"]["message"] == "probability for 'yes' is negative: -0.2"
    assert outcome["sum-high"]["message"] == "probabilities sum to 1.002, outside 1 ± 0.001"
    assert outcome["sum-edge"]["selected"] == "yes"  # 1.0009 is inside the tolerance
    assert outcome["tie"]["selected"] == "yes"  # ties go to the first contract label
    assert list(outcome["tie"]["probabilities"]) == ["yes", "no"]
    assert (outcome["tie"]["model"], outcome["tie"]["model_version"]) == ("served", "7")
    assert outcome["redirect"]["message"] == "backend 'default' returned HTTP 302"
    assert outcome["accepted"]["selected"] == "yes"  # any 2xx is an answer
    assert outcome["html"]["message"] == "backend 'default' returned invalid JSON"
    assert outcome["huge int"] == {
        "kind": "exception",
        "message": "OverflowError: int too large to convert to float",
    }
    assert outcome["exponent"]["message"] == "probability for 'yes' is not finite: inf"


def test_contract_tolerance_applies_to_answers(workdir, ours, ref):
    _cases(["sum-edge", "sum-high"])
    with canned(_bad_reply) as server:
        Path("c.yaml").write_text(
            _contract(server.url).replace("{max_concurrency: 4}", "{probability_tolerance: 0.01}")
        )
        _, _, mine, theirs = _both(ours, ref, "test", "c.yaml")
    assert mine is not None and theirs is not None
    assert comparable(mine) == comparable(theirs)
    assert mine["metrics"]["counts"]["errored"] == 0


# -- what is sent ----------------------------------------------------------------------------


@pytest.mark.usefixtures("batch_client")
def test_request_body_headers_and_label_map(workdir, loopback, ours, ref, monkeypatch):
    monkeypatch.setenv("DG_TEST_TOKEN", "tok-123")
    monkeypatch.setenv("DG_TEST_TEAM", "team-9")
    server = loopback(labels=("Y", "N"))
    Path("cases.jsonl").write_text(
        json.dumps({"id": "t1", "input": "plain", "expected": "yes"})
        + "\n"
        + json.dumps({"id": "t2", "input": {"text": "object", "n": [1, 2]}})
        + "\n"
    )
    settings = {
        "model": "m-9",
        "bearer_token_env": "DG_TEST_TOKEN",
        "headers": {"X-Static": "s"},
        "headers_from_env": {"X-Team": "DG_TEST_TEAM"},
        "label_map": {"Y": "yes", "N": "no"},
    }
    Path("c.yaml").write_text(_contract(server.url + "?region=eu", **settings))
    _, _, mine, theirs = _both(ours, ref, "test", "c.yaml")
    assert comparable(mine) == comparable(theirs)
    ours_bodies, ref_bodies = server.behaviour.requests[:2], server.behaviour.requests[2:]
    key = lambda b: b["case_id"]  # noqa: E731
    assert sorted(ours_bodies, key=key) == sorted(ref_bodies, key=key)
    assert sorted(ours_bodies, key=key)[0] == {
        "protocol": "decguard.http/0.1",
        "case_id": "t1",
        "model": "m-9",
        "decision": {"name": "q", "type": "choice", "labels": ["Y", "N"]},
        "input": "plain",
    }
    for headers in server.behaviour.headers[:2]:
        assert headers["Authorization"] == "Bearer tok-123"
        assert headers["X-Team"] == "team-9"
        assert headers["X-Static"] == "s"
        assert headers["Content-Type"] == "application/json"
        assert headers["User-Agent"].startswith("decguard-pipeline/")
    text = Path("ours.json").read_text()
    assert "tok-123" not in text and "team-9" not in text and "region=eu" not in text
    assert mine is not None and mine["backend"]["details"] == {
        "url": server.url,
        "protocol": "decguard.http/0.1",
    }


# -- health ------------------------------------------------------------------------------


def test_health_states_match_reference(workdir, loopback, ours, ref):
    server = loopback()
    _cases(["a"])
    Path("c.yaml").write_text(_contract(server.url, health_url=server.health_url))
    a, b, mine, _ = _both(ours, ref, "test", "c.yaml")
    assert mine is not None and mine["health"] == {"status": "ok", "detail": "HTTP 200"}
    assert "  health" not in a.stdout
    # no health_url: unknown, printed
    Path("c.yaml").write_text(_contract(server.url))
    a, b, mine, _ = _both(ours, ref, "test", "c.yaml")
    assert mine is not None
    assert mine["health"] == {"status": "unknown", "detail": "no health_url configured"}
    assert same_text(a.stdout, b.stdout)[0] == same_text(a.stdout, b.stdout)[1]
    assert "  health    unknown: no health_url configured" in a.stdout.splitlines()
    # skipped
    _, _, mine, _ = _both(ours, ref, "test", "c.yaml", "--no-healthcheck")
    assert mine is not None and mine["health"] is None
    # unhealthy: nothing is decided
    server.behaviour.healthy = False
    Path("c.yaml").write_text(_contract(server.url, health_url=server.health_url))
    before = sum(server.behaviour.attempts.values())
    a, _, _, _ = _both(ours, ref, "test", "c.yaml")
    assert (a.exit_code, a.stderr) == (2, "error: backend 'default' is unhealthy: HTTP 503\n")
    assert sum(server.behaviour.attempts.values()) == before
    # unreachable health endpoint
    dead = f"http://127.0.0.1:{_free_port()}/healthz"
    Path("c.yaml").write_text(_contract(server.url, health_url=dead))
    a, _, _, _ = _both(ours, ref, "test", "c.yaml")
    assert a.stderr == (
        "error: backend 'default' is unhealthy: cannot connect to backend 'default': ConnectError\n"
    )


# -- concurrency, order, connection reuse, latency -----------------------------------------


@pytest.mark.usefixtures("batch_client")
@pytest.mark.parametrize("concurrency", [1, 3, 8])
def test_in_flight_is_bounded_and_order_kept(concurrency, workdir, loopback, ours, ref):
    server = loopback(delay_ms=15)
    ids = [f"c{i:02d}" for i in range(40)]
    _cases(ids)
    Path("c.yaml").write_text(_contract(server.url))
    ran = ours("test", "c.yaml", "--max-concurrency", concurrency, "-o", "ours.json")
    assert ran.exit_code == 0
    assert server.behaviour.max_in_flight == concurrency
    mine = json.loads(Path("ours.json").read_text())
    assert [r["case_id"] for r in mine["results"]] == ids
    assert ref("test", "c.yaml", "-o", "ref.json").exit_code == 0
    assert comparable(mine) == comparable(json.loads(Path("ref.json").read_text()))


def test_contract_concurrency_is_the_default(workdir, loopback, ours):
    server = loopback(delay_ms=15)
    _cases([f"c{i}" for i in range(20)])
    Path("c.yaml").write_text(_contract(server.url))  # evaluation.max_concurrency: 4
    assert ours("test", "c.yaml").exit_code == 0
    assert server.behaviour.max_in_flight == 4


@pytest.mark.usefixtures("batch_client")
def test_connections_are_reused(workdir, ours):
    _cases([f"c{i}" for i in range(60)])
    with canned(lambda body: (200, {"probabilities": {"yes": 0.6, "no": 0.4}}, {})) as server:
        Path("c.yaml").write_text(_contract(server.url))
        assert ours("test", "c.yaml", "--max-concurrency", 4).exit_code == 0
        assert len(server.bodies) == 60
        assert len(set(server.peers)) <= 4


@pytest.mark.usefixtures("batch_client")
def test_latency_is_measured_around_the_request(workdir, loopback, ours):
    """A case's latency is its request, not the time it waited for one of the 4 workers.

    No absolute time is asserted (a loaded machine stretches every figure): with at most 4
    requests in flight, the measured latencies can add up to at most 4 times the run's wall
    time, whatever the load. Measured from the queue instead, 80 cases waiting for 4 workers
    would add up to about 80 / 2 of the request phase, 10 times as much. And no request can
    read as shorter than the 20 ms the server waits before answering."""
    server = loopback(delay_ms=20)
    _cases([f"c{i}" for i in range(80)])
    Path("c.yaml").write_text(_contract(server.url))
    start = time.perf_counter()
    ran = ours("test", "c.yaml", "--max-concurrency", 4, "-f", "json")
    wall_ms = (time.perf_counter() - start) * 1000.0
    assert server.behaviour.max_in_flight == 4
    doc = json.loads(ran.stdout)
    latencies = [record["result"]["latency_ms"] for record in doc["results"]]
    assert len(latencies) == doc["metrics"]["latency"]["n"] == 80
    assert min(latencies) >= 20.0
    assert sum(latencies) <= 4 * wall_ms, (sum(latencies), wall_ms)


# -- single calls (run, SDK): the synchronous client -----------------------------------------


def test_single_calls_match_reference(loopback):
    from decguard.backends.registry import create_backend as ref_create
    from decguard.contracts.models import BackendConfig as RefConfig
    from decguard.decisions import DecisionRequest as RefRequest
    from decguard.decisions import DecisionSpec as RefSpec
    from decguard.errors import BackendError as RefBackendError

    from decguard_pipeline.backends import create_backend
    from decguard_pipeline.core.contract import BackendConfig, DecisionSpec
    from decguard_pipeline.core.decision import DecisionRequest
    from decguard_pipeline.core.errors import BackendError

    server = loopback({"default": {"yes": 0.25, "no": 0.75}})
    settings = {
        "provider": "http",
        "url": server.url,
        "health_url": server.health_url,
        "max_retries": 1,
        "retry_backoff_s": 0.01,
        "timeout_s": 0.3,
    }
    spec = DecisionSpec("q", "noul", ("yes", "no"))
    mine = create_backend(BackendConfig.model_validate(settings), decision=spec)
    theirs = ref_create(
        RefConfig.model_validate(settings),
        decision=RefSpec(name="q", type="noul", labels=("yes", "no")),
    )
    with mine, theirs:
        assert mine.healthcheck() == theirs.healthcheck().model_dump()
        for case_id in ("ok", "meta-x", "status=503", "flaky=1-b", "status=418", "hang"):
            try:
                got: Any = mine.decide(DecisionRequest(case_id, spec, "text"))
                got.pop("latency_ms")
            except BackendError as exc:
                got = (exc.kind, str(exc))
            try:
                request = RefRequest(case_id=case_id, decision=theirs_spec(), input="text")
                want: Any = theirs.decide(request).model_dump(mode="json")
                want.pop("latency_ms")
            except RefBackendError as exc:
                want = (exc.kind, str(exc))
            assert got == want, case_id


def theirs_spec() -> Any:
    from decguard.decisions import DecisionSpec as RefSpec

    return RefSpec(name="q", type="noul", labels=("yes", "no"))


# -- load-time settings checks ----------------------------------------------------------------

A, H = "https://a.internal/", "https://a.internal/h"
SETTINGS = [
    {"url": "https://models.internal/decide"},
    {"url": "http://localhost:8080/decide", "timeout_s": 600, "max_retries": 5},
    {"url": "https://models.internal/decide?api_version=3"},
    {"url": "https://models.internal/decide?Token=x"},
    {"url": "https://models.internal/decide?signature=x&b=1"},
    {"url": "models.internal/decide"},
    {"url": "http://"},
    {"url": "https://u@models.internal/"},
    {"url": "https://models.internal/", "timeout_s": 601},
    {"url": "https://models.internal/", "timeout_s": -1},
    {"url": "https://models.internal/", "retry_backoff_s": 61},
    {"url": "https://models.internal/", "max_retries": -1},
    {"url": "https://models.internal/", "headers": {"X-Api-Key": "k"}},
    {"url": "https://models.internal/", "headers": {"api-key": "k"}},
    {"url": "https://models.internal/", "headers": {"Proxy-Authorization": "k"}},
    {"url": "https://models.internal/", "headers": {"X-Trace": "1"}},
    {"url": "https://models.internal/", "headers": {"X-Trace": 1}},
    {"url": "https://a.internal/", "health_url": "https://b.internal/h"},
    {"url": A, "health_url": "https://a.internal:444/h", "bearer_token_env": "T"},
    {"url": A, "health_url": "http://a.internal/h", "headers_from_env": {"X": "T"}},
    {"url": A, "health_url": H, "bearer_token_env": "T"},
    {"url": A, "health_url": H, "headers_from_env": {"X-Key": "T"}},
    {"url": A, "bearer_token_env": "T", "headers_from_env": {"AUTHORIZATION": "U"}},
    {"url": "https://a.internal/", "label_map": {"Y": "yes", "N": "no"}},
    {"url": "https://a.internal/", "label_map": {"Y": "yes", "N": "yes"}},
    {"url": "https://a.internal/", "label_map": {"Y": "maybe", "N": "never"}},
    {"url": "https://a.internal/", "health_url": "ftp://a.internal/h"},
    {"url": 3},
    {},
]  # fmt: skip


@pytest.mark.parametrize("provider", ["http", "systemone"])
@pytest.mark.parametrize("index", range(len(SETTINGS)))
def test_settings_checks_match_reference(provider, index):
    from decguard.backends.registry import create_backend as ref_create
    from decguard.contracts.models import BackendConfig as RefConfig
    from decguard.decisions import DecisionSpec as RefSpec
    from decguard.errors import ContractError as RefContractError

    from decguard_pipeline.backends import create_backend
    from decguard_pipeline.core.contract import BackendConfig, DecisionSpec
    from decguard_pipeline.core.errors import ContractError

    config = {"provider": provider, "model": "m", "instructions": "Answer.", **SETTINGS[index]}
    if provider == "http":
        config.pop("instructions")
    spec = DecisionSpec("q", "choice", ("yes", "no"), "Is it?")
    try:
        create_backend(BackendConfig.model_validate(config), decision=spec, name="cand").close()
        mine = "ok"
    except ContractError as exc:
        mine = str(exc)
    try:
        ref_spec = RefSpec(name="q", type="choice", labels=("yes", "no"), description="Is it?")
        ref_create(RefConfig.model_validate(config), decision=ref_spec, name="cand").close()
        theirs = "ok"
    except RefContractError as exc:
        theirs = str(exc)
    assert mine == theirs


def test_defaults_match_reference():
    from decguard.backends.http import HttpSettings as RefSettings

    from decguard_pipeline.backends.http import HttpSettings

    url = "https://models.internal/decide"
    ours = HttpSettings(url=url).model_dump()
    # the pipeline's limits (docs/contracts.md#backend-limits) are the only additions
    assert ours.pop("max_response_bytes") == 1 << 20
    assert ours.pop("max_metadata_bytes") == 64 * 1024
    assert ours == RefSettings(url=url).model_dump()


@pytest.mark.usefixtures("batch_client")
def test_input_that_is_not_json_compliant(workdir, loopback, ours, ref):
    """NaN in an input is valid in a dataset but cannot be sent: that case errors alone."""
    server = loopback()
    Path("cases.jsonl").write_text(
        '{"id": "nan", "input": {"x": NaN}}\n{"id": "ok", "input": {"x": 1.5}}\n'
    )
    Path("c.yaml").write_text(_contract(server.url))
    _, _, mine, theirs = _both(ours, ref, "test", "c.yaml")
    assert mine is not None and theirs is not None
    assert comparable(mine) == comparable(theirs)
    assert mine["results"][0]["error"]["kind"] == "exception"
    assert mine["results"][0]["error"]["message"].startswith("ValueError: Out of range float")
    assert ours("report", "ours.json").exit_code == ref("report", "ours.json").exit_code == 1


@pytest.mark.parametrize("seed", range(0, 60, 6))
def test_generated_contracts_over_http_match_reference(seed, workdir, loopback, ours, ref):
    """The generated golden contracts, their mock answered by a loopback model over HTTP."""
    import yaml

    from decguard_pipeline_tests.support.golden_cases import write_inputs

    path, _, contract = write_inputs(workdir, seed)
    settings = {k: v for k, v in contract["backend"].items() if k not in ("provider", "model")}
    decision = contract["decision"]
    labels = decision.get("options") or decision.get("labels") or decision.get("levels")
    labels = tuple(str(label) for label in labels or ("yes", "no"))
    server = loopback(settings, labels=labels)
    contract["backend"] = {"provider": "http", "url": server.url, "model": "over-http"}
    contract.pop("backends", None)
    path.unlink()
    Path("c.yaml").write_text(yaml.safe_dump(contract, allow_unicode=True))
    a, b, mine, theirs = _both(ours, ref, "test", "c.yaml", "--max-concurrency", 8)
    if mine is None:
        assert a.exit_code == 2
        return
    assert theirs is not None and comparable(mine) == comparable(theirs)
    assert same_text(a.stdout, b.stdout)[0] == same_text(a.stdout, b.stdout)[1]
