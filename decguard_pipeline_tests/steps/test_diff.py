"""The diff step called as plain functions, on evaluations the golden steps wrote: which targets
the warehouse knows, which baseline each ``pipeline.baseline`` rule picks from them and why
there is none, and the rows of a candidate without a baseline."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from decguard_pipeline.core.errors import DecGuardError
from decguard_pipeline.steps.base import Step
from decguard_pipeline.steps.contracts import discover_contracts
from decguard_pipeline.steps.diff import check_rows, diff_target, known_targets, resolve_baseline
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline_tests.conftest import EXAMPLES
from decguard_pipeline_tests.support.evaluations import evaluate

STABLE, CANDIDATE = "default@refund-mock-v1", "order_sensitive@refund-mock-v2"


@pytest.fixture
def refund(tmp_path: Path) -> Path:
    """A private copy of the refund example (tests edit it); returns its contract."""
    shutil.copytree(EXAMPLES / "refund", tmp_path / "contracts" / "refund")
    return tmp_path / "contracts" / "refund" / "decguard.yaml"


def test_each_rule_picks_its_baseline_from_what_the_warehouse_knows(refund, tmp_path):
    [entry] = discover_contracts(str(refund))
    wh = Warehouse(tmp_path / "wh")
    with pytest.raises(DecGuardError, match=r"target 'default@refund-mock-v1' has not been"):
        resolve_baseline(entry, STABLE, wh)

    evaluate(entry, STABLE, wh, "run-1")
    evaluate(entry, CANDIDATE, wh, "run-2")  # fails its golden max_ece requirement
    known = known_targets("refund", wh)
    assert [(k["target"], k["backend"], k["model_version"], k["requirements_passed"])
            for k in known] == [
        (STABLE, "default", "refund-mock-v1", True),
        (CANDIDATE, "order_sensitive", "refund-mock-v2", False),
    ]  # fmt: skip
    assert [k["run_id"] for k in known] == ["run-1", "run-2"]

    # default rule: the first target has nothing before it; the other gets the default backend
    first = resolve_baseline(entry, STABLE, wh)
    assert first.choice is None
    assert first.reason == "no earlier version of backend 'default' whose requirements passed"
    second = resolve_baseline(entry, CANDIDATE, wh)
    assert second.choice is not None
    assert (second.choice.target["target"], second.choice.rule, second.reason) == (
        STABLE, "default_backend", "newest passing target of the default backend"
    )  # fmt: skip

    text = refund.read_text()
    # a pinned target is used even though its requirement gates failed
    refund.write_text(text + f"\npipeline:\n  baseline:\n    target: {CANDIDATE}\n")
    pinned = resolve_baseline(entry, STABLE, wh)
    assert pinned.choice is not None
    assert (pinned.choice.target["target"], pinned.choice.rule) == (CANDIDATE, "pinned")
    # a backend name means its newest target whose requirements passed: order_sensitive has none
    refund.write_text(text + "\npipeline:\n  baseline:\n    backend: order_sensitive\n")
    none = resolve_baseline(entry, STABLE, wh)
    assert none.choice is None
    assert none.reason == (
        "backend 'order_sensitive' has no evaluated target whose requirements passed"
    )
    # the candidate is never its own baseline, even when pinned
    refund.write_text(text + f"\npipeline:\n  baseline:\n    target: {STABLE}\n")
    itself = resolve_baseline(entry, STABLE, wh)
    assert itself.choice is None
    assert itself.reason == f"the pinned baseline target {STABLE} is the candidate itself"


def test_without_a_baseline_every_gate_passes_and_says_why(refund, tmp_path):
    [entry] = discover_contracts(str(refund))
    wh = Warehouse(tmp_path / "wh")
    evaluate(entry, STABLE, wh, "run-1")
    outcome = diff_target(entry, STABLE, Step(wh, "run-1"))
    assert (outcome.status, outcome.diff, outcome.diff_path) == ("no_baseline", None, None)
    assert set(outcome.rows) == {"diffs", "regression_checks"}
    row = wh.read_latest("diffs", "refund", STABLE).to_pylist()[0]
    written = {
        k: v for k, v in outcome.row.items() if k not in ("recorded_at", "candidate_created_at")
    }
    assert {k: row[k] for k in written} == written
    assert {k: v for k, v in row.items() if k not in outcome.row and v is not None} == {}
    assert (row["status"], row["baseline_target"], row["baseline_rule"], row["exit_code"]) == (
        "no_baseline", None, None, None
    )  # fmt: skip
    checks = check_rows(entry, STABLE, wh, "run-1")
    # DecGuard's order: requirements, the implicit max_error_rate_increase, warnings
    assert [gate for gate, _ in checks] == [
        "max_answer_flip_rate", "max_accuracy_drop", "max_ece_increase",
        "max_mean_tv_distance", "max_error_rate_increase",
    ]  # fmt: skip
    limits = {(g, c["level"]): c["threshold"] for (g, _), c in checks.items()}
    assert limits[("max_mean_tv_distance", "requirement")] == 0.03
    assert limits[("max_error_rate_increase", "requirement")] == 0.0
    reason = "no earlier version of backend 'default' whose requirements passed"
    assert {(c["status"], c["value"], c["message"]) for c in checks.values()} == {
        ("pass", None, f"no baseline: {reason}; nothing to compare, the gate holds")
    }
