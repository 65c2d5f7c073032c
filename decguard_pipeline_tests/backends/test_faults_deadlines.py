"""Fault injection, slow servers: a model that sends ``HTTP/1.1 200 OK`` and then its head or
its body a byte at a time (support/trickling.py, a raw socket server on loopback). No single
read waits long, so only a deadline on the whole attempt ends it. Every HTTP path must end
such an attempt as DecGuard's ``timeout`` (``backend 'x' timed out after <timeout_s>s``): the
batch client of every provider (``test``), the single-call client (``run``, the SDK, health
checks, canaries, version discovery), the paraphraser and ``evaluate``.

The commands run in subprocesses (or threads) with a generous guard: a regression hangs for
ever, and the guard turns that into a failure; nothing here asserts how long anything took."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from decguard_pipeline_tests.support.llm_servers import chat_answer
from decguard_pipeline_tests.support.trickling import FAULTS, trickling

TIMEOUT_S = 0.5
TIMED_OUT = f"backend 'default' timed out after {TIMEOUT_S:g}s"
GUARD_S = 180  # far beyond any run here; reached only by a run that never ends
BIN = Path(sys.executable).parent
PROVIDERS = ("http", "systemone", "openai", "openjev")
CASES = ["ok#0", *(f"{fault}#0" for fault in FAULTS)]


def answer_of(provider: str) -> bytes:
    """What a well-behaved server of ``provider`` answers (yes 0.75, no 0.25)."""
    probabilities = {"yes": 0.75, "no": 0.25}
    if provider == "http":
        body: Any = {"probabilities": probabilities}
    elif provider == "systemone":
        question = {"type": "choice", "choice": "yes", "probabilities": probabilities}
        body = {"model": "served-1", "answers": {"q": question}}
    elif provider == "openai":
        body = chat_answer("A", top_logprobs=[("A", -0.2), ("B", -1.8)])
    else:
        body = {"probability": [0.75, 0.25], "model": "served-1"}
    return json.dumps(body).encode()


def settings_of(provider: str, url: str, **extra: Any) -> dict[str, Any]:
    backend: dict[str, Any] = {
        "provider": provider,
        "timeout_s": TIMEOUT_S,
        "max_retries": 1,  # a timeout after connecting is not retried, as in DecGuard
        "retry_backoff_s": 0.01,
    }
    if provider == "http":
        backend["url"] = f"{url}/decide"
    elif provider == "systemone":
        backend.update(url=f"{url}/systemone", model="m", instructions="Is it?")
    elif provider == "openai":
        backend.update(base_url=f"{url}/v1", model="m", prompt="<{input}> {options}")
    else:
        backend.update(url=f"{url}/score", model="m", prompt="<{input}> {options}")
    return {**backend, **extra}


def write_contract(path: Path, backend: dict[str, Any], extra: str = "") -> None:
    path.write_text(
        'schema_version: "0.1"\n'
        'decision: {name: q, type: choice, options: ["yes", "no"]}\n'
        f"backend: {json.dumps(backend)}\n"
        "dataset: cases.jsonl\n"
        "evaluation: {max_concurrency: 4}\n" + extra
    )


def write_cases(folder: Path, ids: list[str]) -> None:
    # the input carries the fault: every provider sends it (as case id, state or prompt)
    lines = [json.dumps({"id": i, "input": f"text {i}", "expected": "yes"}) for i in ids]
    (folder / "cases.jsonl").write_text("\n".join(lines) + "\n")


def command(*args: str, cwd: Path, env: dict[str, str] | None = None) -> Any:
    """``decguard-pipeline ARGS`` in a subprocess, guarded against never ending."""
    return subprocess.run(
        [str(BIN / "decguard-pipeline"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=GUARD_S,
    )


def guarded(call: Callable[[], Any]) -> tuple[str, Any]:
    """``("done", value)`` / ``("raised", exception)`` of ``call`` in a thread, or
    ``("still running", None)`` after the guard."""
    outcome: list[tuple[str, Any]] = []

    def run() -> None:
        try:
            outcome.append(("done", call()))
        except Exception as exc:
            outcome.append(("raised", exc))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(GUARD_S)
    return outcome[0] if outcome else ("still running", None)


def kinds(doc: dict[str, Any]) -> dict[str, tuple[str | None, str | None]]:
    return {
        r["case_id"]: (
            r["error"]["kind"] if r["error"] else None,
            r["error"]["message"] if r["error"] else None,
        )
        for r in doc["results"]
    }


# -- batch runs (aiohttp) ------------------------------------------------------------------------


@pytest.mark.usefixtures("batch_client")
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_trickled_head_or_body_times_out_in_a_batch_run(tmp_path, provider):
    write_cases(tmp_path, CASES)
    with trickling(answer_of(provider)) as server:
        write_contract(tmp_path / "c.yaml", settings_of(provider, server.url))
        ran = command("test", "c.yaml", "-f", "json", cwd=tmp_path)
        asked = dict(server.asked)
    assert ran.returncode == 1, ran.stderr  # errored cases fail the implicit error-rate gate
    assert kinds(json.loads(ran.stdout)) == {
        "ok#0": (None, None),
        **{f"{fault}#0": ("timeout", TIMED_OUT) for fault in FAULTS},
    }
    assert {fault: asked[fault] for fault in FAULTS} == dict.fromkeys(FAULTS, 1)  # no retry


# -- single calls (httpx): run, the SDK, health checks, canaries, version discovery ---------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_single_calls_and_health_checks_time_out(provider):
    from decguard_pipeline.backends import create_backend
    from decguard_pipeline.core.contract import BackendConfig, DecisionSpec
    from decguard_pipeline.core.decision import DecisionRequest
    from decguard_pipeline.core.errors import BackendError

    spec = DecisionSpec("q", "choice", ("yes", "no"))

    def decide(backend: Any, case_id: str) -> tuple[str | None, Any]:
        try:
            backend.decide(DecisionRequest(case_id, spec, f"text {case_id}"))
        except BackendError as exc:
            return exc.kind, str(exc)
        return None, None

    with trickling(answer_of(provider)) as server:
        health = f"{server.url}/trickle-headers/health"
        config = BackendConfig.model_validate(settings_of(provider, server.url, health_url=health))
        with create_backend(config, decision=spec) as backend:
            status, outcomes = guarded(lambda: {case: decide(backend, case) for case in CASES})
            assert status == "done", status
            assert outcomes == {
                "ok#0": (None, None),
                **{f"{fault}#0": ("timeout", TIMED_OUT) for fault in FAULTS},
            }
            assert guarded(backend.healthcheck) == (
                "done",
                {"status": "unhealthy", "detail": TIMED_OUT},
            )
            assert guarded(backend.version_hint) == ("done", None)  # discovery goes on


def test_the_run_command_and_its_health_check_time_out(tmp_path):
    policy = "policy: {routes: [{action: accept}]}\n"
    with trickling(answer_of("http")) as server:
        health = f"{server.url}/trickle-headers/health"
        backend = settings_of("http", server.url, health_url=health)
        write_contract(tmp_path / "c.yaml", backend, policy)
        write_cases(tmp_path, ["ok#0"])
        unhealthy = command("run", "c.yaml", "text", cwd=tmp_path)
        slow = [
            command("run", "c.yaml", f"text {case}", "--no-healthcheck", cwd=tmp_path)
            for case in CASES[1:]
        ]
    assert (unhealthy.returncode, unhealthy.stderr) == (
        2,
        f"error: backend 'default' is unhealthy: {TIMED_OUT}\n",
    )
    assert [(r.returncode, r.stderr) for r in slow] == [(2, f"error: {TIMED_OUT}\n")] * len(FAULTS)


@pytest.mark.parametrize("fault", FAULTS)
def test_the_paraphraser_times_out(fault):
    from decguard_pipeline.core.errors import BackendError
    from decguard_pipeline.runs.properties.paraphrase import OpenAIParaphraser, OpenAISettings

    answer = chat_answer('["a", "b"]')
    with trickling(json.dumps(answer).encode()) as server:
        settings = OpenAISettings(
            model="m", url=f"{server.url}/{fault}/v1", api_key_env=None, timeout_s=TIMEOUT_S
        )
        paraphraser = OpenAIParaphraser(settings)
        try:
            status, outcome = guarded(
                lambda: paraphraser.paraphrase("text", case_id="c", n=2, seed=0)
            )
        finally:
            paraphraser.close()
    assert status == "raised", (status, outcome)
    assert isinstance(outcome, BackendError) and outcome.kind == "timeout"
    assert str(outcome) == f"paraphraser timed out after {TIMEOUT_S:g}s"


# -- evaluate ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_evaluate_ends_with_timeouts_for_trickling_answers(tmp_path):
    """Two contracts on one trickling server: one whose health answer trickles its head
    (target discovery gives up on it: the backend is skipped as unreachable), one whose cases
    trickle (the canary answers; every trickled case is a ``timeout`` row)."""
    from decguard_pipeline.warehouse import Warehouse

    contracts = tmp_path / "contracts"
    home, warehouse = tmp_path / "dagster_home", tmp_path / "warehouse"
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    with trickling(answer_of("http")) as server:
        for name, extra in (
            ("slow-health", {"health_url": f"{server.url}/trickle-headers/health"}),
            ("slow-cases", {}),
        ):
            folder = contracts / name
            folder.mkdir(parents=True)
            write_cases(folder, CASES)  # ok#0 first: the canary
            write_contract(folder / "decguard.yaml", settings_of("http", server.url, **extra))
        ran = command(
            "evaluate", "--contracts", str(contracts), "--warehouse", str(warehouse),
            cwd=tmp_path, env=env,
        )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert f"skipped  slow_health/default: backend 'default' is unhealthy: {TIMED_OUT}\n" in (
        ran.stdout
    )
    with Warehouse(warehouse).connect() as con:
        rows = con.sql(
            "SELECT contract, case_id, error_kind, error_message FROM case_results "
            "ORDER BY contract, position"
        ).fetchall()
    assert rows == [
        ("slow_cases", "ok#0", None, None),
        *(("slow_cases", f"{fault}#0", "timeout", TIMED_OUT) for fault in FAULTS),
    ]


def test_single_calls_through_the_environments_proxy_keep_the_deadline(monkeypatch):
    """The single-call client routes through ``HTTP_PROXY`` as httpx does (a host that does
    not resolve is reached through it), and a proxied attempt has the same deadline."""
    from decguard_pipeline.backends import create_backend
    from decguard_pipeline.core.contract import BackendConfig, DecisionSpec
    from decguard_pipeline.core.decision import DecisionRequest
    from decguard_pipeline.core.errors import BackendError, BackendTimeout

    spec = DecisionSpec("q", "choice", ("yes", "no"))
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    with trickling(answer_of("http")) as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        config = BackendConfig.model_validate(settings_of("http", "http://model.invalid"))
        with create_backend(config, decision=spec) as backend:
            answered = backend.decide(DecisionRequest("ok#0", spec, "x"))
            with pytest.raises(BackendTimeout, match=f"^{re.escape(TIMED_OUT)}$"):
                backend.decide(DecisionRequest("trickle-headers#0", spec, "x"))
        monkeypatch.setenv("NO_PROXY", "model.invalid")  # now the name must resolve: it cannot
        with (
            create_backend(config, decision=spec) as backend,
            pytest.raises(BackendError, match=r"^cannot connect to backend 'default'"),
        ):
            backend.decide(DecisionRequest("ok#0", spec, "x"))
    assert answered["probabilities"] == {"yes": 0.75, "no": 0.25}
    assert proxy.asked == {"ok": 1, "trickle-headers": 1}
