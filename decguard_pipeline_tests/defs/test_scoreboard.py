"""What the scoreboard and verdict assets show, from hand-written ``verdicts`` rows: the
markdown table (newest first as given, 4 significant digits, the report link on the target,
a cost column only when some cost is known, the regression against the baseline) and the
verdict in one paragraph. The whole flow through Dagster: defs/test_golden.py and the browser
test."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from decguard_pipeline.core.verdict import decide
from decguard_pipeline.defs.metadata.verdict import (
    regression_text,
    scoreboard_markdown,
    scoreboard_metadata,
    verdict_markdown,
)


def row(target: str, status: str, **extra: object) -> dict[str, object]:
    base: dict[str, object] = {
        "target": target,
        "evaluated_at": datetime(2026, 12, 1, 12, 0, tzinfo=UTC),
        "status": status,
        "approved": status != "fail",
        "failing": [],
        "warned": [],
        "regression_status": None,
        "baseline_target": None,
        "accuracy": 0.4800000000000001,
        "macro_f1": 2 / 9,
        "ece": 0.17514,
        "ece_equal_mass": 0.2,
        "coverage": 6 / 11,
        "cost_per_1000": None,
        "report_html": None,
    }
    return {**base, **extra}


@pytest.fixture(autouse=True)
def reports_at(monkeypatch):
    monkeypatch.setenv("DECGUARD_REPORTS_URL", "http://reports.test")


def test_markdown_rows_in_the_given_order_with_links_and_rounding():
    rows = [
        row("b@v2", "fail", regression_status="fail", baseline_target="a@v1",
            report_html="/wh/report_files/contract=c/target=b@v2/x.html"),
        row("a@v1", "pass", regression_status="no_baseline"),
    ]  # fmt: skip
    assert scoreboard_markdown(rows).splitlines() == [
        "| target | verdict | accuracy | macro-F1 | ECE | ECE (mass) | coverage | regression |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
        "| [b@v2](http://reports.test/contract=c/target=b@v2/x.html) | **FAIL** | 0.48 | 0.2222 "
        "| 0.1751 | 0.2 | 0.5455 | FAIL vs a@v1 |",
        "| `a@v1` | **PASS** | 0.48 | 0.2222 | 0.1751 | 0.2 | 0.5455 | no baseline |",
    ]


def test_cost_column_only_when_a_cost_is_known():
    rows = [row("b@v2", "warn", cost_per_1000=1.23456), row("a@v1", "pass")]
    lines = scoreboard_markdown(rows).splitlines()
    assert lines[0].endswith("| coverage | cost / 1k | regression |")
    assert lines[2].endswith("| 0.5455 | 1.235 | – |")  # no diff ran: no regression verdict
    assert lines[3].endswith("| 0.5455 | – | – |")


def test_table_metadata_is_numeric_and_rounded():
    meta = scoreboard_metadata([row("a@v1", "pass")])
    [record] = meta["scoreboard"].records
    assert record.data["accuracy"] == 0.48 and record.data["macro_f1"] == 0.2222
    assert record.data["verdict"] == "PASS" and record.data["approved"] is True
    assert meta["dagster/row_count"] == 1


def test_regression_text():
    assert regression_text(row("a", "pass")) == "–"
    assert regression_text(row("a", "pass", regression_status="no_baseline")) == "no baseline"
    assert regression_text(row("a", "pass", regression_status="warn", baseline_target="z@1")) == (
        "WARN vs z@1"
    )


def test_verdict_over_every_kind():
    checks = {
        "golden": [
            {"gate": "max_ece", "status": "fail", "source": "golden", "level": "requirement",
             "value": 0.17514, "threshold": 0.15, "comparison": "<="},
            {"gate": "min_accuracy", "status": "pass", "source": "golden"},
            {"gate": "max_cost_per_1000", "status": "warn", "source": "cost", "level": "warning",
             "value": float("nan"), "threshold": 0.15, "comparison": "<="},
        ],
        "properties": [{"gate": "option_order.max_violation_rate", "status": "warn",
                        "property": "option_order", "level": "warning"}],
        "regression": [{"gate": "max_accuracy_drop", "status": "fail", "level": "requirement",
                        "value": 0.5, "threshold": 0.02, "comparison": "<=",
                        "baseline_target": "a@v1"}],
        "guard": [{"gate": "min_auroc", "status": "fail", "suite": "adversarial",
                   "level": "requirement", "value": 0.52, "threshold": 0.8, "comparison": ">="}],
    }  # fmt: skip
    verdict = decide(checks)
    assert (verdict.status, verdict.approved) == ("fail", False)
    assert verdict.failing == ["golden.max_ece", "adversarial.min_auroc",
                               "regression.max_accuracy_drop"]  # fmt: skip
    assert verdict.warned == ["cost.max_cost_per_1000", "option_order.max_violation_rate"]
    assert verdict.statuses == {"golden": "fail", "properties": "warn", "guard": "fail",
                                "regression": "fail"}  # fmt: skip
    assert verdict.headline() == (
        "FAIL — golden.max_ece, adversarial.min_auroc, regression vs a@v1 (max_accuracy_drop)"
    )
    assert verdict.gate_texts() == [
        "golden.max_ece 0.1751 > 0.15", "adversarial.min_auroc 0.52 < 0.8",
        "regression.max_accuracy_drop 0.5 > 0.02",
        "cost.max_cost_per_1000 n/a (<= 0.15) (warning)",
        "option_order.max_violation_rate n/a (warning)",
    ]  # fmt: skip
    # warnings alone: WARN and still approved
    only_warned = decide({"properties": checks["properties"]})
    assert (only_warned.status, only_warned.approved) == ("warn", True)
    assert only_warned.headline() == "WARN — option_order.max_violation_rate"
    assert decide({"golden": checks["golden"][1:2]}).headline() == "PASS — every gate holds"
    text = verdict_markdown(row("b", "fail", failing=verdict.failing, approved=False))
    assert text.startswith("**FAIL** · **not approved** as a baseline")
    assert "`regression.max_accuracy_drop`" in text


def test_markdown_stays_under_the_in_place_limit():
    long = "/wh/report_files/contract=c/target=t/" + "x" * 150 + ".html"
    few = [row(f"b@v{i}", "pass", report_html=long) for i in range(3)]
    many = [row(f"b@v{i}", "pass", report_html=long) for i in range(5)]
    assert "](http://reports.test/" in scoreboard_markdown(few)  # short enough with links
    text = scoreboard_markdown(many)
    assert len(text) < 1000 and "](http" not in text  # the links go first
    assert text.count("\n") == 2 + 5 - 1
    lots = [row(f"backend_number_{i}@model-version-{i}", "fail") for i in range(40)]
    text = scoreboard_markdown(lots)
    lines = text.splitlines()
    assert len(text) < 1000 and lines[2].startswith("| `backend_number_0@")  # the newest
    shown = sum(line.startswith("| `") for line in lines)
    assert lines[-1] == f"… and {40 - shown} older targets: see `scoreboard`"
