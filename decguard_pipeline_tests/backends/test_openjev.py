"""The ``openjev`` provider against a loopback server speaking open-jev's ``/score``."""

from __future__ import annotations

from typing import Any

import pytest

from decguard_pipeline.backends import create_backend
from decguard_pipeline.backends.runner import Cases, run_cases
from decguard_pipeline.core.contract import BackendConfig, DecisionSpec
from decguard_pipeline.core.errors import ContractError
from decguard_pipeline_tests.support.llm_servers import Seen, llm_server

SPEC = DecisionSpec("route", "choice", ("billing", "technical", "sales"))


def backend(url: str, **settings: Any) -> Any:
    config = BackendConfig.model_validate({"provider": "openjev", "url": url, **settings})
    return create_backend(config, decision=SPEC)


def run(b: Any, inputs: list[Any]) -> Any:
    ids = [f"c{i}" for i in range(len(inputs))]
    cases = Cases(ids, inputs, [None] * len(inputs), [{} for _ in inputs])
    return run_cases(b, SPEC, cases, max_concurrency=2, tolerance=1e-3)


ANSWERS: dict[str, Any] = {
    "good": {"probability": [0.2, 0.5, 0.3], "model": "qwen2.5-0.5b"},
    "short": {"probability": [0.5, 0.5]},
    "missing": {"probabilities": {"billing": 1.0}},
    "text": {"probability": ["0.2", 0.5, 0.3]},
    "sum": {"probability": [0.2, 0.2, 0.2]},
}


def score(seen: Seen) -> tuple[int, Any, dict[str, str]]:
    key = seen.body["context"].split("Input:\n")[1].split("\n")[0]
    return 200, ANSWERS[key], {}


@pytest.mark.parametrize("norm", ["mean", "sum", "pmi"])
def test_score_sends_context_and_options_and_reads_probabilities_in_option_order(norm):
    with llm_server(score) as server:
        results = run(backend(server.url, norm=norm), ["good"])  # no path: /score
        seen = server.posts()
    assert [s.path for s in seen] == ["/score"]
    assert seen[0].body == {
        "context": "route\n\nInput:\ngood\n\nOptions: billing, technical, sales\nAnswer:",
        "options": ["billing", "technical", "sales"],
        "norm": norm,
        "chat": False,
        "sep": " ",
    }
    assert results.probs[0].tolist() == [0.2, 0.5, 0.3]
    assert results.model_version == ["qwen2.5-0.5b"]
    assert results.prompt_tokens is None  # open-jev reports no usage


def test_malformed_answers_are_invalid_responses():
    with llm_server(score) as server:
        results = run(backend(f"{server.url}/v2/score"), ["short", "missing", "text", "sum"])
        assert {s.path for s in server.posts()} == {"/v2/score"}
    assert results.error_kind == ["invalid_response"] * 4
    assert results.error_message == [
        "backend 'default' answered 2 probabilities for 3 options",
        "backend 'default' response has no 'probability' list",
        "probability for 'billing' is not a number: '0.2'",
        "probabilities sum to 0.6, outside 1 ± 0.001",
    ]


def test_settings_are_checked_when_the_contract_loads():
    with pytest.raises(ContractError, match=r"backend\.norm: Input should be 'mean', 'sum' or"):
        backend("http://127.0.0.1:9", norm="max")
    with pytest.raises(ContractError, match=r"backend\.url: must not embed credentials"):
        backend("http://user:pw@127.0.0.1:9")
    with pytest.raises(ContractError, match=r"backend\.headers: 'X-Api-Key' looks like"):
        backend("http://127.0.0.1:9", headers={"X-Api-Key": "literal"})
