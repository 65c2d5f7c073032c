"""``fuzz`` and ``test --all`` against decguard 0.1.1: identical pairs (ids, steps, inputs,
presentations), comparisons, violations, reduced examples, summaries, skips, checks, exit
codes and terminal layout, on the bundled examples and on generated contracts covering every
property, decision type and skip reason. Each tool's report verifies in the other."""

from __future__ import annotations

import json

import pytest

from decguard_pipeline_tests.conftest import EXAMPLES
from decguard_pipeline_tests.support.fuzz_compare import assert_same_layout, assert_same_report
from decguard_pipeline_tests.support.fuzz_scenarios import (
    SCENARIOS,
    write_scenario,
)


def _both(ours, ref, *args):
    a, b = ours(*args), ref(*args)
    assert (a.exit_code, a.stderr) == (b.exit_code, b.stderr), (a.stderr, b.stderr)
    return a, b


@pytest.mark.parametrize(
    "args",
    [
        ("fuzz", "refund"),
        ("fuzz", "refund", "-b", "order_sensitive"),
        ("test", "refund", "--all", "-b", "order_sensitive", "--seed", "3", "--no-minimize"),
        ("fuzz", "refund", "-b", "order_sensitive", "-p", "option_order", "-p", "whitespace"),
        ("fuzz", "severity"),
        ("test", "severity", "--all", "-b", "candidate"),
        ("fuzz", "spam", "-b", "candidate"),
        ("test", "spam", "--all"),
    ],
    ids=lambda a: " ".join(a),
)
def test_examples_match_reference(ours, ref, args):
    command, name, *rest = args
    contract = EXAMPLES / name / "decguard.yaml"
    a, b = _both(ours, ref, command, contract, *rest, "-f", "json")
    assert_same_report(a.stdout, b.stdout)
    a, b = _both(ours, ref, command, contract, *rest)
    assert_same_layout(a.stdout, b.stdout)


def test_documented_order_sensitive_run(ours, tmp_path):
    """DecGuard's documented numbers for ``fuzz -b order_sensitive`` (seed 42)."""
    ran = ours("fuzz", EXAMPLES / "refund" / "decguard.yaml", "-b", "order_sensitive",
               "-o", tmp_path / "fuzz.json")  # fmt: skip
    assert ran.exit_code == 1
    assert (
        "    option_order         33 compared · 27 violating (81.8%) · flips 0 (0.0%) · "
        "max TV 0.100" in ran.stdout
    )
    assert "Property failures (10 of 27; replay with `decguard-pipeline replay`)" in ran.stdout
    pairs = {p["id"]: p for p in json.loads((tmp_path / "fuzz.json").read_text())["properties"]
             ["pairs"]}  # fmt: skip
    assert [s for s, _ in pairs["option_order/r1/2"]["presentation"]] == [
        "review", "reject", "refund"
    ]  # fmt: skip
    assert [s for s, _ in pairs["option_order/r1/2"]["reduced"]["presentation"]] == [
        "reject", "refund", "review"
    ]  # fmt: skip


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_generated_contracts_match_reference(ours, ref, tmp_path, name):
    contract = write_scenario(tmp_path, name)
    a, b = _both(ours, ref, "fuzz", contract, "-f", "json")
    doc = assert_same_report(a.stdout, b.stdout)
    assert doc["properties"]["pairs"], "the scenario must generate pairs"
    a, b = _both(ours, ref, "test", contract, "--all")
    assert_same_layout(a.stdout, b.stdout)


def test_generated_contracts_cover_what_they_should(ours, tmp_path):
    """The scenarios exercise every property, reductions, budgets, errors and skips (so the
    comparisons above are not vacuous)."""
    seen_properties, reasons, kinds = set(), set(), set()
    reduced_calls: dict[str, list[int]] = {}
    for name in SCENARIOS:
        ran = ours("fuzz", write_scenario(tmp_path, name), "-f", "json")
        section = json.loads(ran.stdout)["properties"]
        seen_properties |= {s["property"] for s in section["summaries"]}
        reasons |= {s["reason"] for s in section["skipped"]}
        kinds |= {p["error"]["kind"] for p in section["pairs"] if p["error"]}
        reduced_calls[name] = [
            p["reduced"]["backend_calls"] for p in section["pairs"] if p["reduced"]
        ]
    assert seen_properties == {
        "option_order", "label_format", "irrelevant_context", "repeated_context",
        "whitespace", "paraphrase", "inversion", "monotonic",
    }  # fmt: skip
    assert {
        "text is empty",
        "input field 'users' is missing or not a number",
        "input field 'text' is missing or not a string",
        "no rewrite matches the text",
        "no transformation changes this case",
    } <= reasons
    assert "invalid_response" in kinds
    budgets = {"choice": 3, "score": 1, "wide": 32}  # fuzz.max_minimize_calls
    for name, budget in budgets.items():
        assert reduced_calls[name] and max(reduced_calls[name]) <= budget, name
    assert max(reduced_calls["wide"]) > 1


