"""Which model answered, when the server echoes the name asked (issue 31): ``version_from:
server`` reads vLLM's ``root``, llama.cpp's ``model_path`` or Ollama's ``digest``;
``version_from: probe`` digests the answers to fixed inputs. A model swapped under the same
name is a new version, so the response cache never serves the old model's answers for it;
with the echoed name alone, the report says the version is only that name."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
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
    "invoice crash quote",
]
NAME = "tickets-calibrated"
# the demo's models tell each other apart on tickets only (keyword evidence): its probes are
# tickets (the default inputs are plain requests, for models that read language)
PROBES = ["My invoice is wrong", "The login crashes", "A quote for more seats, and an invoice"]


@pytest.fixture
def demo() -> Any:
    with serve_demo() as server:
        yield server


def make(base_url: str, **settings: Any) -> Any:
    config = BackendConfig.model_validate(
        {"provider": "openai", "model": NAME, "base_url": base_url, **settings}
    )
    return create_backend(config, decision=SPEC)


def run(backend: Any) -> Any:
    ids = [f"t{i}" for i in range(len(TICKETS))]
    cases = Cases(ids, TICKETS, [None] * len(TICKETS), [{} for _ in TICKETS])
    return run_cases(backend, SPEC, cases, max_concurrency=2, tolerance=1e-6)


@pytest.mark.parametrize(
    ("flavour", "before", "after", "where"),
    [
        ("vllm", "root:/models/tickets-calibrated.gguf", "root:/models/tickets-onehot.gguf",
         "/v1/models root"),
        ("llama-server", "path:/models/tickets-calibrated.gguf",
         "path:/models/tickets-onehot.gguf", "/props model_path"),
        ("ollama", "digest:", "digest:", "/api/tags digest"),
    ],
)  # fmt: skip
def test_server_metadata_tells_a_model_swapped_under_its_name(demo, flavour, before, after, where):
    first = make(demo.flavour(flavour), version_from="server")
    results = run(first)
    demo.served.swap(NAME, "tickets-onehot")
    second = make(demo.flavour(flavour), version_from="server")
    swapped = run(second)
    old, new = set(results.model_version), set(swapped.model_version)
    assert len(old) == len(new) == 1 and old != new
    assert old.pop().startswith(f"{NAME}+{before}") and new.pop().startswith(f"{NAME}+{after}")
    assert first.version_hint() == results.model_version[0]  # known before any case is asked
    assert first.metadata()["details"]["model_version_from"] == f"server: {where}"
    # every answer still echoed the name asked: the answers alone could not tell
    assert swapped.probs[0].tolist() != results.probs[0].tolist()


def test_a_server_that_publishes_no_model_metadata_is_told_by_the_probe(demo):
    url = demo.flavour("llama-cpp-python")  # /v1/models lists aliases only
    server = make(url, version_from="server")
    echoed = make(url)
    probed = make(url, version_from="probe", probe_inputs=PROBES)
    probed_again = make(url, version_from="probe", probe_inputs=PROBES)
    assert set(run(server).model_version) == {NAME}
    assert server.metadata()["details"]["model_version_from"] == (
        "the requested name (the server echoes it: a model swapped under it is not noticed); "
        "the server publishes no model metadata"
    )
    assert set(run(echoed).model_version) == {NAME}
    assert echoed.metadata()["details"]["model_version_from"] == (
        "the requested name (the server echoes it: a model swapped under it is not noticed)"
    )
    version = probed.version_hint()
    assert version is not None and version.startswith(f"{NAME}+probe:")
    assert set(run(probed).model_version) == {version}
    assert probed_again.version_hint() == version  # the same model: the same digest
    assert probed.metadata()["details"]["model_version_from"] == "probe (3 fixed inputs)"
    demo.served.swap(NAME, "tickets-overconfident")
    swapped = make(url, version_from="probe", probe_inputs=PROBES)
    assert swapped.version_hint() not in (None, version)
    # the probe asked the backend's own scoring: three requests, before any case
    assert probed.run_stats()["requests"] == 3 + len(TICKETS)


def test_a_probe_of_unseeded_samples_is_refused_at_load():
    from decguard_pipeline.core.errors import ContractError

    with pytest.raises(ContractError, match="version_from probe with scoring sample needs a seed"):
        make("http://127.0.0.1:9/v1", scoring="sample", version_from="probe")
    with pytest.raises(ContractError, match="probe_inputs applies to version_from probe"):
        make("http://127.0.0.1:9/v1", probe_inputs=["x"])


def contract(folder: Path, base_url: str, version_from: str) -> Path:
    lines = [json.dumps({"id": f"t{i}", "input": t, "expected": "billing"}) for i, t in
             enumerate(TICKETS)]  # fmt: skip
    (folder / "cases.jsonl").write_text("\n".join(lines) + "\n")
    path = folder / f"{version_from}.yaml"
    probes = f", probe_inputs: {json.dumps(PROBES)}" if version_from == "probe" else ""
    path.write_text(
        textwrap.dedent(
            f"""\
            schema_version: "0.1"
            decision: {{name: route, type: choice, options: [billing, technical, sales],
                       description: Route the ticket.}}
            backend: {{provider: openai, model: {NAME}, base_url: "{base_url}",
                      version_from: {version_from}{probes}}}
            dataset: cases.jsonl
            """
        )
    )
    return path


def cached_run(ours: Any, path: Path, cache: Path, out: Path) -> tuple[dict[str, Any], Any]:
    ran = ours("test", path, "--cache", cache, "-o", out, "-f", "json")
    assert ran.exit_code in (0, 1), ran.stderr
    side = json.loads(out.with_name(out.stem + ".pipeline.json").read_text())
    return side["cache"], json.loads(out.read_text())


def test_the_cache_never_serves_answers_across_a_detected_swap(tmp_path, ours, demo):
    url = demo.flavour("llama-cpp-python")
    probed, echoed = contract(tmp_path, url, "probe"), contract(tmp_path, url, "model")
    cache = tmp_path / "cache"
    cached_run(ours, probed, cache, tmp_path / "p1.json")
    cached_run(ours, echoed, cache, tmp_path / "e1.json")
    demo.served.swap(NAME, "tickets-overconfident")
    probe_cache, probe_report = cached_run(ours, probed, cache, tmp_path / "p2.json")
    echo_cache, echo_report = cached_run(ours, echoed, cache, tmp_path / "e2.json")
    # the probe tells the swap: nothing replayed, the new model's answers reported
    assert probe_cache["answers_from_cache"] == 0
    truth = belief(TICKETS[3], list(SPEC.labels), "tickets-overconfident")
    got = probe_report["results"][3]["result"]["probabilities"]
    assert list(got.values()) == pytest.approx(truth, abs=1e-9)
    # the echoed name cannot tell it: the old model's answers are replayed (all but the first
    # case's, asked to learn the version), and the report says what the version rests on
    assert echo_cache["answers_from_cache"] == len(TICKETS) - 1
    details = echo_report["backend"]["details"]
    assert details["model_version_from"].startswith("the requested name")


def test_target_discovery_takes_the_identity_without_a_canary(tmp_path, demo):
    from decguard_pipeline.core.contract import load_contract
    from decguard_pipeline.steps.targets import discover_target

    (tmp_path / "c.yaml").write_text(
        f"""schema_version: "0.1"
decision: {{name: route, type: choice, options: [billing, technical, sales]}}
backend: {{provider: openai, model: {NAME}, base_url: "{demo.flavour("llama-server")}",
          version_from: server}}
"""
    )
    target = discover_target(load_contract(tmp_path / "c.yaml"), "default", canary_input="x")
    assert (target.model_version, target.version_source) == (
        f"{NAME}+path:/models/{NAME}.gguf",
        "server",
    )
    assert target.key == "default@tickets-calibrated-path--models-tickets-calibrated.gguf"
