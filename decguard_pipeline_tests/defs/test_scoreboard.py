"""What the scoreboard and verdict assets show, from hand-written ``verdicts`` rows: one
markdown entry per target (newest first as given: the verdict, every gate not holding with
value and threshold, the report and diff links, each short enough to be drawn in
place), the numbers as a table rounded to 4 significant digits, the verdict's check (red for
FAIL, yellow for WARN) and the verdict in one paragraph. The whole flow through Dagster:
defs/test_golden.py, defs/test_verdict_agreement.py and the browser test."""

from __future__ import annotations

from datetime import UTC, datetime

import dagster as dg
import pytest

from decguard_pipeline.core.verdict import decide
from decguard_pipeline.defs.metadata.verdict import (
    regression_text,
    scoreboard_metadata,
    target_markdown,
    verdict_check_result,
    verdict_markdown,
)
from decguard_pipeline.warehouse.rows.verdict import verdict_row

FAILING = {
    "golden": [{"gate": "max_ece", "status": "fail", "source": "golden", "level": "requirement",
                "value": 0.17510000000000003, "threshold": 0.15, "comparison": "<="}],
    "regression": [{"gate": "max_mean_tv_distance", "status": "fail", "level": "requirement",
                    "value": 0.0508, "threshold": 0.03, "comparison": "<=",
                    "baseline_target": "a@v1"}],
}  # fmt: skip


def row(target: str, status: str, **extra: object) -> dict[str, object]:
    base: dict[str, object] = {
        "contract": "c",
        "target": target,
        "evaluated_at": datetime(2026, 12, 1, 12, 0, tzinfo=UTC),
        "status": status,
        "headline": None,
        "approved": status != "fail",
        "failing": [],
        "warned": [],
        "gates": [],
        "regression_status": None,
        "baseline_target": None,
        "accuracy": 0.4800000000000001,
        "macro_f1": 2 / 9,
        "ece": 0.17514,
        "ece_equal_mass": 0.2,
        "coverage": 6 / 11,
        "cost_per_1000": None,
        "report_html": None,
        "diff_html": None,
    }
    return {**base, **extra}


def judged(target: str, checks: dict, **extra: object) -> dict[str, object]:
    """A ``verdicts`` row as the verdict step writes it, from the checks of each kind."""
    verdict = decide(checks)
    run = {"backend": "b", "model_version": "v", "run_id": "r", "recorded_at": None}
    keys = {"contract": "c", "target": target}
    written = verdict_row(keys, run, verdict, {}, regression=None, report_path=None,
                          report_html=None)  # fmt: skip
    written.update(evaluated_at=row("t", "x")["evaluated_at"],
                   regression_status=verdict.statuses.get("regression"),
                   baseline_target=verdict.baseline, **extra)  # fmt: skip
    return {**row(target, verdict.status), **written}


@pytest.fixture(autouse=True)
def reports_at(monkeypatch):
    monkeypatch.setenv("DECGUARD_REPORTS_URL", "http://reports.test")


def test_one_entry_per_target_newest_first_with_gates_and_links():
    failing = judged("b@v2", FAILING, report_html="/wh/report_files/contract=c/target=b@v2/x.html",
                     diff_html="/wh/report_files/contract=c/target=b@v2/x.diff.html")  # fmt: skip
    rows = [failing, row("a@v1", "pass", regression_status="no_baseline")]
    meta = scoreboard_metadata(rows)
    assert list(meta)[:3] == ["summary", "b@v2", "a@v1"]  # newest first, as given
    assert meta["b@v2"].value == (
        "**FAIL** · vs a@v1 · golden.max_ece 0.1751 > 0.15, regression.max_mean_tv_distance "
        "0.0508 > 0.03 · [report](http://reports.test/contract=c/target=b@v2/x.html) · "
        "[diff](http://reports.test/contract=c/target=b@v2/x.diff.html)"
    )
    assert meta["a@v1"].value == "**PASS** · every gate holds"


