"""Stored reports are verified exactly as DecGuard verifies them.

Our reports pass the reference's ``decguard report`` and the reference's pass ours; a report
edited anywhere (a metric, a probability, the status, a check, a result removed, a key added)
makes both exit 2 with the same message; ``report --contract`` re-applies edited gates the
same way.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from decguard_pipeline_tests.conftest import same_text
from decguard_pipeline_tests.support.golden_cases import comparable, write_inputs

CONTRACT = """\
schema_version: "0.1"
decision: {name: refund_request, type: choice, options: [refund, reject, review]}
backend:
  provider: mock
  model: refund-mock-v1
  rules:
    - {contains: damaged, probabilities: {refund: 0.96, reject: 0.01, review: 0.03}}
    - {contains: broken, probabilities: {refund: 0.5, reject: 0.2, review: 0.3005}}
    - {contains: changed my mind, probabilities: {refund: 0.05, reject: 0.85, review: 0.10}}
  default: {refund: 0.20, reject: 0.15, review: 0.65}
dataset: cases.jsonl
evaluation: {confidence_threshold: 0.8, probability_tolerance: 0.0001, calibration_bins: 5}
requirements: {min_accuracy: 0.5, max_error_rate: 0.5}
warnings: {min_coverage: 0.9, max_latency_p95_ms: 10000}
"""
CASES = [
    {"id": "r1", "input": "The blender arrived damaged.", "expected": "refund"},
    {"id": "r2", "input": "It came broken.", "expected": "refund"},  # invalid_response
    {"id": "r3", "input": "I changed my mind.", "expected": "reject"},
    {"id": "r4", "input": "Lid damaged, I want a new lid.", "expected": "review"},  # mismatch
    {"id": "r5", "input": {"text": "Where is my invoice?", "n": 2}, "metadata": {"k": "v"}},
    {"input": "Price differs from the website.", "expected": "review"},
]


@pytest.fixture
def stored(tmp_path, monkeypatch, ref) -> dict[str, Any]:
    """A reference report with a pass, an error, a mismatch and an unlabeled object input."""
    monkeypatch.chdir(tmp_path)
    Path("decguard.yaml").write_text(CONTRACT)
    Path("cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in CASES))
    assert ref("test", "decguard.yaml", "-o", "ref.json").exit_code == 0
    doc = json.loads(Path("ref.json").read_text())
    assert doc["status"] == "warn" and doc["metrics"]["counts"]["errored"] == 1
    assert [f["kind"] for f in doc["failures"]] == ["error", "mismatch"]
    return doc


def _edit(doc: dict[str, Any], key_path: str, value: Any) -> None:
    *parents, last = key_path.split(".")
    target: Any = doc
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]
    if isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value


def _drop(doc: dict[str, Any], key_path: str) -> None:
    *parents, last = key_path.split(".")
    target: Any = doc
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]
    if isinstance(target, list):
        del target[int(last)]
    else:
        del target[last]


def _same_probabilities_other_sum(doc: dict[str, Any]) -> None:
    # still a valid distribution, still refund first: only the recomputed metrics notice
    doc["results"][0]["result"]["probabilities"].update(refund=0.9595, reject=0.0105)
    doc["results"][0]["result"]["confidence"] = 0.9595


def _swap_error_for_result(doc: dict[str, Any]) -> None:
    doc["results"][1]["error"] = None
    doc["results"][1]["result"] = copy.deepcopy(doc["results"][0]["result"])
    doc["results"][1]["result"]["case_id"] = doc["results"][1]["case_id"]


TAMPERING: dict[str, Callable[[dict[str, Any]], None]] = {
    "metric": lambda d: _edit(d, "metrics.calibration.ece", 0.1),
    "metric count": lambda d: _edit(d, "metrics.counts.labeled", 5),
    "bin": lambda d: _edit(d, "metrics.calibration.reliability.4.count", 9),
    "probability": lambda d: _edit(d, "results.0.result.probabilities.refund", 0.95),
    "probability, still valid": _same_probabilities_other_sum,
    "probability NaN": lambda d: _edit(d, "results.0.result.probabilities.refund", float("nan")),
    "probability negative": lambda d: _edit(d, "results.0.result.probabilities.reject", -0.01),
    "probability bool": lambda d: _edit(d, "results.0.result.probabilities.reject", True),
    "probabilities reordered": lambda d: _edit(
        d,
        "results.0.result.probabilities",
        dict(reversed(list(d["results"][0]["result"]["probabilities"].items()))),
    ),
    "selected": lambda d: _edit(d, "results.0.result.selected", "review"),
    "confidence": lambda d: _edit(d, "results.0.result.confidence", 0.5),
    "latency": lambda d: _edit(d, "results.0.result.latency_ms", 1e9),
    "latency type": lambda d: _edit(d, "results.0.result.latency_ms", "fast"),
    "status": lambda d: _edit(d, "status", "pass"),
    "status unknown": lambda d: _edit(d, "status", "PASS"),
    "exit code": lambda d: _edit(d, "exit_code", 1),
    "check message": lambda d: _edit(d, "checks.0.message", "accuracy 0.75 >= 0.4"),
    "check threshold": lambda d: _edit(d, "checks.0.threshold", 0.4),
    "check status": lambda d: _edit(d, "checks.2.status", "pass"),
    "check removed": lambda d: _drop(d, "checks.3"),
    "gate edited": lambda d: _edit(d, "requirements.min_accuracy", 0.9),
    "evaluation edited": lambda d: _edit(d, "evaluation.calibration_bins", 10),
    "tolerance out of range": lambda d: _edit(d, "evaluation.probability_tolerance", 0.5),
    "result removed": lambda d: _drop(d, "results.5"),
    "all results removed": lambda d: _edit(d, "results", []),
    "key added at top": lambda d: _edit(d, "extra", 1),
    "key added to a result": lambda d: _edit(d, "results.0.result.extra", 1),
    "key added to metrics": lambda d: _edit(d, "metrics.latency.p42_ms", 1.0),
    "key removed": lambda d: _drop(d, "checks"),
    "expected changed": lambda d: _edit(d, "results.0.expected", "reject"),
    "expected unknown": lambda d: _edit(d, "results.0.expected", "maybe"),
    "expected int": lambda d: _edit(d, "results.0.expected", 1),
    "duplicate id": lambda d: (
        _edit(d, "results.2.case_id", "r1") or _edit(d, "results.2.result.case_id", "r1")
    ),
    "result id differs": lambda d: _edit(d, "results.2.result.case_id", "zz"),
    "result of another backend": lambda d: _edit(d, "results.2.result.backend", "other"),
    "labels reordered": lambda d: _edit(d, "contract.labels", ["refund", "review", "reject"]),
    "result and error": lambda d: _edit(d, "results.0.error", {"kind": "timeout", "message": "x"}),
    "neither result nor error": lambda d: _edit(d, "results.0.result", None),
    "error became a result": _swap_error_for_result,
    "error kind": lambda d: _edit(d, "results.1.error.kind", "timeout"),
    "failure removed": lambda d: _drop(d, "failures.1"),
    "failures reordered": lambda d: d["failures"].reverse(),
    "dataset count": lambda d: _edit(d, "dataset.n_cases", 7),
    "labeled count": lambda d: _edit(d, "dataset.n_labeled", 4),
    "fuzz mode without properties": lambda d: _edit(d, "mode", "fuzz"),
    "report version": lambda d: _edit(d, "report_version", "0.2"),
    "health not an object": lambda d: _edit(d, "health", 5),
    "health status": lambda d: _edit(d, "health", {"status": "great", "detail": ""}),
    "metrics not an object": lambda d: _edit(d, "metrics", "x"),
    "input a number": lambda d: _edit(d, "results.0.input", 5),
    "decision type": lambda d: _edit(d, "contract.type", "multi"),
    "created_at a number": lambda d: _edit(d, "created_at", 5),
}


@pytest.mark.parametrize("name", TAMPERING)
def test_tampered_report_exits_2_in_both(name, stored, ours, ref):
    doc = copy.deepcopy(stored)
    TAMPERING[name](doc)
    Path("t.json").write_text(json.dumps(doc, indent=2))
    a, b = ours("report", "t.json"), ref("report", "t.json")
    assert (a.exit_code, b.exit_code) == (2, 2), (a.stderr, b.stderr)
    assert a.stderr == b.stderr
    assert a.stderr.startswith("error: t.json: not a DecGuard 0.1 report:\n")
    assert a.stdout == ""


UNCHANGED: dict[str, Callable[[dict[str, Any]], None]] = {
    "secret metadata is redacted on load": lambda d: _edit(
        d, "results.0.result.metadata", {"token": "sk-1", "nested": [{"Api-Key": "k"}]}
    ),
    "secret backend details are redacted on load": lambda d: _edit(
        d, "backend.details.authorization", "Bearer x"
    ),
    "ints for floats": lambda d: _edit(d, "metrics.calibration.reliability.0.lower", 0),
    "reindented": lambda d: None,
    # 19 digits right after a colon inside a string: no number, the typed path reads it
    "hash of nineteen digits": lambda d: _edit(d, "dataset.hash", "sha256:" + "0" * 64),
    # kept exact (orjson would read a float): the typed path reads it as the standard library
    "integer beyond 64 bits in metadata": lambda d: _edit(
        d, "results.4.metadata", {"k": "v", "big": 2**70, "neg": -(2**64) - 1}
    ),
}


@pytest.mark.parametrize("name", UNCHANGED)
def test_harmless_edits_still_verify_in_both(name, stored, ours, ref):
    doc = copy.deepcopy(stored)
    UNCHANGED[name](doc)
    Path("t.json").write_text(json.dumps(doc, separators=(",", ":")))
    a, b = ours("report", "t.json", "-f", "json"), ref("report", "t.json", "-f", "json")
    assert (a.exit_code, b.exit_code) == (0, 0), (a.stderr, b.stderr)
    mine, theirs = json.loads(a.stdout), json.loads(b.stdout)
    mine.pop("decguard_version"), theirs.pop("decguard_version")
    assert mine == theirs
    assert "sk-1" not in a.stdout and "Bearer x" not in a.stdout


@pytest.mark.parametrize(
    "text",
    ["", "not json", "[1]", "null", '{"report_version": "0.1"}', "\ufeff{}"],
    ids=["empty", "garbage", "list", "null", "almost nothing", "bom"],
)
def test_unreadable_documents(text, tmp_path, monkeypatch, ours, ref):
    monkeypatch.chdir(tmp_path)
    Path("t.json").write_text(text, encoding="utf-8")
    a, b = ours("report", "t.json"), ref("report", "t.json")
    assert (a.exit_code, a.stderr) == (b.exit_code, b.stderr) == (2, b.stderr)


def test_not_utf8_and_missing(tmp_path, monkeypatch, ours, ref):
    monkeypatch.chdir(tmp_path)
    Path("t.json").write_bytes(b'{"x": "\xff"}')
    for name in ("t.json", "missing.json"):
        a, b = ours("report", name), ref("report", name)
        assert (a.exit_code, a.stderr) == (b.exit_code, b.stderr) == (2, b.stderr)
        assert a.stderr.startswith(f"error: {name}: cannot read report: ")


def test_reports_cross_verify(stored, ours, ref):
    """Each side's report verifies in the other, and prints the same summary."""
    assert ours("test", "decguard.yaml", "-o", "ours.json").exit_code == 0
    for name in ("ours.json", "ref.json"):
        a, b = ours("report", name), ref("report", name)
        assert (a.exit_code, b.exit_code) == (0, 0), (a.stderr, b.stderr)
        mine, theirs = same_text(a.stdout, b.stdout)
        assert mine == theirs
    mine, theirs = json.loads(Path("ours.json").read_text()), stored
    assert comparable(mine) == comparable(theirs)