def test_seed_and_minimise_overrides(ours, ref, tmp_path):
    contract = write_scenario(tmp_path, "choice")
    for extra in (["--seed", "77"], ["--no-minimize"], ["--minimize", "-p", "whitespace"]):
        a, b = _both(ours, ref, "fuzz", contract, "-f", "json", *extra)
        assert_same_report(a.stdout, b.stdout)


def test_minimisation_budgets(ours, ref, tmp_path):
    for budget in ("0", "1", "2", "1000"):
        contract = write_scenario(
            tmp_path / budget,
            "choice",
            **{"max_minimize_calls: 3": f"max_minimize_calls: {budget}"},
        )
        a, b = _both(ours, ref, "fuzz", contract, "-f", "json", "-p", "option_order")
        doc = assert_same_report(a.stdout, b.stdout)
        calls = [p["reduced"]["backend_calls"] for p in doc["properties"]["pairs"] if p["reduced"]]
        assert all(c <= int(budget) for c in calls) and (budget != "0" or not calls)


def test_selection_errors_come_before_any_call(ours, ref, tmp_path):
    contract = write_scenario(tmp_path, "choice")
    a, _ = _both(ours, ref, "fuzz", contract, "-p", "whitespace", "-p", "inversion")
    assert a.exit_code == 2
    assert "property 'inversion' is not enabled in the contract; enabled: option_order" in a.stderr
    bare = tmp_path / "none.yaml"  # no properties, and a dataset that does not exist
    bare.write_text(
        'schema_version: "0.1"\ndecision: {name: d, type: noul}\n'
        "backend: {provider: mock}\ndataset: missing.jsonl\n"
    )
    a, _ = _both(ours, ref, "test", bare, "--all")
    assert a.exit_code == 2
    assert "the contract enables no properties; add a 'properties' section" in a.stderr


def test_errored_originals_and_backend_errors_over_http(ours, ref, tmp_path, loopback):
    """A real decguard.http/0.1 server: originals that error give ``original_error`` pairs
    without a call; transformed requests that fail are typed pair errors."""
    server = loopback({"seed": 2, "position_bias": 0.2}, labels=("a", "b", "c"))
    folder = tmp_path / "http"
    folder.mkdir()
    cases = [
        {"id": "ok-1", "input": "first case. two sentences"},
        {"id": "status=500", "input": "the original fails"},
        {"id": "ok-2", "input": "third case"},
        {"id": "garbage", "input": "invalid JSON back"},
    ]
    (folder / "cases.jsonl").write_text("\n".join(json.dumps(c) for c in cases) + "\n")
    contract = folder / "decguard.yaml"
    contract.write_text(
        'schema_version: "0.1"\n'
        "decision: {name: d, type: choice, options: [a, b, c]}\n"
        f"backend: {{provider: http, url: '{server.url}'}}\n"
        "dataset: cases.jsonl\n"
        "evaluation: {max_concurrency: 4}\n"
        "properties:\n"
        "  option_order: {samples: 2, max_tv_distance: 0.05}\n"
        "  whitespace: {max_tv_distance: 0.0}\n"
    )
    a, b = _both(ours, ref, "fuzz", contract, "-f", "json")
    doc = assert_same_report(a.stdout, b.stdout)
    errors = {p["id"]: p["error"]["kind"] for p in doc["properties"]["pairs"] if p["error"]}
    assert errors["option_order/status=500/0"] == "original_error"
    assert errors["option_order/garbage/0"] == "original_error"
    a, b = _both(ours, ref, "fuzz", contract)
    assert_same_layout(a.stdout, b.stdout)


def test_reports_verify_in_both_tools(ours, ref, tmp_path):
    for name in SCENARIOS:
        contract = write_scenario(tmp_path, name)
        mine, theirs = tmp_path / f"{name}-ours.json", tmp_path / f"{name}-ref.json"
        a, b = ours("fuzz", contract, "-o", mine), ref("fuzz", contract, "-o", theirs)
        assert a.exit_code == b.exit_code
        checked_by_ref, checked_by_us = ref("report", mine), ours("report", theirs)
        assert checked_by_ref.exit_code == a.exit_code, checked_by_ref.stderr
        assert checked_by_us.exit_code == b.exit_code, checked_by_us.stderr
        assert_same_layout(checked_by_us.stdout, checked_by_ref.stdout)
