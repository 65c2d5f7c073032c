"""The guard flow (``runs/guard.py``) end to end: suites, the sidecar and pictures next to
DecGuard's report (which the reference still verifies), partial runs on a real HTTP server, bad
settings, ``list metrics``, and the step's way in (a main report handed in)."""

from __future__ import annotations

import json
import re

import pytest

from decguard_pipeline.core.contract import load_contract
from decguard_pipeline.core.guard.extension import guard_config
from decguard_pipeline.runs.guard import plan_datasets, run_guarded
from decguard_pipeline_tests.conftest import ROOT, same_text
from decguard_pipeline_tests.support.guard_contracts import cases, partial_contract, png_size

BACKEND = """\
backend:
  provider: mock
  rules:
    - contains: winner
      probabilities: {spam: 0.97, ham: 0.03}
    - contains: free money
      probabilities: {spam: 0.92, ham: 0.08}
    - contains: meeting
      probabilities: {spam: 0.30, ham: 0.70}
  default: {spam: 0.06, ham: 0.94}
"""
HEAD = f"""\
schema_version: "0.1"
decision: {{name: is_spam, type: noul, labels: [spam, ham]}}
{BACKEND}dataset: clear.jsonl
"""
EXTENSION = """\
pipeline:
  suites: {clear: clear.jsonl, adversarial: adversarial.jsonl}
  calibration: {bins: 4, split_by: [difficulty]}
  risk_coverage: {escalation_cost: 2, error_cost: 20}
  requirements: {min_auroc: 0.8}
  warnings: {max_fnr: 0.0}
"""
CLEAR = [
    ("You are a WINNER, claim now", "spam"),
    ("free money inside", "spam"),
    ("winner winner prize", "spam"),
    ("free money for you", "spam"),
    ("Lunch at noon?", "ham"),
    ("Notes from the meeting", "ham"),
    ("See you tomorrow", "ham"),
    ("Invoice attached", "ham"),
]
ADVERSARIAL = [
    ("Congratulations, you have been selected for a prize", "spam"),  # 0.06: missed
    ("Claim your f r e e m o n e y", "spam"),  # 0.06: missed
    ("The winner of the chess club is Ana", "ham"),  # 0.97: false alarm
    ("Free money talk at the meetup", "ham"),  # 0.92: false alarm
    ("winner takes all, lottery", "spam"),  # 0.97: caught
    ("Hello there", "ham"),  # 0.06: right
]


@pytest.fixture
def suite_contract(write):
    write("clear.jsonl", cases(CLEAR, "c"))
    write("adversarial.jsonl", cases(ADVERSARIAL, "a"))
    write("plain.yaml", HEAD)  # the same contract as DecGuard knows it
    return write("decguard.yaml", HEAD + EXTENSION)


def decguard_part(doc: dict) -> dict:
    """A report without what legitimately differs between producers and runs."""
    doc = dict(doc, created_at=None, decguard_version=None)
    doc["contract"] = dict(doc["contract"], hash=None, path=None)
    doc["metrics"] = dict(doc["metrics"], latency=None)
    doc["results"] = [
        dict(r, result=dict(r["result"], latency_ms=None)) if r["result"] else r
        for r in doc["results"]
    ]
    return doc


def test_without_the_extension_nothing_changes(ours, ref, tmp_path, suite_contract):
    plain = suite_contract.parent / "plain.yaml"
    out = tmp_path / "out" / "report.json"
    a, b = ours("test", plain, "-o", out), ref("test", plain)
    assert a.exit_code == b.exit_code == 0
    assert sorted(p.name for p in out.parent.iterdir()) == ["report.json"]
    mine, theirs = same_text(a.stdout, b.stdout)
    assert mine == theirs


