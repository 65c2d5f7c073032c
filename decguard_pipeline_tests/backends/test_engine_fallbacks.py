"""What the ``openai`` provider does when a server refuses a request shape (issue 31): the
first refusal is answered by the documented fallback, once, remembered for the backend; a
refused shape is never ``unavailable`` after retries; samples asked one by one get seeds
seed + i; a stated confidence of ``-0E541`` reaches no report as ``-0.0``."""

from __future__ import annotations

import json
import math
from collections import Counter
from typing import Any

import pytest

from decguard_pipeline.backends import create_backend
from decguard_pipeline.backends.grammar import decision_grammar
from decguard_pipeline.backends.runner import Cases, run_cases
from decguard_pipeline.core.contract import BackendConfig, DecisionSpec
from decguard_pipeline.demo.llm_server import serve_demo
from decguard_pipeline_tests.support.llm_servers import Seen, chat_answer, llm_server

SPEC = DecisionSpec("route", "choice", ("billing", "technical", "sales"), "Route the ticket.")


def backend(url: str, **settings: Any) -> Any:
    config = BackendConfig.model_validate(
        {"provider": "openai", "model": "m", "base_url": url, "retry_backoff_s": 0, **settings}
    )
    return create_backend(config, decision=SPEC)


def run(b: Any, inputs: list[Any], concurrency: int = 1) -> Any:
    ids = [f"c{i}" for i in range(len(inputs))]
    cases = Cases(ids, inputs, [None] * len(inputs), [{} for _ in inputs])
    return run_cases(b, SPEC, cases, max_concurrency=concurrency, tolerance=1e-9)


def echoed(prompt: str, per_token: float) -> dict[str, Any]:
    """One prompt echoed as two tokens: the context, then the option (after its space)."""
    context, option = prompt.rsplit(" ", 1)
    return {
        "index": 0,
        "text": prompt,
        "logprobs": {
            "tokens": [context, " " + option],
            "token_logprobs": [None, per_token],
            "text_offset": [0, len(context)],
        },
    }


OPTION_LOGPROB = {"billing": -0.2, "technical": -1.0, "sales": -2.5}


def one_prompt_server(seen: Seen) -> tuple[int, Any, dict[str, str]]:
    """llama-cpp-python's /completions: a list of more than one prompt fails an assertion."""
    prompt = seen.body["prompt"]
    if isinstance(prompt, list) and len(prompt) > 1:
        return 500, {"error": {"message": "", "type": "internal_server_error"}}, {}
    option = prompt.rsplit(" ", 1)[1]
    return 200, {"model": "m", "choices": [echoed(prompt, OPTION_LOGPROB[option])]}, {}


def test_a_prompt_list_refused_with_500_falls_back_once_and_is_remembered():
    with llm_server(one_prompt_server) as server:
        b = backend(f"{server.url}/v1", scoring="completion_logprobs")
        results = run(b, ["a", "b", "c", "d"])
        shapes = Counter(
            "list" if isinstance(s.body["prompt"], list) else "one" for s in server.posts()
        )
    assert results.error_kind == [None] * 4
    weights = [math.exp(v) for v in OPTION_LOGPROB.values()]
    expected = [w / sum(weights) for w in weights]
    for row in range(4):
        assert results.probs[row].tolist() == pytest.approx(expected, abs=1e-15)
    # the list was tried once, not retried (3 retries would have been 4 requests), then one
    # prompt per request for every case
    assert shapes == {"list": 1, "one": 12}
    note = (
        "completion_logprobs: one prompt per request (the server refused 3 prompts in one "
        "/completions request: HTTP 500)"
    )
    assert b.metadata()["details"]["fallbacks"] == [note]
    assert b.run_stats()["fallbacks"] == [note] and b.run_stats()["retries"] == 0


def structured_server(refuse: set[str]) -> Any:
    """A chat server refusing the structured formats in ``refuse`` with 500 (llama-cpp-python
    fails validation of an unknown response_format that way)."""

    def answer(seen: Seen) -> tuple[int, Any, dict[str, str]]:
        fmt = "grammar" if "grammar" in seen.body else seen.body["response_format"]["type"]
        if fmt in refuse:
            return 500, {"error": {"message": "Input should be 'text' or 'json_object'"}}, {}
        return 200, chat_answer('{"choice": "sales", "confidence": 0.8}'), {}

    return answer


def formats_asked(sent: list[Seen]) -> list[str]:
    return ["grammar" if "grammar" in s.body else s.body["response_format"]["type"] for s in sent]


