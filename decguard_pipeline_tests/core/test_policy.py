"""The runtime policy and ``run``: first-match routing as decguard 0.1.1 routes, the three
documented refund runs, and CLI parity (text, JSON, errors) including an http backend
served on loopback."""

from __future__ import annotations

import json
import random
import textwrap

import numpy as np
import pytest

from decguard_pipeline.core.contract.policy import Policy
from decguard_pipeline.core.policy import apply_policy, first_route, route_indices
from decguard_pipeline_tests.conftest import EXAMPLES
from decguard_pipeline_tests.support.policy_contracts import HTTP_CONTRACT, RULES

REFUND = EXAMPLES / "refund" / "decguard.yaml"
ROUTES = {
    "routes": [
        {"when": {"confidence_gte": 0.95}, "action": "accept"},
        {"when": {"confidence_gte": 0.75}, "action": "fallback", "backend": "strong_model"},
        {"action": "human_review"},
    ]
}


@pytest.mark.parametrize(
    ("confidence", "expected"),
    [(0.96, ("accept", 0)), (0.95, ("accept", 0)), (0.80, ("fallback", 1)),
     (0.75, ("fallback", 1)), (0.60, ("human_review", 2)), (0.0, ("human_review", 2))],
)  # fmt: skip
def test_documented_routing_vectors(confidence, expected):
    """Spec §10: .96 and .95 accept (route 0), .80 and .75 fall back (1), .60 review (2)."""
    policy = Policy.model_validate(ROUTES)
    index, route = first_route(policy, confidence)
    assert (route.action, index) == expected
    decision = apply_policy(policy, {"confidence": confidence})
    assert (decision["action"], decision["route_index"]) == expected
    assert decision["fallback_backend"] == ("strong_model" if index == 1 else None)


def _random_policy(rng: random.Random) -> dict:
    cuts = sorted({round(rng.random(), 2) for _ in range(rng.randint(0, 4))}, reverse=True)
    actions = ["accept", "abstain", "fallback", "human_review"]
    routes = []
    for cut in [*cuts, None]:
        action = rng.choice(actions)
        route: dict = {"action": action}
        if cut is not None:
            route["when"] = {"confidence_gte": cut}
        if action == "fallback":
            route["backend"] = "other"
        routes.append(route)
    return {"routes": routes}


def test_routing_matches_reference_on_random_policies():
    from decguard.contracts.policy import Policy as RefPolicy
    from decguard.decisions import DecisionResult
    from decguard.policy import apply_policy as ref_apply

    rng = random.Random(5)
    for _ in range(200):
        raw = _random_policy(rng)
        ours, theirs = Policy.model_validate(raw), RefPolicy.model_validate(raw)
        cuts = [r["when"]["confidence_gte"] for r in raw["routes"] if "when" in r]
        confidences = [rng.random() for _ in range(5)] + cuts + [c - 1e-12 for c in cuts]
        for c in (x for x in confidences if 0.5 <= x <= 1.0):
            result = {
                "case_id": "x", "decision": "d", "decision_type": "noul", "labels": ["yes", "no"],
                "probabilities": {"yes": c, "no": 1.0 - c}, "selected": "yes", "confidence": c,
                "backend": "default", "provider": "mock", "model": None, "model_version": None,
                "latency_ms": 0.0, "metadata": {},
            }  # fmt: skip
            mine = apply_policy(ours, result)
            ref = ref_apply(theirs, DecisionResult.model_validate(result))
            assert (mine["action"], mine["fallback_backend"], mine["route_index"]) == (
                ref.action, ref.fallback_backend, ref.route_index,
            )  # fmt: skip


def test_route_indices_column_equals_one_by_one():
    policy = Policy.model_validate(ROUTES)
    confidence = np.array([0.96, 0.95, 0.949, 0.80, 0.75, 0.7499, 0.2, 1.0])
    assert route_indices(policy, confidence).tolist() == [
        first_route(policy, c)[0] for c in confidence.tolist()
    ]


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("The blender arrived damaged", "accept · selected refund · confidence 0.960 · route 0"),
        ("The parcel never arrived",
         "fallback -> strong_model · selected refund · confidence 0.900 · route 1"),
        ("Can someone call me?", "human_review · selected review · confidence 0.650 · route 2"),
    ],
)  # fmt: skip
def test_documented_refund_runs(text, line, ours, ref):
    a, b = ours("run", REFUND, text), ref("run", REFUND, text)
    assert (a.exit_code, a.stdout) == (b.exit_code, b.stdout) == (0, line + "\n")


