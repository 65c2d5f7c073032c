"""Stored ``properties`` sections against decguard 0.1.1: tampered or malformed sections are
rejected with the same messages, and ``report --contract`` re-judges stored pairs with edited
limits, levels, directions and property sets exactly as DecGuard does."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from decguard_pipeline_tests.conftest import EXAMPLES, same_text
from decguard_pipeline_tests.support.fuzz_compare import assert_same_report
from decguard_pipeline_tests.support.fuzz_scenarios import write_scenario

REFUND = EXAMPLES / "refund" / "decguard.yaml"


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> dict[str, Any]:
    """An order-sensitive refund fuzz report (ours), with reduced examples and skips."""
    from decguard_pipeline.cli import cli
    from decguard_pipeline_tests.conftest import _invoke

    path = tmp_path_factory.mktemp("stored") / "fuzz.json"
    ran = _invoke(cli, ["fuzz", str(REFUND), "-b", "order_sensitive", "-o", str(path)], "x")
    assert ran.exit_code == 1
    return json.loads(path.read_text())


def _pair(doc: dict[str, Any], with_reduced: bool = False) -> dict[str, Any]:
    return next(p for p in doc["properties"]["pairs"] if (p["reduced"] is not None) == with_reduced)


TAMPERING: dict[str, Callable[[dict[str, Any]], None]] = {
    "comparison": lambda d: _pair(d)["comparison"].update(tv_distance=0.5),
    "violations": lambda d: _pair(d).update(violations=["made up"]),
    "reduced": lambda d: _pair(d, True)["reduced"].update(violations=[]),
    "reduced-id": lambda d: _pair(d, True)["reduced"]["result"].update(case_id="x"),
    "pair-id": lambda d: _pair(d).update(id="option_order/r1/9"),
    "duplicate-id": lambda d: d["properties"]["pairs"].append(_pair(d)),
    "unknown-case": lambda d: _pair(d).update(
        case_id="nope", id=f"option_order/nope/{_pair(d)['sample']}"
    ),
    "not-in-config": lambda d: d["properties"]["config"].update(option_order=None),
    "summary": lambda d: d["properties"]["summaries"][0].update(n_violations=1),
    "summary-duplicate": lambda d: d["properties"]["summaries"].append(
        d["properties"]["summaries"][0]
    ),
    "context": lambda d: _pair(d)["result"].update(backend="other"),
    "skip": lambda d: d["properties"]["skipped"].append(
        {"property": "inversion", "case_id": "r1", "reason": "x"}
    ),
    "missing-comparison": lambda d: _pair(d).update(comparison=None),
    "both": lambda d: _pair(d).update(error={"kind": "timeout", "message": "x"}),
    "reduced-without-violations": lambda d: _pair(d, True).update(violations=[]),
    "unknown-field": lambda d: d["properties"].update(extra=1),
    "bad-config": lambda d: d["properties"]["config"]["option_order"].update(samples=0),
    "bad-probabilities": lambda d: _pair(d)["result"]["probabilities"].update(refund=2.0),
    "mode": lambda d: d.update(properties=None),
    "checks": lambda d: d["checks"][0].update(status="fail"),
}


@pytest.mark.parametrize("name", list(TAMPERING))
def test_tampered_sections_are_rejected_like_the_reference(ours, ref, tmp_path, stored, name):
    doc = json.loads(json.dumps(stored))
    TAMPERING[name](doc)
    path = tmp_path / "tampered.json"
    path.write_text(json.dumps(doc, indent=2))
    a, b = ours("report", path), ref("report", path)
    assert (a.exit_code, a.stderr) == (b.exit_code, b.stderr)
    assert a.exit_code == 2 and "not a DecGuard 0.1 report" in a.stderr


def _edited(path: Path, source: Path, *pairs: tuple[str, str]) -> Path:
    text = source.read_text()
    for old, new in pairs:
        assert old in text, old
        text = text.replace(old, new)
    path.write_text(text)
    return path


def _reevaluate_both(ours, ref, report: Path, contract: Path) -> dict[str, Any]:
    a = ours("report", report, "-c", contract, "-f", "json")
    b = ref("report", report, "-c", contract, "-f", "json")
    assert (a.exit_code, a.stderr) == (b.exit_code, b.stderr), (a.stderr, b.stderr)
    doc = assert_same_report(a.stdout, b.stdout)
    a, b = ours("report", report, "-c", contract), ref("report", report, "-c", contract)
    mine, theirs = same_text(a.stdout, b.stdout)
    assert mine == theirs
    return doc


def test_report_contract_with_edited_limits(ours, ref, tmp_path):
    report = tmp_path / "fuzz.json"
    ours("fuzz", REFUND, "-b", "order_sensitive", "-o", report)
    local = tmp_path / "refund"
    local.mkdir()
    (local / "cases.jsonl").write_text((EXAMPLES / "refund" / "cases.jsonl").read_text())
    edits = {
        "looser": [("samples: 3, max_tv_distance: 0.03", "samples: 3, max_tv_distance: 0.09")],
        "warning": [("max_flip_rate: 0}", "max_flip_rate: 0, level: warning}")],
        "js-only": [("max_tv_distance: 0.03, max_flip_rate: 0", "max_js_divergence: 0.04")],
        "disabled": [
            (
                "whitespace: {max_tv_distance: 0.02}",
                "whitespace: {enabled: false, max_tv_distance: 0.02}",
            )
        ],
        "removed": [("  label_format: {max_tv_distance: 0.03}\n", "")],
        "violation-rate": [
            (
                "max_tv_distance: 0.03, max_flip_rate: 0",
                "max_tv_distance: 0.03, max_violation_rate: 0.9",
            )
        ],
    }
    for name, pairs in edits.items():
        contract = _edited(local / f"{name}.yaml", REFUND, *pairs)
        doc = _reevaluate_both(ours, ref, report, contract)
        assert doc["contract"]["hash"] != json.loads(report.read_text())["contract"]["hash"]


def test_newly_enabled_properties_were_not_run(ours, ref, tmp_path):
    report = tmp_path / "fuzz.json"
    ours("fuzz", REFUND, "-b", "order_sensitive", "-p", "option_order", "-o", report)
    doc = _reevaluate_both(ours, ref, report, REFUND)
    missing = [c for c in doc["checks"] if "the property was not run" in c["message"]]
    assert {c["gate"].split(".")[0] for c in missing} >= {"label_format", "whitespace"}


def test_rejudging_monotonic_direction_and_levels(ours, ref, tmp_path):
    contract = write_scenario(tmp_path, "score")
    report = tmp_path / "score.json"
    ours("test", contract, "--all", "-o", report)
    flipped = _edited(
        tmp_path / "score" / "flipped.yaml",
        contract,
        ("direction: decreasing", "direction: increasing"),
        ("max_level_decrease: 0.1", "max_level_decrease: 0.0\n    level: warning"),
    )
    _reevaluate_both(ours, ref, report, flipped)


def test_report_contract_for_another_decision_is_refused(ours, ref, tmp_path):
    report = tmp_path / "fuzz.json"
    ours("fuzz", REFUND, "-o", report)
    other = EXAMPLES / "spam" / "decguard.yaml"
    a, b = ours("report", report, "-c", other), ref("report", report, "-c", other)
    assert (a.exit_code, a.stderr) == (b.exit_code, b.stderr)
    assert a.exit_code == 2


def test_reference_reports_load_and_render_in_ours(ours, ref, tmp_path):
    for name in ("choice", "noul", "score", "wide"):
        contract = write_scenario(tmp_path, name)
        path = tmp_path / f"{name}.json"
        made = ref("test", contract, "--all", "-o", path)
        a, b = ours("report", path, "-f", "json"), ref("report", path, "-f", "json")
        assert a.exit_code == b.exit_code == made.exit_code
        assert_same_report(a.stdout, b.stdout)