def test_the_numbers_are_a_table_of_their_own_and_rounded():
    meta = scoreboard_metadata([row("a@v1", "warn", cost_per_1000=1.23456)])
    [record] = meta["scoreboard"].records
    assert record.data["accuracy"] == 0.48 and record.data["ECE"] == 0.1751
    assert record.data["cost / 1k"] == "1.235"
    assert [c.name for c in meta["scoreboard"].schema.columns] == [
        "target", "accuracy", "ECE", "coverage", "cost / 1k"
    ]  # fmt: skip
    assert meta["dagster/row_count"] == 1
    # no cost known: no cost column
    plain = scoreboard_metadata([row("a@v1", "pass")])["scoreboard"]
    assert [c.name for c in plain.schema.columns] == ["target", "accuracy", "ECE", "coverage"]


def test_every_entry_is_drawn_in_place_and_keeps_its_links():
    """The UI draws markdown in place below 1,000 characters: with forty targets every one
    keeps its links; a target with very many failing gates lists what fits and says how many
    more there are."""
    long = "/wh/report_files/contract=c/target=t/" + "x" * 150 + ".html"
    many = [judged(f"backend_number_{i}@model-version-{i}", FAILING, report_html=long)
            for i in range(40)]  # fmt: skip
    meta = scoreboard_metadata(many)
    for target in (r["target"] for r in many):
        text = meta[target].value
        assert len(text) < 1000 and "[report](http://reports.test/" in text
    gates = [{"gate": f"max_gate_number_{i}", "status": "fail", "source": "golden",
              "level": "requirement", "value": 0.5, "threshold": 0.1, "comparison": "<="}
             for i in range(60)]  # fmt: skip
    text = target_markdown(judged("z@1", {"golden": gates}, report_html=long))
    assert len(text) < 1000 and "[report](" in text
    shown = text.count("golden.max_gate_number_")
    assert 0 < shown < 60 and f"… and {60 - shown} more (see `verdict`)" in text


def test_the_verdict_check_is_red_for_fail_yellow_for_warn_green_for_pass():
    asset = dg.AssetKey(["c", "verdict"])
    failed = verdict_check_result(judged("b@v2", FAILING), asset, "verdict")
    assert (failed.passed, failed.severity) == (False, dg.AssetCheckSeverity.ERROR)
    assert failed.description == (
        "FAIL — golden.max_ece, regression vs a@v1 (max_mean_tv_distance)"
    )
    assert failed.metadata["gates"].value == (
        "- golden.max_ece 0.1751 > 0.15\n- regression.max_mean_tv_distance 0.0508 > 0.03"
    )
    warned = {"golden": [{**FAILING["golden"][0], "status": "warn", "level": "warning"}]}
    warn = verdict_check_result(judged("b@v2", warned), asset, "verdict")
    assert (warn.passed, warn.severity) == (False, dg.AssetCheckSeverity.WARN)
    passed = verdict_check_result(judged("a@v1", {"golden": []}), asset, "verdict")
    assert passed.passed and passed.description == "PASS — every gate holds"


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
        "option_order.max_violation_rate (warning)",
    ]  # fmt: skip
    # warnings alone: WARN and still approved
    only_warned = decide({"properties": checks["properties"]})
    assert (only_warned.status, only_warned.approved) == ("warn", True)
    assert only_warned.headline() == "WARN — option_order.max_violation_rate"
    assert decide({"golden": checks["golden"][1:2]}).headline() == "PASS — every gate holds"
    text = verdict_markdown(judged("b@v2", checks))
    assert text.startswith(
        "**FAIL — golden.max_ece, adversarial.min_auroc, regression vs a@v1 (max_accuracy_drop)**"
        " · **not approved** as a baseline"
    )
    assert "\n- regression.max_accuracy_drop 0.5 > 0.02\n" in text