def test_report_stays_decguards_and_suites_get_their_own_metrics(
    ours, ref, tmp_path, suite_contract
):
    out = tmp_path / "out" / "report.json"
    ran = ours("test", suite_contract, "-o", out)
    assert ran.exit_code == 1  # adversarial misses min_auroc (a pipeline requirement)
    # the report file is a DecGuard report: the reference verifies it ...
    assert ref("report", out).exit_code == 0
    # ... and equals the reference's own report for the contract without the extension
    theirs = tmp_path / "ref.json"
    assert ref("test", suite_contract.parent / "plain.yaml", "-o", theirs).exit_code == 0
    mine_doc = json.loads(out.read_text())
    assert decguard_part(mine_doc) == decguard_part(json.loads(theirs.read_text()))
    assert mine_doc["status"] == "pass"  # DecGuard's own verdict is untouched

    side = json.loads((out.parent / "report.pipeline.json").read_text())
    assert side["report"] == "report.json" and side["created_at"] == mine_doc["created_at"]
    assert side["status"] == "fail" and side["exit_code"] == 1
    clear, adversarial = side["evaluations"]
    assert (clear["suite"], adversarial["suite"]) == ("clear", "adversarial")
    assert adversarial["dataset"]["path"].endswith("adversarial.jsonl")

    # each suite's DecGuard numbers are the reference's on that dataset
    ref_adv = json.loads(
        ref("test", suite_contract.parent / "plain.yaml", "-d",
            suite_contract.parent / "adversarial.jsonl", "-f", "json").stdout
    )  # fmt: skip
    golden = adversarial["metrics"]["golden"]
    assert golden["accuracy"] == ref_adv["metrics"]["classification"]["accuracy"] == 2 / 6
    assert golden["ece"] == ref_adv["metrics"]["calibration"]["ece"]
    assert adversarial["decguard"]["status"] == ref_adv["status"] == "pass"

    spam = adversarial["metrics"]["guard"]["labels"]["spam"]
    assert (spam["tp"], spam["fp"], spam["tn"], spam["fn"]) == (1, 2, 1, 2)
    # positives score .06 .06 .97, negatives .97 .92 .06: 3.5 winning pairs of 9
    assert spam["auroc"] == pytest.approx(3.5 / 9, abs=1e-15)
    assert clear["metrics"]["guard"]["labels"]["spam"]["auroc"] == 1.0
    statuses = {c["gate"]: c["status"] for c in adversarial["checks"]}
    assert statuses == {"min_auroc": "fail", "max_fnr": "warn", "partial_runs": "pass"}
    assert [c["status"] for c in clear["checks"]] == ["pass", "pass", "pass"]

    summary = side["summary"]
    assert summary["suites"] == ["clear", "adversarial"] and summary["cases"] == 14
    assert summary["pooled"]["accuracy"] == 10 / 14
    assert summary["mean"]["accuracy"] == (1.0 + 2 / 6) / 2
    assert summary["worst"]["accuracy"] == {"suite": "adversarial", "value": 2 / 6}
    assert summary["worst"]["auroc"]["suite"] == "adversarial"

    groups = {g["value"]: g for g in adversarial["metrics"]["splits"]["difficulty"]}
    assert groups["easy"]["n_cases"] == groups["hard"]["n_cases"] == 3

    # text: DecGuard's layout first (without its final line), then the extension sections,
    # then one final line: the verdict over every gate, after all of them
    decguard_text, _, extension_text = ran.stdout.partition("\nPipeline · is_spam")
    assert decguard_text.rstrip().endswith("error_rate 0 <= 0")
    assert "all gates hold" not in ran.stdout
    assert "Suite adversarial" in extension_text and "By difficulty" in extension_text
    assert re.search(r"FAIL\s+adversarial: min_auroc\s+auroc 0.3889 violates >= 0.8", ran.stdout)
    assert ran.stdout.endswith("\n\nPipeline verdict: FAIL — adversarial.min_auroc\n")


def test_pictures_are_pngs_next_to_the_report(ours, tmp_path, suite_contract):
    out = tmp_path / "out" / "run.json"
    ours("test", suite_contract, "-o", out)
    side = json.loads((out.parent / "run.pipeline.json").read_text())
    for evaluation, stem in zip(side["evaluations"], ("run", "run.adversarial"), strict=True):
        images = evaluation["images"]
        assert images == {
            "reliability": f"{stem}.reliability.png",
            "risk_coverage": f"{stem}.risk_coverage.png",
        }
        for name in images.values():
            path = out.parent / name
            width, height = png_size(path.read_bytes())
            assert (width, height) == (900, 420)  # 9 x 4.2 inches at 100 dpi
            assert path.stat().st_size > 10_000


