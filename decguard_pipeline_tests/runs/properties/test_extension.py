"""Beyond DecGuard: Wilson intervals on each property's violation and flip rate, and the
backend calls per property, in the sidecar ``<report stem>.pipeline.json`` (section
``properties``); DecGuard's report stays pure (the reference verifies it)."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from decguard_pipeline_tests.conftest import EXAMPLES

REFUND = EXAMPLES / "refund" / "decguard.yaml"


@pytest.mark.parametrize(("k", "n"), [(0, 1), (0, 33), (27, 33), (33, 33), (1, 2), (5, 1000)])
def test_wilson_interval_matches_scipy(k, n):
    from scipy.stats import binomtest

    from decguard_pipeline.core.stats import wilson_interval

    expected = binomtest(k, n).proportion_ci(0.95, method="wilson")
    low, high = wilson_interval(k, n)
    assert low == pytest.approx(expected.low, abs=1e-12)
    assert high == pytest.approx(expected.high, abs=1e-12)
    assert wilson_interval(0, 0) is None


def test_sidecar_next_to_the_report(ours, ref, tmp_path):
    report = tmp_path / "out" / "fuzz.json"
    ran = ours("fuzz", REFUND, "-b", "order_sensitive", "-o", report)
    assert ran.exit_code == 1
    sidecar = json.loads((tmp_path / "out" / "fuzz.pipeline.json").read_text())
    doc = json.loads(report.read_text())
    assert sidecar["report"] == "fuzz.json" and sidecar["created_at"] == doc["created_at"]
    section = sidecar["properties"]
    assert section["confidence"] == 0.95 and section["interval_method"] == "wilson"
    by_name = {s["property"]: s for s in section["summaries"]}
    assert list(by_name) == [s["property"] for s in doc["properties"]["summaries"]]
    option_order = by_name["option_order"]
    assert (option_order["n_violations"], option_order["n_evaluated"]) == (27, 33)
    low, high = option_order["violation_rate_interval"]
    assert low < 27 / 33 < high
    assert option_order["flip_rate_interval"][0] == 0.0
    # DecGuard's report carries none of it and still verifies in the reference
    assert "pipeline" not in json.dumps(doc["properties"]) and ref("report", report).exit_code == 1


def test_no_sidecar_without_properties_or_output(ours, tmp_path):
    report = tmp_path / "test.json"
    assert ours("test", REFUND, "-o", report).exit_code == 0
    assert not (tmp_path / "test.pipeline.json").exists()
    assert ours("fuzz", REFUND).exit_code == 0
    assert list(tmp_path.iterdir()) == [report]


def test_backend_calls_are_the_requests_the_model_received(ours, tmp_path, loopback):
    """Counted at a real decguard.http/0.1 server: per property, transformed requests plus
    minimisation requests (request ids are pair ids)."""
    server = loopback({"seed": 1, "position_bias": 0.2}, labels=("refund", "reject", "review"))
    contract = tmp_path / "decguard.yaml"
    contract.write_text(
        'schema_version: "0.1"\n'
        "decision: {name: refund_request, type: choice, options: [refund, reject, review]}\n"
        f"backend: {{provider: http, url: '{server.url}'}}\n"
        f"dataset: {EXAMPLES / 'refund' / 'cases.jsonl'}\n"
        "fuzz: {seed: 42, max_minimize_calls: 4}\n"
        "properties:\n"
        "  option_order: {samples: 3, max_tv_distance: 0.03}\n"
        "  label_format: {max_tv_distance: 0.03}\n"
        "  whitespace: {max_tv_distance: 0.0}\n"
    )
    report = tmp_path / "fuzz.json"
    ran = ours("fuzz", contract, "-o", report, "--max-concurrency", "8")
    assert ran.exit_code in (0, 1), ran.stderr
    received = Counter(
        r["case_id"].split("/")[0] for r in server.behaviour.requests if "/" in r["case_id"]
    )
    sidecar = json.loads((tmp_path / "fuzz.pipeline.json").read_text())["properties"]
    calls = {s["property"]: s["backend_calls"] for s in sidecar["summaries"]}
    assert {name: c["total"] for name, c in calls.items() if c["total"]} == dict(received)
    assert sidecar["backend_calls"] == sum(received.values())
    assert any(c["minimize"] for c in calls.values())
    pairs = json.loads(report.read_text())["properties"]["pairs"]
    sent = Counter(p["property"] for p in pairs if p["error"] is None or p["result"] is not None)
    assert {name: c["transformed"] for name, c in calls.items() if c["transformed"]} == dict(sent)


def test_outcome_unpacks_like_a_pair_and_survives_pickling():
    """What a Dagster asset gets from run_properties: DecGuard's (section, checks), with the
    sidecar section alongside, through an IO manager's pickle."""
    import pickle

    from decguard_pipeline.core.contract import load_contract
    from decguard_pipeline.runs.golden import decide_dataset, make_backend, resolve_dataset
    from decguard_pipeline.runs.properties import plan_properties, run_properties

    loaded = load_contract(REFUND)
    plan = plan_properties(loaded, ["option_order"], seed=None, minimize=None)
    backend = make_backend(loaded, "order_sensitive")
    golden = decide_dataset(loaded, resolve_dataset(loaded, None), backend)
    outcome = run_properties(plan, loaded, backend, golden, max_concurrency=4)
    section, checks = pickle.loads(pickle.dumps(outcome))
    assert [c["gate"] for c in checks] == [
        "option_order.max_error_rate",
        "option_order.max_violation_rate",
        "option_order.max_flip_rate",
    ]
    assert section == outcome.section
    again = pickle.loads(pickle.dumps(outcome))
    assert again.pipeline == outcome.pipeline
    assert again.pipeline["summaries"][0]["backend_calls"]["transformed"] == 33