def test_structured_falls_back_to_json_object_then_to_a_grammar():
    with llm_server(structured_server({"json_schema", "json_object"})) as server:
        b = backend(f"{server.url}/v1", scoring="structured")
        results = run(b, ["x", "y"])
        sent = server.posts()
    assert results.error_kind == [None, None]
    assert results.probs[0].tolist() == [0.0, 0.0, 1.0]
    assert formats_asked(sent) == ["json_schema", "json_object", "grammar", "grammar"]
    assert sent[1].body["response_format"]["schema"]["required"] == ["choice"]
    assert sent[2].body["grammar"] == decision_grammar(SPEC.labels, verbalized=False)
    assert b.metadata()["details"]["structured_format"] == "grammar"
    assert b.metadata()["details"]["fallbacks"] == [
        "structured: a GBNF grammar (the server refused response_format json_schema "
        "(HTTP 500), response_format json_object with a schema (HTTP 500))"
    ]


def test_a_stated_confidence_falls_back_to_the_grammar_before_json_object():
    # llama.cpp's grammar for a schema's number does not bound it; ours does
    with llm_server(structured_server({"json_schema"})) as server:
        b = backend(f"{server.url}/v1", scoring="structured", verbalized_confidence=True)
        results = run(b, ["x", "y"])
        sent = server.posts()
    assert results.probs[0].tolist() == pytest.approx([0.1, 0.1, 0.8], abs=1e-15)
    assert formats_asked(sent) == ["json_schema", "grammar", "grammar"]
    assert sent[1].body["grammar"] == decision_grammar(SPEC.labels, verbalized=True)


def test_a_shape_refused_with_500_is_a_backend_error_naming_it_after_its_retries():
    with llm_server(structured_server({"json_schema", "json_object", "grammar"})) as server:
        explicit = backend(
            f"{server.url}/v1", scoring="structured", structured_format="json_schema", max_retries=2
        )
        results = run(explicit, ["x"])
        attempts = len(server.posts())
        server.seen.clear()
        auto = run(backend(f"{server.url}/v1", scoring="structured", max_retries=2), ["x"])
        auto_attempts = len(server.posts())
    assert results.error_kind == ["backend_error"]
    assert results.error_message == [
        "backend 'default' returned HTTP 500 to response_format json_schema"
    ]
    assert attempts == 3  # retried as a 500 is, then reported as the shape refused
    assert auto.error_kind == ["backend_error"]
    assert auto.error_message == [
        "backend 'default' refused every structured format: response_format json_schema "
        "(HTTP 500), response_format json_object with a schema (HTTP 500), a GBNF grammar "
        "(HTTP 500)"
    ]  # the order without a stated confidence
    assert auto_attempts == 1 + 1 + 3  # two probes at once, the last format retried


def test_samples_asked_one_by_one_get_seed_plus_i():
    with serve_demo() as demo:  # as llama-cpp-python: n dropped, a seed repeats its sample
        url = demo.flavour("llama-cpp-python")
        b = backend(url, model="tickets-calibrated", scoring="sample", samples=10, seed=40)
        ambiguous = ["My invoice is wrong since the upgrade", "invoice error crash quote"]
        seeded = run(b, ambiguous)
    with llm_server(lambda s: (200, chat_answer("A"), {})) as server:
        run(backend(f"{server.url}/v1", scoring="sample", samples=4, seed=7), ["x"])
        seeds = [s.body.get("seed") for s in server.posts()]
        ns = [s.body.get("n") for s in server.posts()]
    assert seeds == [7, 8, 9, 10] and ns == [4, None, None, None]
    # ten different seeds: the ambiguous tickets' samples differ (one seed for all made every
    # sample the same answer: a one-hot distribution)
    assert seeded.error_kind == [None, None]
    for row in range(2):
        assert max(seeded.probs[row]) < 1.0, seeded.probs[row]


def test_a_confidence_written_minus_zero_reaches_no_report_as_minus_zero(tmp_path, ours):
    content = '{"choice": "billing", "confidence": -0E541}'
    with llm_server(lambda s: (200, chat_answer(content), {})) as server:
        (tmp_path / "cases.jsonl").write_text(
            json.dumps({"id": "a", "input": "x", "expected": "sales"}) + "\n"
        )
        (tmp_path / "c.yaml").write_text(
            f"""schema_version: "0.1"
decision: {{name: route, type: choice, options: [billing, technical, sales]}}
backend: {{provider: openai, model: m, base_url: "{server.url}/v1", scoring: structured,
          verbalized_confidence: true}}
dataset: cases.jsonl
"""
        )
        ran = ours("test", tmp_path / "c.yaml", "-o", tmp_path / "r.json", "-f", "json")
    assert ran.exit_code in (0, 1), ran.stderr
    text = (tmp_path / "r.json").read_text()
    probabilities = json.loads(text)["results"][0]["result"]["probabilities"]
    assert probabilities == {"billing": 0.0, "technical": 0.5, "sales": 0.5}
    assert math.copysign(1.0, probabilities["billing"]) == 1.0
    assert "-0.0" not in text
