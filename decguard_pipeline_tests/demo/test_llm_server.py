"""The bundled demo LLM server: every API the providers use answers, deterministically, and
its models differ in how confident they are on the same tickets."""

from __future__ import annotations

import json
import math
import socket
import subprocess
import sys
import time
from typing import Any

import httpx
import pytest

from decguard_pipeline.backends import create_backend
from decguard_pipeline.backends.runner import Cases, run_cases
from decguard_pipeline.core.contract import BackendConfig, DecisionSpec
from decguard_pipeline.demo.llm_server import MODELS, belief, serve_demo

SPEC = DecisionSpec("route", "choice", ("billing", "technical", "sales"), "Route the ticket.")
TICKETS = [
    "I was charged twice and need a refund on this invoice",  # clear billing
    "The app shows an error and crashes at login",  # clear technical
    "Can I get a quote and a discount for 20 more seats?",  # clear sales
    "My invoice is wrong since the upgrade",  # ambiguous: billing + sales
]


@pytest.fixture(scope="module")
def demo() -> Any:
    with serve_demo() as server:
        yield server


def decide(demo: Any, inputs: list[str], **settings: Any) -> Any:
    provider = settings.pop("provider", "openai")
    where = {"url": demo.url} if provider == "openjev" else {"base_url": demo.base_url}
    config = BackendConfig.model_validate({"provider": provider, **where, **settings})
    b = create_backend(config, decision=SPEC)
    cases = Cases(
        [f"t{i}" for i in range(len(inputs))], inputs, [None] * len(inputs), [{} for _ in inputs]
    )
    return run_cases(b, SPEC, cases, max_concurrency=4, tolerance=1e-3), b


@pytest.mark.parametrize(
    "settings",
    [
        {"scoring": "logprobs"},
        {"scoring": "completion_logprobs"},
        {"scoring": "structured"},
        {"scoring": "structured", "verbalized_confidence": True},
        {"scoring": "sample", "samples": 20},
        {"provider": "openjev"},
    ],
    ids=["logprobs", "completion", "structured", "verbalized", "sample", "openjev"],
)
def test_every_method_routes_clear_tickets_right(demo, settings):
    model = {} if settings.get("provider") == "openjev" else {"model": "tickets-calibrated"}
    results, _ = decide(demo, TICKETS, **model, **settings)
    assert results.error_kind == [None] * 4
    assert results.selected[:3].tolist() == [0, 1, 2]
    assert set(results.model_version) == {"tickets-calibrated-2026-01-15"}
    again, _ = decide(demo, TICKETS, **model, **settings)
    assert again.probs.tolist() == results.probs.tolist()  # deterministic
    if settings.get("provider") != "openjev":
        assert results.prompt_tokens is not None and (results.prompt_tokens > 0).all()


def test_logprobs_reproduce_each_models_belief_and_the_models_differ(demo):
    confidence = {}
    for model in MODELS:
        results, _ = decide(demo, TICKETS, model=model)
        for i, ticket in enumerate(TICKETS):
            expected = belief(ticket, list(SPEC.labels), model)
            assert results.probs[i].tolist() == pytest.approx(expected, abs=1e-9)
        confidence[model] = results.confidence.tolist()
    for i in range(len(TICKETS)):  # on every ticket, the same order of confidence
        assert (
            confidence["tickets-underconfident"][i]
            < confidence["tickets-calibrated"][i]
            < confidence["tickets-overconfident"][i]
            <= confidence["tickets-onehot"][i]
        )
    ambiguous, _ = decide(demo, TICKETS[3:], model="tickets-calibrated")
    billing, technical, sales = ambiguous.probs[0].tolist()
    assert billing == pytest.approx(sales) and technical < 0.1  # a coin flip of two topics
    assert confidence["tickets-onehot"][0] == pytest.approx(1.0)


def test_structured_states_the_confidence_each_model_believes(demo):
    stated = {}
    for model in ("tickets-calibrated", "tickets-onehot"):
        results, _ = decide(
            demo, TICKETS[:1], model=model, scoring="structured", verbalized_confidence=True
        )
        stated[model] = results.confidence[0]
    calibrated = belief(TICKETS[0], list(SPEC.labels))
    assert stated["tickets-calibrated"] == pytest.approx(max(calibrated), abs=1e-4)
    assert stated["tickets-onehot"] == 1.0


def test_reordered_and_reformatted_options_keep_their_meaning(demo):
    shown = DecisionSpec("route", "choice", ("C) Sales", "A) Billing", "B) Technical"))
    config = BackendConfig.model_validate(
        {"provider": "openai", "model": "tickets-calibrated", "base_url": demo.base_url}
    )
    b = create_backend(config, decision=SPEC)
    cases = Cases(["x"], [TICKETS[0]], [None], [{}])
    results = run_cases(b, shown, cases, max_concurrency=1, tolerance=1e-3)
    assert results.probs[0].tolist() == pytest.approx(
        [belief(TICKETS[0], ["sales", "billing", "technical"])[i] for i in range(3)], abs=1e-9
    )


def test_runs_as_a_module_on_a_port(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    child = subprocess.Popen(
        [sys.executable, "-m", "decguard_pipeline.demo.llm_server", "--port", str(port)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == f"demo LLM server on http://127.0.0.1:{port}/v1"
        for _ in range(100):
            try:
                listed = httpx.get(f"http://127.0.0.1:{port}/v1/models").json()
                break
            except httpx.ConnectError:
                time.sleep(0.05)
        assert [m["id"] for m in listed["data"]] == list(MODELS)
        scored = httpx.post(
            f"http://127.0.0.1:{port}/score",
            json={
                "context": TICKETS[1],
                "options": ["billing", "technical"],
                "norm": "mean",
                "chat": False,
                "sep": " ",
            },
        ).json()
        assert math.isclose(sum(scored["probability"]), 1.0)
        assert json.dumps(scored).count("technical") == 0  # options are not echoed
    finally:
        child.terminate()
        child.wait(10)
