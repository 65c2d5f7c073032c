"""The ``openai`` provider against a real llama-cpp-python server (slow; skipped where
llama-cpp-python is not installed: it builds llama.cpp from source, minutes, so CI does not
build it — see ``support/llama_real.py`` for how to point the test at an interpreter that has
it). A tiny random-weight llama with a real SentencePiece tokenizer is served; every scoring
method runs through the provider and is compared with llama_cpp computing the same in-process;
the model is then swapped under the same alias.

With ``$DECGUARD_RECORD_LLAMA`` set to a file, what the server answered is written there, with
the recomputed distributions: ``test_llama_cpp_replay.py`` replays it on loopback in every run.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from decguard_pipeline.backends import create_backend
from decguard_pipeline.backends.prompts import render
from decguard_pipeline.backends.runner import Cases, run_cases
from decguard_pipeline.core.contract import BackendConfig, DecisionSpec
from decguard_pipeline.core.decision import DecisionRequest
from decguard_pipeline_tests.support.llama_real import (
    LLAMA_PYTHON_ENV,
    VOCAB_ENV,
    llama_cpp_server,
    llama_python,
    recompute,
    recording_proxy,
)

pytestmark = pytest.mark.slow

SPEC = DecisionSpec("route", "choice", ("billing", "technical", "sales"), "Route the ticket.")
TICKETS = [
    "I was charged twice and need a refund on this invoice",
    "The app shows an error and crashes at login",
    "Can I get a quote and a discount for 20 more seats?",
    "My invoice is wrong since the upgrade",
    "Password reset emails never arrive",
    "Do you offer a discount for schools?",
]
ALIAS = "tiny"
# what each method is run with; sample: seeded, so the server repeats what it answers
METHODS: dict[str, dict[str, Any]] = {
    "logprobs": {"scoring": "logprobs"},
    "completion_logprobs": {"scoring": "completion_logprobs"},
    "structured": {"scoring": "structured"},
    # a stated confidence under llama.cpp's own grammar for the JSON schema's number
    "verbalized": {"scoring": "structured", "verbalized_confidence": True},
    "verbalized_json_object": {
        "scoring": "structured",
        "verbalized_confidence": True,
        "structured_format": "json_object",
    },
    "grammar": {
        "scoring": "structured",
        "structured_format": "grammar",
        "verbalized_confidence": True,
    },
    "sample": {"scoring": "sample", "samples": 10, "seed": 11, "max_tokens": 1},
}
TINY_GGUF = Path(__file__).parents[1] / "support" / "tiny_gguf.py"


def backend(url: str, **settings: Any) -> Any:
    config = BackendConfig.model_validate(
        {"provider": "openai", "model": ALIAS, "base_url": url, "max_retries": 0, **settings}
    )
    return create_backend(config, decision=SPEC)


def run(b: Any) -> Any:
    ids = [f"t{i}" for i in range(len(TICKETS))]
    cases = Cases(ids, TICKETS, [None] * len(TICKETS), [{} for _ in TICKETS])
    return run_cases(b, SPEC, cases, max_concurrency=1, tolerance=1e-9)


@pytest.fixture(scope="module")
def python() -> str:
    found = llama_python()
    if found is None:
        pytest.skip(f"llama-cpp-python is not installed (set ${LLAMA_PYTHON_ENV})")
    return found


@pytest.fixture(scope="module")
def models(python: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    vocabulary = os.environ.get(VOCAB_ENV)
    if not vocabulary or not Path(vocabulary).is_file():
        pytest.skip(f"no vocabulary GGUF (set ${VOCAB_ENV} to ggml-vocab-llama-spm.gguf)")
    folder = tmp_path_factory.mktemp("tiny")
    for seed in (1, 2):
        subprocess.run(
            [python, "-c", "import runpy, sys; runpy.run_path(sys.argv[1])['write_tiny_llama']"
             "(__import__('pathlib').Path(sys.argv[2]), __import__('pathlib').Path(sys.argv[3]),"
             " seed=int(sys.argv[4]))", str(TINY_GGUF), vocabulary,
             str(folder / f"tiny-{seed}.gguf"), str(seed)],
            check=True,
        )  # fmt: skip
    return folder / "tiny-1.gguf", folder / "tiny-2.gguf"


def letter_distribution_by_hand(top: list[list[Any]]) -> list[float]:
    mass = [0.0, 0.0, 0.0]
    for token, logprob in top:
        if token.strip() in ("A", "B", "C"):
            mass["ABC".index(token.strip())] += math.exp(logprob)
    return [m / sum(mass) for m in mass]


def test_every_method_on_a_real_server_and_a_swap_under_the_same_alias(python, models):
    first, second = models
    results, notes = {}, {}
    with llama_cpp_server(python, first, ALIAS) as url, recording_proxy(url) as recording:
        for name, settings in METHODS.items():
            b = backend(recording.url, **settings)
            results[name] = run(b)
            notes[name] = b.metadata()["details"].get("fallbacks", [])
        probed = backend(recording.url, version_from="probe").version_hint()
        echoed = run(backend(recording.url)).model_version
    exchanges = recording.exchanges

    # logprobs: the letters' share of llama_cpp's own top 20 alternatives, in-process
    chat = backend("http://127.0.0.1:9/v1")
    tasks = [
        {"kind": "chat", "messages": chat.messages(DecisionRequest("x", SPEC, t))} for t in TICKETS
    ]
    completion = backend("http://127.0.0.1:9/v1", scoring="completion_logprobs")
    contexts = [render(completion.template, SPEC, t) for t in TICKETS]
    tasks += [{"kind": "continuation", "context": c, "options": list(SPEC.labels)}
              for c in contexts]  # fmt: skip
    truth = recompute(python, first, tasks)
    expected_logprobs = [letter_distribution_by_hand(top) for top in truth[: len(TICKETS)]]
    expected_completion = []
    for scores in truth[len(TICKETS) :]:
        weights = [math.exp(s - max(scores)) for s in scores]
        expected_completion.append([w / sum(weights) for w in weights])

    assert results["logprobs"].error_kind == [None] * len(TICKETS)
    for row, expected in enumerate(expected_logprobs):
        assert results["logprobs"].probs[row].tolist() == pytest.approx(expected, abs=1e-6)
    assert results["completion_logprobs"].error_kind == [None] * len(TICKETS)
    for row, expected in enumerate(expected_completion):
        got = results["completion_logprobs"].probs[row].tolist()
        assert got == pytest.approx(expected, abs=1e-6)
    assert notes["completion_logprobs"] == [
        "completion_logprobs: one prompt per request (the server refused 3 prompts in one "
        "/completions request: HTTP 500)"
    ]
    # structured: json_schema refused (500), json_object with the schema honoured
    assert notes["structured"] == [
        "structured: response_format json_object with a schema (the server refused "
        "response_format json_schema (HTTP 500))"
    ]
    assert results["structured"].error_kind == [None] * len(TICKETS)
    assert all(sorted(p) == [0.0, 0.0, 1.0] for p in results["structured"].probs.tolist())
    # a stated confidence: json_schema refused, then our grammar (before json_object, whose
    # schema llama.cpp turns into a grammar that lets the model write -8E4297937)
    assert notes["verbalized"] == [
        "structured: a GBNF grammar (the server refused response_format json_schema (HTTP 500))"
    ]
    assert results["verbalized"].error_kind == [None] * len(TICKETS)
    for p in results["verbalized"].probs.tolist():
        assert all(0.0 <= v <= 1.0 and math.copysign(1.0, v) == 1.0 for v in p)
    # the same schema as json_object, asked directly: llama.cpp does not bound the number
    unbounded = [e["answer"]["choices"][0]["message"]["content"] for e in exchanges
                 if e["request"] and e["request"].get("response_format", {}).get("type")
                 == "json_object" and "confidence" in str(e["request"])]  # fmt: skip
    assert unbounded, "the json_object run was not recorded"
    # our GBNF grammar, parsed and followed by llama.cpp: a confidence in [0, 1], never -0.0
    assert results["grammar"].error_kind == [None] * len(TICKETS)
    for p in results["grammar"].probs.tolist():
        assert all(0.0 <= v <= 1.0 and math.copysign(1.0, v) == 1.0 for v in p)
    # sample: n dropped, one request per sample, seeds 11, 12, ...
    assert notes["sample"] == [
        "sample: one request per sample (the server answered 1 choice(s) for n=10)"
    ]
    sampled = [e["request"] for e in exchanges if e["request"] and e["request"].get("seed")]
    assert [r.get("seed") for r in sampled[:10]] == list(range(11, 21))
    assert "n" in sampled[0] and all("n" not in r for r in sampled[1:])
    assert results["sample"].error_kind == [None] * len(TICKETS), results["sample"].error_message
    # ten seeds, ten draws: no case is one sample repeated ten times
    assert all(max(p) < 1.0 for p in results["sample"].probs.tolist())

    # the same alias on other weights: the echoed name cannot tell, the probe can
    with llama_cpp_server(python, second, ALIAS) as url:
        swapped_probe = backend(url, version_from="probe").version_hint()
        swapped_echo = run(backend(url)).model_version
    assert set(echoed) == set(swapped_echo) == {ALIAS}
    assert probed is not None and swapped_probe is not None and probed != swapped_probe

    record = os.environ.get("DECGUARD_RECORD_LLAMA")
    if record:
        Path(record).write_text(
            json.dumps(
                {
                    "server": "llama-cpp-python 0.3.36 (python -m llama_cpp.server)",
                    "model": "support/tiny_gguf.py, seed 1, vocabulary ggml-vocab-llama-spm",
                    "methods": METHODS,
                    "tickets": TICKETS,
                    "expected": {
                        "logprobs": expected_logprobs,
                        "completion_logprobs": expected_completion,
                    },
                    "notes": notes,
                    # what the provider read from the live server, method by method
                    "observed": {n: r.probs.tolist() for n, r in results.items()},
                    "errors": {n: r.error_kind for n, r in results.items()},
                    "exchanges": exchanges,
                },
                indent=1,
            )
            + "\n"
        )
