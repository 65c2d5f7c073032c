"""The engine matrix of docs/engines.md, row by row: each scoring method of the ``openai``
provider against the demo server speaking as OpenAI, Azure OpenAI, vLLM, Ollama, llama.cpp's
server, llama-cpp-python's server and LM Studio (``demo/flavours.py``: each server's
documented refusals and answer shapes). A method that works is checked against the demo
model's own belief (``belief``, the function the server answers from), recomputed here; one
that needs a fallback says which, in the run's metadata; one the server cannot serve fails
with a typed error naming what was refused, never ``unavailable``."""

from __future__ import annotations

import math
from typing import Any

import pytest

from decguard_pipeline.backends import create_backend
from decguard_pipeline.backends.runner import Cases, run_cases
from decguard_pipeline.core.contract import BackendConfig, DecisionSpec
from decguard_pipeline.demo.llm_server import belief, serve_demo

SPEC = DecisionSpec("route", "choice", ("billing", "technical", "sales"), "Route the ticket.")
TICKETS = [
    "I was charged twice and need a refund on this invoice",
    "The app shows an error and crashes at login",
    "Can I get a quote and a discount for 20 more seats?",
    "My invoice is wrong since the upgrade",
]
MODEL = "tickets-calibrated"
AZURE_KEY = "azure-demo-key-never-in-a-report"

# flavour -> scoring -> what happens: "ok", a fallback note's start, or (kind, message)
EXPECTED: dict[str, dict[str, Any]] = {
    "openai": {
        "logprobs": "ok",
        "completion_logprobs": "ok",
        "structured": "ok",
        "sample": "ok",
    },
    "azure": {
        "logprobs": "ok",
        "completion_logprobs": (
            "backend_error",
            "backend 'default' returned HTTP 400 to one prompt per /completions request",
        ),
        "structured": "ok",
        "sample": "ok",
    },
    "vllm": {
        "logprobs": "ok",
        "completion_logprobs": "ok",
        "structured": "ok",
        "sample": "ok",
    },
    "ollama": {
        "logprobs": "ok",
        "completion_logprobs": (
            "invalid_response",
            "a choice has no logprobs (does the server support echo?)",
        ),
        "structured": "ok",
        "sample": "sample: one request per sample (the server answered 1 choice(s) for n=10)",
    },
    "llama-server": {
        "logprobs": "ok",
        "completion_logprobs": (
            "backend_error",
            "backend 'default' returned HTTP 400 to one prompt per /completions request",
        ),
        "structured": "ok",
        "sample": "sample: one request per sample (the server refused n: HTTP 400)",
    },
    "llama-cpp-python": {
        "logprobs": "ok",
        "completion_logprobs": "completion_logprobs: one prompt per request (the server "
        "refused 3 prompts in one /completions request: HTTP 500)",
        "structured": "structured: response_format json_object with a schema (the server "
        "refused response_format json_schema (HTTP 500))",
        "sample": "sample: one request per sample (the server answered 1 choice(s) for n=10)",
    },
    "lmstudio": {
        "logprobs": ("invalid_response", "answer has no top_logprobs for its first token"),
        "completion_logprobs": (
            "invalid_response",
            "a choice has no logprobs (does the server support echo?)",
        ),
        "structured": "ok",
        "sample": "sample: one request per sample (the server answered 1 choice(s) for n=10)",
    },
}


@pytest.fixture(scope="module")
def demo() -> Any:
    with serve_demo() as server:
        yield server


def where(demo: Any, flavour: str) -> dict[str, Any]:
    if flavour == "openai":
        return {"base_url": demo.base_url}
    if flavour == "azure":
        return {
            "base_url": f"{demo.url}/azure/openai/deployments/tickets?api-version=2024-10-21",
            "headers_from_env": {"api-key": "DECGUARD_TEST_AZURE_KEY"},
        }
    return {"base_url": demo.flavour(flavour)}


