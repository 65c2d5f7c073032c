"""The bundled examples reproduce the numbers DecGuard's documentation gives for them."""

from __future__ import annotations

import json

import pytest

from decguard_pipeline_tests.conftest import EXAMPLE_NAMES, EXAMPLES, same_text


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_validate_matches_reference(name, ours, ref):
    contract = EXAMPLES / name / "decguard.yaml"
    a, b = ours("validate", contract), ref("validate", contract)
    assert (a.exit_code, a.stdout) == (b.exit_code, b.stdout) == (0, b.stdout)


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_test_layout_matches_reference(name, ours, ref):
    contract = EXAMPLES / name / "decguard.yaml"
    a, b = ours("test", contract), ref("test", contract)
    assert a.exit_code == b.exit_code == 0
    mine, theirs = same_text(a.stdout, b.stdout)
    assert mine == theirs


def test_refund_documented_numbers(ours, tmp_path):
    out = tmp_path / "stable.json"
    ran = ours("test", EXAMPLES / "refund" / "decguard.yaml", "-o", out)
    assert ran.exit_code == 0
    m = json.loads(out.read_text())["metrics"]
    assert m["calibration"]["ece"] == pytest.approx(0.139, abs=5e-13)
    assert m["calibration"]["brier"] == pytest.approx(0.04888, abs=1e-12)
    assert m["calibration"]["nll"] == pytest.approx(0.15924, abs=1e-5)
    assert m["selective"]["coverage"] == 8 / 11
    assert [b["count"] for b in m["calibration"]["reliability"]][6:] == [2, 0, 4, 4]


def test_order_sensitive_candidate_fails_on_ece(ours):
    ran = ours("test", EXAMPLES / "refund" / "decguard.yaml", "-b", "order_sensitive", "-f", "json")
    assert ran.exit_code == 1
    doc = json.loads(ran.stdout)
    assert round(doc["metrics"]["calibration"]["ece"], 3) == 0.175
    assert doc["metrics"]["selective"]["coverage"] == 6 / 11
    assert [c["gate"] for c in doc["checks"] if c["status"] == "fail"] == ["max_ece"]


def test_spam_documented_numbers(ours):
    doc = json.loads(ours("test", EXAMPLES / "spam" / "decguard.yaml", "-f", "json").stdout)
    cls, cal = doc["metrics"]["classification"], doc["metrics"]["calibration"]
    assert cls["accuracy"] == 0.9
    assert cls["macro_f1"] == pytest.approx(0.89011, abs=1e-5)
    assert cal["brier"] == pytest.approx(0.19414, abs=1e-9)
    assert cal["ece"] == pytest.approx(0.047, abs=1e-12)
    assert cal["nll"] == pytest.approx(0.40221, abs=1e-5)
    assert [r["case_id"] for r in doc["results"]][:2] == ["case-1", "case-2"]


def test_severity_documented_numbers(ours):
    doc = json.loads(ours("test", EXAMPLES / "severity" / "decguard.yaml", "-f", "json").stdout)
    assert doc["metrics"]["classification"]["ordinal_mae"] == 0.0
    assert doc["metrics"]["calibration"]["ece"] == pytest.approx(0.29, abs=1e-12)
