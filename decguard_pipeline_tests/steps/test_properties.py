"""The properties step (``steps/properties.run_target``) called as a plain function: how many
backend calls it keeps in flight, measured at a real model server on loopback."""

from __future__ import annotations

from decguard_pipeline.steps.base import Step
from decguard_pipeline.steps.contracts import discover_contracts
from decguard_pipeline.steps.golden import evaluate_target
from decguard_pipeline.steps.properties import run_target
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline_tests.support.evaluations import refund_over_http

TARGET = "default@loop-v1"


def test_the_contract_decides_how_many_property_calls_are_in_flight(tmp_path, loopback, ours):
    """The step passes no concurrency of its own: the contract's ``evaluation.max_concurrency``
    bounds the pairs as it bounds the golden cases, and the CLI's ``--max-concurrency``
    overrides both."""
    server = loopback(delay_ms=15, labels=("refund", "reject", "review"))
    contract = refund_over_http(
        tmp_path / "contracts" / "loop",
        server,
        "evaluation: {max_concurrency: 3}\n"
        "fuzz: {seed: 42, minimize: false}\n"
        "properties:\n"
        "  option_order: {samples: 3, max_tv_distance: 0.03, level: warning}\n",
    )
    [entry] = discover_contracts(str(contract))
    step = Step(Warehouse(tmp_path / "wh"), "run-1")
    evaluate_target(entry, TARGET, step)
    golden_requests = len(server.behaviour.requests)

    server.behaviour.max_in_flight = 0
    done = run_target(entry, TARGET, step)
    assert len(done.section["pairs"]) == 33  # 11 cases x 3 orders, all sent
    assert len(server.behaviour.requests) == golden_requests + 33
    assert server.behaviour.max_in_flight == 3

    server.behaviour.max_in_flight = 0
    ran = ours("test", contract, "--all", "--max-concurrency", 2, "-o", tmp_path / "r.json")
    assert ran.exit_code == 0, ran.stderr
    assert server.behaviour.max_in_flight == 2