def test_one_suite(ours, tmp_path, suite_contract):
    out = tmp_path / "adv.json"
    ran = ours("test", suite_contract, "--suite", "adversarial", "-o", out, "-f", "json")
    assert ran.exit_code == 1
    assert json.loads(ran.stdout)["dataset"]["path"].endswith("adversarial.jsonl")
    side = json.loads((tmp_path / "adv.pipeline.json").read_text())
    assert [e["suite"] for e in side["evaluations"]] == ["adversarial"]
    assert side["summary"] is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--suite", "nope"], "unknown suite 'nope'; the contract defines: clear, adversarial"),
        (["--suite", "clear", "-d", "x.jsonl"], "use either --suite or --dataset"),
    ],
)
def test_suite_usage_errors(ours, suite_contract, args, message):
    ran = ours("test", suite_contract, *args)
    assert ran.exit_code == 2 and message in ran.stderr


def test_broken_suite_fails_before_any_model_call(ours, write, loopback):
    server = loopback({"default": {"spam": 0.1, "ham": 0.9}}, labels=("spam", "ham"))
    write("clear.jsonl", cases(CLEAR, "c"))
    write("broken.jsonl", '{"id": "b1", "input": "hi", "expected": "eggs"}\n')
    head = HEAD.replace(BACKEND, f'backend: {{provider: http, url: "{server.url}"}}\n')
    contract = write("broken.yaml", head + "pipeline:\n  suites: {broken: broken.jsonl}\n")
    ran = ours("test", contract, "--no-healthcheck")
    assert ran.exit_code == 2
    assert "broken.jsonl: line 1: expected 'eggs' is not one of the contract labels" in ran.stderr
    assert server.behaviour.requests == []


def test_suite_needs_suites(ours):
    ran = ours("test", ROOT / "data" / "contracts" / "spam" / "decguard.yaml", "--suite", "x")
    assert ran.exit_code == 2 and "--suite needs pipeline.suites" in ran.stderr


@pytest.mark.parametrize(
    ("section", "field"),
    [
        ("guard: {threshold: 1.5}", "pipeline.guard.threshold"),
        ("guard: {treshold: 0.5}", "pipeline.guard.treshold: unknown field"),
        ("guard: {labels: [spam, maybe]}", "pipeline.guard.labels: unknown labels ['maybe']"),
        ("partial_runs: {warn_from: 0.3, partial_above: 0.2}", "pipeline.partial_runs"),
        ("risk_coverage: {thresholds: [0.5, 0.5]}", "pipeline.risk_coverage.thresholds"),
        ("risk_coverage: {escalation_cost: -1}", "pipeline.risk_coverage.escalation_cost"),
        ("suites: {}", "pipeline.suites"),
        ("requirements: {min_auroc: 2}", "pipeline.requirements.min_auroc"),
        ("warnings: {min_accuracy: 0.9}", "pipeline.warnings.min_accuracy: unknown field"),
    ],
)
def test_bad_settings_name_file_and_field(ours, write, suite_contract, section, field):
    path = write("bad.yaml", HEAD + "pipeline:\n  " + section + "\n")
    ran = ours("test", path)
    assert ran.exit_code == 2
    assert ran.stderr.startswith(f"error: {path}: invalid contract:")
    assert field in ran.stderr
    assert "Traceback" not in ran.stderr


@pytest.mark.parametrize(
    ("failures", "extra", "state", "status", "exit_code"),
    [
        (0, "", "normal", "PASS", 0),
        (2, "", "warning", "WARN", 0),
        (5, "", "partial", "WARN", 0),
        (5, ", fail_partial: true", "partial", "FAIL", 1),
    ],
)
def test_partial_runs_over_http(
    ours, loopback, tmp_path, failures, extra, state, status, exit_code
):
    server = loopback({"default": {"yes": 0.3, "no": 0.7}})
    contract = partial_contract(tmp_path, server.url, failures, extra, name="partial.yaml")
    out = tmp_path / "partial.json"
    ran = ours("test", contract, "--no-healthcheck", "-o", out)
    assert ran.exit_code == exit_code
    run = json.loads((tmp_path / "partial.pipeline.json").read_text())["evaluations"][0]
    assert run["metrics"]["run"]["drop_rate"] == failures / 20
    assert run["metrics"]["run"]["state"] == state
    assert run["metrics"]["run"]["errors_by_kind"] == (
        {"backend_error": failures} if failures else {}
    )
    assert f"drop rate {failures / 20:.1%} · {state}" in ran.stdout
    check = next(c for c in run["checks"] if c["gate"] == "partial_runs")
    assert check["status"].upper() == status
    if state == "warning":
        assert ours("test", contract, "--no-healthcheck", "--fail-on-warn").exit_code == 1