def run(demo: Any, flavour: str, scoring: str, **settings: Any) -> tuple[Any, Any]:
    config = BackendConfig.model_validate(
        {
            "provider": "openai",
            "model": MODEL,
            "scoring": scoring,
            **where(demo, flavour),
            **settings,
        }
    )
    backend = create_backend(config, decision=SPEC)
    ids = [f"t{i}" for i in range(len(TICKETS))]
    cases = Cases(ids, TICKETS, [None] * len(TICKETS), [{} for _ in TICKETS])
    return run_cases(backend, SPEC, cases, max_concurrency=2, tolerance=1e-6), backend


def check_answers(scoring: str, results: Any) -> None:
    """The distributions the method must read from the demo model, recomputed from its belief."""
    for row, ticket in enumerate(TICKETS):
        truth = belief(ticket, list(SPEC.labels), MODEL)
        got = results.probs[row].tolist()
        if scoring in ("logprobs", "completion_logprobs"):
            assert got == pytest.approx(truth, abs=1e-9), (scoring, ticket)
        elif scoring == "structured":
            best = max(range(3), key=lambda i: truth[i])
            assert got == [1.0 if i == best else 0.0 for i in range(3)]
        else:  # frequencies of 10 samples
            assert all(math.isclose(p * 10, round(p * 10), abs_tol=1e-9) for p in got)
            assert sum(got) == pytest.approx(1.0)


@pytest.mark.parametrize("flavour", list(EXPECTED))
@pytest.mark.parametrize("scoring", ["logprobs", "completion_logprobs", "structured", "sample"])
def test_each_server_row_of_the_matrix(demo, flavour, scoring, monkeypatch):
    monkeypatch.setenv("DECGUARD_DEMO_AZURE_KEY", AZURE_KEY)
    monkeypatch.setenv("DECGUARD_TEST_AZURE_KEY", AZURE_KEY)
    extra = {"samples": 10, "seed": 3} if scoring == "sample" else {}
    results, backend = run(demo, flavour, scoring, **extra)
    expected = EXPECTED[flavour][scoring]
    details = backend.metadata()["details"]
    if isinstance(expected, tuple):
        kind, message = expected
        assert results.error_kind == [kind] * len(TICKETS)
        assert set(results.error_message) == {message}
        return
    assert results.error_kind == [None] * len(TICKETS), results.error_message
    check_answers(scoring, results)
    if expected == "ok":
        assert "fallbacks" not in details
        assert "fallbacks" not in backend.run_stats()
    else:
        assert details["fallbacks"] == [expected]
        assert backend.run_stats()["fallbacks"] == [expected]
    assert AZURE_KEY not in repr(details) + repr(results.error_message)


def test_azure_needs_its_api_version_and_key(demo, monkeypatch):
    monkeypatch.setenv("DECGUARD_DEMO_AZURE_KEY", AZURE_KEY)
    monkeypatch.setenv("DECGUARD_TEST_AZURE_KEY", "a-wrong-key")
    results, _ = run(demo, "azure", "logprobs")
    assert set(results.error_message) == {"backend 'default' returned HTTP 401"}
    monkeypatch.setenv("DECGUARD_TEST_AZURE_KEY", AZURE_KEY)
    config = BackendConfig.model_validate(
        {
            "provider": "openai",
            "model": MODEL,
            "headers_from_env": {"api-key": "DECGUARD_TEST_AZURE_KEY"},
            "base_url": f"{demo.url}/azure/openai/deployments/tickets",
        }
    )
    unversioned = create_backend(config, decision=SPEC)
    cases = Cases(["t0"], TICKETS[:1], [None], [{}])
    results = run_cases(unversioned, SPEC, cases, max_concurrency=1, tolerance=1e-6)
    assert results.error_message == ["backend 'default' returned HTTP 404"]
    versioned, answer = run(demo, "azure", "logprobs")
    assert versioned.error_kind == [None] * len(TICKETS)
    # the deployment chose the model: the answer names its snapshot, whatever "model" said
    assert set(versioned.model_version) == {"tickets-calibrated-2026-01-15"}
    assert answer.metadata()["details"]["model_version_from"] == "the answer's model"
