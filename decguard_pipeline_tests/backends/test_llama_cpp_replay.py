"""What a real llama-cpp-python 0.3.36 server answered (recorded once by
``test_llama_cpp_real.py`` with ``$DECGUARD_RECORD_LLAMA``: a tiny random-weight llama with a
real SentencePiece tokenizer), replayed on loopback in every run, where no such server can be
built: the provider must send exactly the requests it sent then — fallbacks included — and
read the recorded answers into the distributions llama_cpp computed in-process."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from decguard_pipeline.backends import create_backend
from decguard_pipeline.backends.runner import Cases, run_cases
from decguard_pipeline.core.contract import BackendConfig, DecisionSpec
from decguard_pipeline_tests.support.llama_real import replay_answer
from decguard_pipeline_tests.support.llm_servers import llm_server

RECORDED = Path(__file__).parent / "recorded" / "llama_cpp_python_0.3.36.json"
SPEC = DecisionSpec("route", "choice", ("billing", "technical", "sales"), "Route the ticket.")


@pytest.fixture(scope="module")
def recorded() -> dict[str, Any]:
    return json.loads(RECORDED.read_text())


@pytest.mark.parametrize(
    "method",
    [
        "logprobs",
        "completion_logprobs",
        "structured",
        "verbalized",
        "verbalized_json_object",
        "grammar",
        "sample",
    ],
)
def test_recorded_answers_read_as_llama_cpp_computed_them(recorded, method):
    exchanges = [e for e in recorded["exchanges"] if e["method"] == "POST"]
    handler = replay_answer(exchanges)
    with llm_server(handler, get=replay_answer(recorded["exchanges"])) as server:
        config = BackendConfig.model_validate(
            {
                "provider": "openai",
                "model": "tiny",
                "base_url": f"{server.url}/v1",
                "max_retries": 0,
                **recorded["methods"][method],
            }
        )
        b = create_backend(config, decision=SPEC)
        tickets = recorded["tickets"]
        cases = Cases([f"t{i}" for i in range(len(tickets))], tickets, [None] * len(tickets),
                      [{} for _ in tickets])  # fmt: skip
        results = run_cases(b, SPEC, cases, max_concurrency=1, tolerance=1e-9)
        fallbacks = b.metadata()["details"].get("fallbacks", [])
    assert results.error_kind == recorded["errors"][method], results.error_message
    assert fallbacks == recorded["notes"][method]
    # logprobs and completion: llama_cpp's own computation, in-process; the others: what the
    # provider read from the live server
    expected = recorded["expected"].get(method)
    if expected is not None:
        for row, values in enumerate(expected):
            assert results.probs[row].tolist() == pytest.approx(values, abs=1e-6)
    observed = recorded["observed"][method]
    for row, kind in enumerate(results.error_kind):
        if kind is None:
            got = results.probs[row].tolist()
            assert got == observed[row]
            assert math.fsum(got) == pytest.approx(1.0)
            assert all(math.copysign(1.0, v) == 1.0 for v in got)
