"""Stored check reports used as ``--baseline``: verified on load exactly as decguard 0.1.1
verifies them. Every tampering is caught with the same message; intact reports of either
tool are accepted by both."""

from __future__ import annotations

import copy
import json
import random
import textwrap

import pytest

from decguard_pipeline_tests.support.production_records import (
    CONTRACTS,
    make_record,
    run_both,
    write_records,
)


def _set(path, value):
    def edit(doc):
        target = doc
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return edit


def _drop(path):
    def edit(doc):
        target = doc
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]

    return edit


def _dup_record(doc):
    doc["records"][3]["id"] = doc["records"][1]["id"]


def _many_errors(doc):
    for record in doc["records"][:12]:
        record["selected"] = 1.5
        record["confidence"] = "x"


TAMPER = {
    "metrics count": _set(["metrics", "counts", "total"], 99),
    "metric value": _set(["metrics", "calibration", "brier"], 0.5),
    "dataset counts": _set(["dataset", "n_outcomes"], 0),
    "record selected": _set(["records", 2, "selected"], "review"),
    "record probability": _set(["records", 2, "probabilities", "refund"], 0.01),
    "record not normalised": _set(["records", 4, "outcome_correct"], None),
    "duplicate id": _dup_record,
    "no records": _set(["records"], []),
    "record missing confidence": _drop(["records", 0, "confidence"]),
    "many schema errors": _many_errors,
    "unknown top-level field": _set(["extra"], 1),
    "status": _set(["status"], "pass"),
    "exit code": _set(["exit_code"], 0),
    "drift": _set(["drift", "confidence_mean_delta"], 0.5),
    "segments": _set(["segments", 0, "status"], "warn"),
    "checks": _set(["checks", 0, "message"], "fine"),
    "baseline count": _set(["baseline", "n_records"], 3),
    "baseline histogram bins": _set(["baseline", "metrics", "confidence", "histogram"], [1, 2]),
    "segment value unusable": _set(["records", 1, "metadata"], {"locale": ["en"]}),
    "wrong check_version": _set(["check_version"], "0.2"),
    "evaluation out of range": _set(["evaluation", "calibration_bins"], 0),
    "decision type": _set(["contract", "type"], "ranking"),
    "coerced numbers stay valid": _set(["exit_code"], "1"),
}


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """A failing report with baseline and segments, from each tool."""
    from click.testing import CliRunner
    from decguard.cli import app
    from typer.main import get_command

    from decguard_pipeline.cli import cli

    tmp = tmp_path_factory.mktemp("reports")
    contract = tmp / "c.yaml"
    contract.write_text(textwrap.dedent(CONTRACTS["choice"]))
    rng = random.Random(21)
    current = write_records(tmp / "c.jsonl", [make_record(rng, "choice", i) for i in range(40)])
    base = write_records(tmp / "b.jsonl", [make_record(rng, "choice", i) for i in range(20)])
    out = {}
    for name, app_, prog in (("ours", cli, "decguard-pipeline"), ("ref", get_command(app), "x")):
        path = tmp / f"{name}.json"
        args = [str(contract), "-d", str(current), "--baseline", str(base), "-o", str(path)]
        CliRunner().invoke(app_, ["check", *args], prog_name=prog, catch_exceptions=False)
        out[name] = json.loads(path.read_text())
    return contract, current, out


@pytest.mark.parametrize("case", sorted(TAMPER))
@pytest.mark.parametrize("source", ["ours", "ref"])
def test_tampered_report_is_rejected_alike(case, source, reports, tmp_path, ours, ref):
    contract, current, docs = reports
    doc = copy.deepcopy(docs[source])
    TAMPER[case](doc)
    path = tmp_path / "tampered.json"
    path.write_text(json.dumps(doc, indent=2))
    a = ours("check", contract, "-d", current, "--baseline", path)
    b = ref("check", contract, "-d", current, "--baseline", path)
    mine = a.stdout.replace(docs["ours"]["decguard_version"], "V")
    theirs = b.stdout.replace(docs["ref"]["decguard_version"], "V")
    assert (a.exit_code, a.stderr, mine) == (b.exit_code, b.stderr, theirs)


@pytest.mark.parametrize("source", ["ours", "ref"])
def test_intact_reports_are_accepted_by_both(source, reports, tmp_path, ours, ref):
    contract, current, docs = reports
    path = tmp_path / "intact.json"
    path.write_text(json.dumps(docs[source]))
    run_both(ours, ref, contract, "-d", current, "--baseline", path)


def test_report_for_another_decision(reports, write, tmp_path, ours, ref):
    _, current, docs = reports
    path = tmp_path / "r.json"
    path.write_text(json.dumps(docs["ref"]))
    other = write("other.yaml", textwrap.dedent(CONTRACTS["choice"]).replace("route", "triage"))
    current = write("t.jsonl", current.read_text().replace('"route"', '"triage"'))
    a = ours("check", other, "-d", current, "--baseline", path)
    b = ref("check", other, "-d", current, "--baseline", path)
    assert (a.exit_code, a.stderr) == (b.exit_code, b.stderr)
    assert "is for 'route' (choice, ['refund', 'reject', 'review']), not 'triage'" in a.stderr


def test_report_records_rechecked_with_current_tolerance(reports, write, tmp_path, ours, ref):
    """Records valid at the report's tolerance but not the contract's: named by record id."""
    contract, current, docs = reports
    doc = copy.deepcopy(docs["ref"])
    path = tmp_path / "loose.json"
    doc["evaluation"]["probability_tolerance"] = 0.05
    record = doc["records"][0]
    label = record["selected"]
    record["probabilities"][label] += 0.01
    record["confidence"] = record["probabilities"][label]
    path.write_text(json.dumps(doc))
    a = ours("check", contract, "-d", current, "--baseline", path)
    b = ref("check", contract, "-d", current, "--baseline", path)
    assert (a.exit_code, a.stderr) == (b.exit_code, b.stderr)
    assert a.exit_code == 2


def test_golden_report_is_not_a_baseline(write, tmp_path, ours, ref):
    from decguard_pipeline_tests.conftest import EXAMPLES

    contract = EXAMPLES / "refund" / "decguard.yaml"
    golden = tmp_path / "golden.json"
    ref("test", contract, "-o", golden)
    production = EXAMPLES / "refund" / "production.jsonl"
    a = ours("check", contract, "-d", production, "--baseline", golden)
    b = ref("check", contract, "-d", production, "--baseline", golden)
    assert (a.exit_code, a.stderr) == (b.exit_code, b.stderr)
    assert "a JSON production dataset must be a list of records" in a.stderr