@pytest.mark.parametrize("seed", range(0, 60, 4))
def test_generated_reports_cross_verify(seed, tmp_path, monkeypatch, ours, ref):
    monkeypatch.chdir(tmp_path)
    contract, _, _ = write_inputs(tmp_path, seed)
    a = ours("test", contract.name, "-o", "ours.json")
    b = ref("test", contract.name, "-o", "ref.json")
    assert a.exit_code == b.exit_code
    if a.exit_code == 2:
        return
    for name in ("ours.json", "ref.json"):
        x, y = ours("report", name, "-f", "json"), ref("report", name, "-f", "json")
        assert x.exit_code == y.exit_code == a.exit_code, (x.stderr, y.stderr)
        assert comparable(json.loads(x.stdout)) == comparable(json.loads(y.stdout))


EDITED_GATES = """\
requirements: {min_accuracy: 0.9, max_error_rate: 0.5, max_ece: 0.05}
warnings: {max_nll: 1}
evaluation: {confidence_threshold: 0.5, calibration_bins: 3, probability_tolerance: 0.0001}
"""


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_report_with_edited_contract(fmt, stored, ours, ref):
    head = CONTRACT.split("evaluation:")[0]
    Path("edited.yaml").write_text(head + EDITED_GATES)
    a = ours("report", "ref.json", "-c", "edited.yaml", "-f", fmt, "-o", "re-ours.json")
    b = ref("report", "ref.json", "-c", "edited.yaml", "-f", fmt, "-o", "re-ref.json")
    assert a.exit_code == b.exit_code == 1, (a.stderr, b.stderr)
    assert a.stderr == "report written to re-ours.json\n"
    mine = json.loads(Path("re-ours.json").read_text())
    theirs = json.loads(Path("re-ref.json").read_text())
    assert mine["contract"]["path"] == "edited.yaml"
    assert comparable(mine) == comparable(theirs)
    if fmt == "text":
        assert same_text(a.stdout, b.stdout)[0] == same_text(a.stdout, b.stdout)[1]
    # the re-evaluated report verifies in both
    for name in ("re-ours.json", "re-ref.json"):
        assert ours("report", name).exit_code == ref("report", name).exit_code == 1


def test_report_with_contract_of_another_decision(stored, ours, ref):
    Path("other.yaml").write_text(CONTRACT.replace("review]", "escalate]"))
    a, b = (
        ours("report", "ref.json", "-c", "other.yaml"),
        ref("report", "ref.json", "-c", "other.yaml"),
    )
    assert (a.exit_code, a.stderr) == (b.exit_code, b.stderr) == (2, b.stderr)
    assert "describes 'refund_request'" in a.stderr


def test_fail_on_warn_for_stored_warn(stored, ours, ref):
    for args in (["report", "ref.json"], ["report", "ref.json", "--fail-on-warn"]):
        assert ours(*args).exit_code == ref(*args).exit_code
    assert ours("report", "ref.json", "--fail-on-warn").exit_code == 1