def _without_latency(text: str) -> dict:
    doc = json.loads(text)
    assert isinstance(doc["result"].pop("latency_ms"), float)
    return doc


@pytest.mark.parametrize(
    "args",
    [
        ["The parcel never arrived", "-f", "json"],
        ["damaged", "-f", "json", "--id", "ticket-7", "-b", "order_sensitive"],
        ['{"text": "never arrived", "n": 2}', "--input-json", "-f", "json"],
        ["anything", "-b", "strong_model", "--no-healthcheck", "-f", "json"],
    ],
)
def test_run_json_matches_reference(args, ours, ref):
    a, b = ours("run", REFUND, *args), ref("run", REFUND, *args)
    assert a.exit_code == b.exit_code == 0
    assert _without_latency(a.stdout) == _without_latency(b.stdout)


@pytest.mark.parametrize(
    "args",
    [
        ["x", "-b", "nope"],
        ["{bad", "--input-json"],
        ["[1, 2]", "--input-json"],
        ['"text"', "--input-json"],
        ["x", "-b", "staging"],  # its token variable is not set
        ["x", "-f", "xml"],
    ],
)
def test_run_errors_match_reference(args, ours, ref, monkeypatch):
    monkeypatch.delenv("DECGUARD_STAGING_TOKEN", raising=False)
    a, b = ours("run", REFUND, *args), ref("run", REFUND, *args)
    assert a.exit_code == b.exit_code == 2
    if args[-1] != "xml":  # usage errors are worded by click/typer
        assert a.stderr == b.stderr


def test_run_without_policy(write, ours, ref):
    contract = write(
        "nopolicy.yaml",
        """
        schema_version: "0.1"
        decision: {name: spam, type: noul, labels: [spam, ham]}
        backend: {provider: mock, default: {spam: 0.2, ham: 0.8}}
        """,
    )
    a, b = ours("run", contract, "hello"), ref("run", contract, "hello")
    assert (a.exit_code, a.stderr) == (b.exit_code, b.stderr)
    assert a.stderr == "error: the contract has no 'policy' section\n"


@pytest.fixture
def http_contract(loopback, write):
    server = loopback(RULES, labels=("refund", "reject", "review"))
    text = textwrap.dedent(HTTP_CONTRACT).replace("HEALTH", server.health_url)
    return server, write("http.yaml", text.replace("URL", server.url))


def test_run_over_http_matches_reference(http_contract, ours, ref):
    server, contract = http_contract
    for text in ("my lamp arrived damaged", "no idea"):
        a, b = ours("run", contract, text), ref("run", contract, text)
        assert (a.exit_code, a.stdout) == (b.exit_code, b.stdout)
        assert a.exit_code == 0
    assert server.behaviour.requests[0]["protocol"] == "decguard.http/0.1"
    assert server.behaviour.requests[0]["case_id"] == "runtime"


def test_run_over_http_failures_match_reference(http_contract, ours, ref):
    server, contract = http_contract
    for args in (
        ["x", "--id", "status=503"],
        ["x", "--id", "status=400"],
        ["x", "--id", "garbage"],
    ):
        a, b = ours("run", contract, *args), ref("run", contract, *args)
        assert (a.exit_code, a.stderr) == (b.exit_code, b.stderr)
        assert a.exit_code == 2
    server.behaviour.healthy = False
    a, b = ours("run", contract, "x"), ref("run", contract, "x")
    assert (a.exit_code, a.stderr) == (b.exit_code, b.stderr)
    assert "is unhealthy: HTTP 503" in a.stderr
    # without the healthcheck the decision is made
    assert ours("run", contract, "x", "--no-healthcheck").exit_code == 0
