"""The run's usage section and the cost gate (core/usage.py, pipeline.requirements /
pipeline.warnings.max_cost_per_1000)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from decguard_pipeline.core.contract import load_contract
from decguard_pipeline.core.contract.extension_gates import ExtensionGates, GuardGates
from decguard_pipeline.core.errors import ContractError
from decguard_pipeline.core.guard.extension import guard_config, guard_enabled
from decguard_pipeline.core.usage import (
    Pricing,
    cost_checks,
    render_usage,
    run_cost,
    usage_extension,
    usage_section,
)

CONTRACT = """\
schema_version: "0.1"
decision: {name: q, type: choice, options: [a, b]}
backend: {provider: mock}
"""
PRICE = Pricing(input_per_million=2.0, output_per_million=8.0)


def _contract(tmp_path, pipeline: str = ""):
    path = tmp_path / "decguard.yaml"
    path.write_text(CONTRACT + (f"pipeline:\n{pipeline}" if pipeline else ""))
    return load_contract(path).contract


def _section(prompt, completion, decided, pricing=PRICE, stats=None):
    cost = run_cost(
        None if prompt is None else np.array(prompt, dtype=float),
        None if completion is None else np.array(completion, dtype=float),
        pricing,
        decided=np.array(decided),
    )
    return usage_section(cost, pricing, stats or {})


def test_the_cost_gate_is_an_extension_gate_that_leaves_the_guard_off(tmp_path):
    contract = _contract(tmp_path, "  requirements: {max_cost_per_1000: 2.5}\n")
    assert not guard_enabled(contract)
    gates = contract.pipeline.requirements
    assert gates.cost() == {"max_cost_per_1000": 2.5} and gates.owned(GuardGates) == {}
    with_guard = _contract(tmp_path, "  requirements: {max_cost_per_1000: 2, min_auroc: 0.8}\n")
    assert guard_enabled(with_guard)
    assert guard_config(with_guard).requirements.configured() == {"min_auroc": 0.8}


@pytest.mark.parametrize(
    ("pipeline", "message"),
    [
        ("  warnings: {max_cost_per_1000: -1}\n",
         "pipeline.warnings.max_cost_per_1000: Input should be greater than or equal to 0"),
        ("  requirements: {max_cost_per_1k: 1}\n",
         "pipeline.requirements.max_cost_per_1k: unknown field (check the spelling)"),
    ],
)  # fmt: skip
def test_bad_cost_gates_are_contract_errors(tmp_path, pipeline, message):
    with pytest.raises(ContractError, match=re.escape(message)):
        _contract(tmp_path, pipeline)


def test_cost_checks_inclusive_by_level_and_not_computed_reasons():
    # 3 decisions out of 4 cases, 100+200+300 prompt and 3 completion tokens known
    section = _section([100, 200, 300, np.nan], [1, 1, 1, np.nan], [True, True, False, True])
    cost = (600 * 2.0 + 3 * 8.0) / 1e6
    assert section["cost_per_run"] == pytest.approx(cost, rel=1e-15)
    per_1000 = cost / 3 * 1000
    assert section["cost_per_1000"] == pytest.approx(per_1000, rel=1e-15)
    exact = section["cost_per_1000"]
    requirements = ExtensionGates(max_cost_per_1000=exact)  # inclusive: holds at equality
    warnings = ExtensionGates(max_cost_per_1000=exact / 2)
    checks = cost_checks(section, requirements, warnings)
    assert [(c["level"], c["status"]) for c in checks] == [
        ("requirement", "pass"),
        ("warning", "warn"),
    ]
    assert checks[1]["message"] == f"cost_per_1000 {exact:.4g} violates <= {exact / 2:g}"

    gate = ExtensionGates(max_cost_per_1000=100.0)
    none = ExtensionGates()
    reasons = {
        "no pricing": _section([10], [1], [True], pricing=None),
        "no usage": _section(None, None, [True]),
        "no decisions": _section([10], [1], [False]),
    }
    messages = {k: cost_checks(s, gate, none)[0]["message"] for k, s in reasons.items()}
    assert messages == {
        "no pricing": "cost_per_1000 could not be computed (the backend has no pricing)",
        "no usage": "cost_per_1000 could not be computed (the backend reported no token usage)",
        "no decisions": "cost_per_1000 could not be computed (no case ended in a decision)",
    }
    assert cost_checks(None, gate, none)[0]["status"] == "fail"
    assert cost_checks(section, none, none) == []


def test_usage_extension_only_when_there_is_something_to_say(tmp_path):
    plain = _contract(tmp_path)
    nothing = _section(None, None, [True], pricing=None)
    assert usage_extension(plain, nothing) is None
    counted = _section([5], [1], [True], pricing=None)
    assert usage_extension(plain, counted) == {**counted, "checks": []}
    gated = _contract(tmp_path, "  warnings: {max_cost_per_1000: 1}\n")
    (check,) = usage_extension(gated, nothing)["checks"]
    assert check["status"] == "warn"
    assert usage_extension(gated, nothing, gated=False) is None  # fuzz: no golden gates


def test_render_usage_block():
    stats = {"requests": 1204, "retries": 3, "retry_wait_s": 2.25, "retry_after_honoured": 2,
             "paced": 7, "paced_wait_s": 0.5}  # fmt: skip
    section = _section([1000, 2000], [10, 5], [True, True], stats=stats)
    section["checks"] = cost_checks(section, ExtensionGates(), ExtensionGates(max_cost_per_1000=1))
    assert render_usage(section).splitlines() == [
        "  Usage        2 of 2 cases with token counts · prompt 3,000 · completion 15 tokens",
        "  Cost         0.00612 per run · 3.06 per 1,000 decisions (per million tokens: "
        "input 2, output 8)",
        "  Requests     1,204 sent · 3 retries (2.2 s waited, 2 as the server asked) · "
        "7 paced (0.5 s)",
        "    WARN  max_cost_per_1000      cost_per_1000 3.06 violates <= 1 (warning)",
    ]
