"""Usage and cost of `decguard-pipeline test`: the ``usage`` sidecar section and text block,
the cost gate's verdict in the exit status; DecGuard's report file stays DecGuard's."""

from __future__ import annotations

import json

import pytest

from decguard_pipeline_tests.support.priced_llm import (
    CASES,
    INPUT_PER_MILLION,
    OUTPUT_PER_MILLION,
    expected_cost,
    priced_server,
    write_priced_contract,
)


def test_sidecar_has_tokens_and_cost_the_report_none(tmp_path, ours, ref):
    with priced_server() as server:
        contract = write_priced_contract(tmp_path / "c", server.url)
        out = tmp_path / "out.json"
        ran = ours("test", contract, "-o", out)
        sent = list(server.sent_usage)
    assert ran.exit_code == 0, ran.stderr
    assert len(sent) == len(CASES)
    usage = json.loads((tmp_path / "out.pipeline.json").read_text())["usage"]
    cost = expected_cost(sent)
    assert usage["pricing"] == {
        "input_per_million": INPUT_PER_MILLION,
        "output_per_million": OUTPUT_PER_MILLION,
    }
    assert (usage["cases"], usage["cases_with_usage"], usage["decisions"]) == (5, 5, 5)
    assert usage["prompt_tokens"] == sum(p for p, _ in sent)
    assert usage["completion_tokens"] == len(CASES)
    assert usage["cost_per_run"] == pytest.approx(cost, rel=1e-12)
    assert usage["cost_per_1000"] == pytest.approx(cost / len(CASES) * 1000, rel=1e-12)
    assert usage["backend"]["requests"] == len(CASES) and usage["backend"]["retries"] == 0
    assert usage["checks"] == []

    # DecGuard's report knows nothing of it, and the reference verifies it
    text = out.read_text()
    assert "prompt_tokens" not in text and "usage" not in json.loads(text)
    assert ref("report", out).exit_code == 0

    # the text: DecGuard's layout, the usage block, then DecGuard's final line (no cost gate
    # here: its verdict is the run's)
    lines = ran.stdout.splitlines()
    usage_at = next(i for i, line in enumerate(lines) if line.startswith("  Usage "))
    assert "PASS: all gates hold" not in lines[:usage_at] and lines[usage_at - 1] == ""
    assert lines[-2:] == ["", "PASS: all gates hold"]
    assert lines[usage_at] == (
        f"  Usage        5 of 5 cases with token counts · prompt {usage['prompt_tokens']} · "
        "completion 5 tokens"
    )
    assert lines[usage_at + 1].startswith(f"  Cost         {cost:.4g} per run · ")


def test_a_backend_without_usage_prints_and_writes_nothing_new(tmp_path, ours):
    with priced_server() as server:
        contract = write_priced_contract(tmp_path / "c", server.url)
        ran = ours("test", contract, "-b", "free", "-o", tmp_path / "out.json")
    assert ran.exit_code == 0
    assert "Usage" not in ran.stdout and "Cost" not in ran.stdout
    assert not (tmp_path / "out.pipeline.json").exists()


@pytest.mark.parametrize(
    ("level", "threshold", "exit_code", "status"),
    [
        ("requirements", 1.0, 0, "pass"),  # the run costs ~0.06 per 1,000 decisions
        ("requirements", 0.01, 1, "fail"),
        ("warnings", 0.01, 0, "warn"),
    ],
)
def test_cost_gate_decides_the_exit_status(tmp_path, ours, level, threshold, exit_code, status):
    with priced_server() as server:
        pipeline = f"{level}:\n  max_cost_per_1000: {threshold}\n"
        contract = write_priced_contract(tmp_path / "c", server.url, pipeline=pipeline)
        ran = ours("test", contract, "-o", tmp_path / "out.json")
        sent = list(server.sent_usage)
    assert ran.exit_code == exit_code, ran.stdout + ran.stderr
    per_1000 = expected_cost(sent) / len(CASES) * 1000
    assert 0.01 < per_1000 < 1.0
    (check,) = json.loads((tmp_path / "out.pipeline.json").read_text())["usage"]["checks"]
    assert (check["gate"], check["metric"], check["status"]) == (
        "max_cost_per_1000",
        "cost_per_1000",
        status,
    )
    assert check["value"] == pytest.approx(per_1000, rel=1e-12)
    assert check["level"] == ("requirement" if level == "requirements" else "warning")
    # DecGuard's own verdict is untouched: its gates all hold
    assert json.loads((tmp_path / "out.json").read_text())["status"] == "pass"
    # every gate, the cost gate included, before the one final line: the run's verdict
    lines = ran.stdout.splitlines()
    gate_at = next(i for i, line in enumerate(lines) if "max_cost_per_1000" in line)
    assert lines[gate_at].startswith(f"    {status.upper():<4}  max_cost_per_1000")
    assert lines[gate_at + 1 :] == ["", FINAL[status]]
    assert sum(line.startswith(("PASS", "WARN", "FAIL", "Pipeline verdict")) for line in lines) == 1


FINAL = {
    "pass": "Pipeline verdict: PASS — every gate holds",
    "fail": "Pipeline verdict: FAIL — cost.max_cost_per_1000",
    "warn": "Pipeline verdict: WARN — cost.max_cost_per_1000",
}


def test_cost_gate_on_a_backend_without_pricing_fails_as_not_computed(tmp_path, ours):
    """A gate whose metric cannot be computed never holds (DecGuard's rule for every gate),
    and the cost gate does not turn the guard extension on."""
    with priced_server() as server:
        pipeline = "requirements:\n  max_cost_per_1000: 5\n"
        contract = write_priced_contract(tmp_path / "c", server.url, pipeline=pipeline)
        ran = ours("test", contract, "-b", "free")
    assert ran.exit_code == 1
    assert (
        "FAIL  max_cost_per_1000      cost_per_1000 could not be computed "
        "(the backend has no pricing)"
    ) in ran.stdout
    assert "Pipeline ·" not in ran.stdout  # no guard section


def test_fail_on_warn_counts_the_cost_warning(tmp_path, ours):
    with priced_server() as server:
        pipeline = "warnings:\n  max_cost_per_1000: 0.01\n"
        contract = write_priced_contract(tmp_path / "c", server.url, pipeline=pipeline)
        assert ours("test", contract).exit_code == 0
        assert ours("test", contract, "--fail-on-warn").exit_code == 1


def test_validate_lists_the_cost_gates(tmp_path, ours):
    pipeline = "requirements:\n  max_cost_per_1000: 2\nwarnings:\n  max_cost_per_1000: 0.5\n"
    contract = write_priced_contract(tmp_path / "c", "http://127.0.0.1:9", pipeline=pipeline)
    ran = ours("validate", contract)
    assert ran.exit_code == 0, ran.stderr
    assert ran.stdout.splitlines()[-1] == (
        "    cost      requirement max_cost_per_1000 2; warning max_cost_per_1000 0.5"
    )
    assert "\n    guard " not in ran.stdout