def test_fuzz_mode_has_no_guard_sections(ours, write, suite_contract, tmp_path):
    whitespace = "properties:\n  whitespace: {max_tv_distance: 1}\n"
    contract = write("fuzzed.yaml", HEAD + whitespace + EXTENSION)
    ran = ours("fuzz", contract, "-o", tmp_path / "fuzz.json")
    assert ran.exit_code == 0 and "Pipeline · is_spam" not in ran.stdout
    sidecar = tmp_path / "fuzz.pipeline.json"
    assert not sidecar.exists() or "evaluations" not in json.loads(sidecar.read_text())


def test_list_metrics_names_every_gated_metric(ours):
    from decguard_pipeline.core.golden.gates import GOLDEN_GATES
    from decguard_pipeline.core.guard.gates import GUARD_GATES
    from decguard_pipeline.core.usage import COST_GATES

    ran = ours("list", "metrics")
    assert ran.exit_code == 0
    names = {line.split()[0] for line in ran.stdout.splitlines() if line.startswith("  ")}
    gated = {m for m, _ in GOLDEN_GATES.values()} | {m for m, _ in GUARD_GATES.values()}
    gated |= {m for m, _ in COST_GATES.values()}
    gated -= {"abs_confidence_gap"}  # |confidence_gap|, listed under confidence_gap
    assert gated <= names, gated - names
    listed = json.loads(ours("list", "metrics", "-f", "json").stdout)
    assert {m["source"] for m in listed} == {"decguard", "pipeline", "geh"}
    docs = (ROOT / "docs" / "metrics.md").read_text()
    missing = [m["name"] for m in listed if m["name"].split(" (")[0] not in docs]
    assert not missing


RULES = {
    "rules": [
        {"contains": "winner", "probabilities": {"spam": 0.97, "ham": 0.03}},
        {"contains": "free money", "probabilities": {"spam": 0.92, "ham": 0.08}},
        {"contains": "meeting", "probabilities": {"spam": 0.30, "ham": 0.70}},
    ],
    "default": {"spam": 0.06, "ham": 0.94},
}


def without_latency(value):
    """A sidecar document with its latency figures (which differ between two runs) left out."""
    if isinstance(value, dict):
        return {k: without_latency(v) for k, v in value.items() if k != "latency_p95_ms"}
    if isinstance(value, list):
        return [without_latency(v) for v in value]
    return value


def test_a_handed_in_main_report_is_measured_not_decided_again(write, loopback):
    """``run_guarded`` is the one flow of ``test`` and the guard step: given the main
    dataset's report (what the step reads from the warehouse) it decides only the other suites,
    and measures everything exactly as when it decides them all."""
    server = loopback(RULES, labels=("spam", "ham"))
    write("clear.jsonl", cases(CLEAR, "c"))
    write("adversarial.jsonl", cases(ADVERSARIAL, "a"))
    http = f'backend: {{provider: http, url: "{server.url}"}}\n'
    path = write("decguard.yaml", HEAD.replace(BACKEND, http) + EXTENSION)
    loaded = load_contract(path)
    config = guard_config(loaded.contract, source=str(path))
    plan = plan_datasets(loaded, suite=None, dataset=None)
    asked = server.behaviour.requests

    whole = run_guarded(loaded, config, plan, backend=None)
    assert sorted(r["case_id"] for r in asked) == sorted(
        [f"c{i}" for i in range(len(CLEAR))] + [f"a{i}" for i in range(len(ADVERSARIAL))]
    )
    asked.clear()
    handed = run_guarded(loaded, config, plan, backend=None, main=whole.report)
    assert sorted(r["case_id"] for r in asked) == [f"a{i}" for i in range(len(ADVERSARIAL))]
    assert handed.report is whole.report
    assert [run.label for run in handed.runs] == ["clear", "adversarial"]
    assert without_latency(handed.document()) == without_latency(whole.document())
    assert handed.status == whole.status == "fail"  # adversarial misses min_auroc 0.8
