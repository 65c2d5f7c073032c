"""The regression diff in Dagster (issue 4): ``regression_diff`` per target in every contract's
group, the baseline chosen by the contract's rule from what the warehouse knows, the stored
diff equal to ``decguard-pipeline diff`` (and the reference's ``decguard diff``) on report files
of the same two evaluations, one check per regression gate, ``no baseline`` for a contract's
first target, and the statistics tables with ``pipeline.statistics``.

The first test runs the contract's evaluate job (the wiring: a blocked report, the diff made
anyway); the second calls the asset and its check functions directly. The baseline rules are
tested on the step (steps/test_diff.py)."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from decguard_pipeline.core.report.golden import result_records
from decguard_pipeline.core.report.jsonio import write_document
from decguard_pipeline.definitions import build_definitions
from decguard_pipeline.defs.assets.base import asset_key
from decguard_pipeline.defs.assets.diff import NAME, check_result, parts
from decguard_pipeline.defs.assets.verdict import EPHEMERAL
from decguard_pipeline.defs.gate_checks import check_name
from decguard_pipeline.defs.jobs import job_name
from decguard_pipeline.defs.partitions import targets_name
from decguard_pipeline.steps.contracts import discover_contracts
from decguard_pipeline.steps.diff import check_rows, known_targets, regression_gates
from decguard_pipeline.steps.golden import golden_report
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline_tests.conftest import EXAMPLES
from decguard_pipeline_tests.support.evaluations import call_part, evaluate
from decguard_pipeline_tests.support.golden_assets import check_specs

warnings.filterwarnings("ignore", category=dg.PreviewWarning)
QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
STABLE, CANDIDATE = "default@refund-mock-v1", "order_sensitive@refund-mock-v2"
# spec §13.1: regression gates of examples/refund in DecGuard's order (the implicit
# max_error_rate_increase after the configured requirements)
REFUND_GATES = ["max_answer_flip_rate", "max_accuracy_drop", "max_ece_increase",
                "max_mean_tv_distance", "max_error_rate_increase"]  # fmt: skip


class Pipeline:
    """One code location over a contracts folder, an ephemeral instance, a temp warehouse."""

    def __init__(self, contracts: Path, warehouse: Path) -> None:
        self.entries = discover_contracts(str(contracts))
        self.wh = Warehouse(warehouse)
        self.defs = build_definitions(self.entries, warehouse_root=str(self.wh.root))
        self.instance = dg.DagsterInstance.ephemeral()

    def entry(self, key: str):
        return next(e for e in self.entries if e.key == key)

    def run(self, key: str, target: str):
        self.instance.add_dynamic_partitions(targets_name(key), [target])
        job = self.defs.resolve_job_def(job_name(self.entry(key)))
        return job.execute_in_process(
            instance=self.instance, partition_key=target, raise_on_error=False, run_config=QUIET
        )


def materialised(result) -> set[str]:
    return {e.asset_key.path[-1] for e in result.get_asset_materialization_events()}


def diff_metadata(result) -> dict[str, Any]:
    event = next(
        e
        for e in result.get_asset_materialization_events()
        if e.asset_key.path[-1] == "regression_diff"
    )
    return {k: getattr(v, "value", v) for k, v in event.materialization.metadata.items()}


def regression_checks(result) -> dict[str, Any]:
    return {
        e.check_name: e
        for e in result.get_asset_check_evaluations()
        if e.asset_key.path[-1] == "regression_diff"
    }


def comparable(doc: dict[str, Any], *, latency: bool = True) -> dict[str, Any]:
    """A diff document without what differs by construction: when and from which files it was
    made, and (``latency=False``) the measured latencies of two separate runs."""
    doc = json.loads(json.dumps(doc))
    doc.pop("created_at")
    for role in ("baseline", "candidate"):
        doc[role].pop("path")
        doc[role].pop("created_at")
    if not latency:
        for name in ("latency_p50_ms", "latency_p95_ms"):
            doc["metrics"].pop(name)
    return doc


@pytest.fixture
def contracts(tmp_path: Path) -> Path:
    root = tmp_path / "contracts"
    shutil.copytree(EXAMPLES, root)
    return root


def test_refund_candidate_is_diffed_against_the_default_backend(contracts, tmp_path, ours, ref):
    p = Pipeline(contracts, tmp_path / "wh")
    contract = contracts / "refund" / "decguard.yaml"

    # a contract's first target: nothing to compare, every regression check passes
    first = p.run("refund", STABLE)
    assert first.success
    assert {"regression_diff", "report"} <= materialised(first)
    evaluations = regression_checks(first)
    assert list(evaluations) == REFUND_GATES
    assert all(c.passed and c.description.startswith("no baseline: ") for c in evaluations.values())
    meta = diff_metadata(first)
    assert meta["status"] == "NO_BASELINE" and meta["baseline"] == "none"
    row = p.wh.read_latest("diffs", "refund", STABLE).to_pylist()[0]
    assert (row["status"], row["baseline_target"], row["baseline_rule"]) == (
        "no_baseline", None, None
    )  # fmt: skip
    assert (
        row["baseline_reason"]
        == "no earlier version of backend 'default' whose requirements passed"
    )

    # order_sensitive fails its golden max_ece: a verdict, not a crash; everything is recorded
    # and only its approval (as a later version's baseline) is blocked
    second = p.run("refund", CANDIDATE)
    assert second.success
    done = materialised(second)
    assert {"regression_diff", "golden_metrics", "report", "verdict"} <= done
    assert "approved_target" not in done and "approved_target" in materialised(first)

    known = {k["target"]: k["requirements_passed"] for k in known_targets("refund", p.wh)}
    assert known == {STABLE: True, CANDIDATE: False}
    row = p.wh.read_latest("diffs", "refund", CANDIDATE).to_pylist()[0]
    assert row["baseline_target"] == STABLE
    assert row["baseline_rule"] == "default_backend"
    assert row["baseline_reason"] == "newest passing target of the default backend"
    assert row["status"] == "fail" and row["exit_code"] == 1

    # spec §13.1: 11 matched, 0 flipped, mean TV 0.051 (per case 0.1·(1 − p_refund) of the
    # mock's rule), max TV 0.097, mean JS 0.008, ECE .139 -> .175, coverage .727 -> .545
    p_refund = [0.96, 0.90, 0.05, 0.20, 0.96, 0.03, 0.90, 0.05, 0.96, 0.20, 0.20]  # r1..r11
    assert row["matched"] == row["compared"] == 11 and row["answer_flips"] == 0
    assert row["mean_tv_distance"] == pytest.approx(sum(0.1 * (1 - p) for p in p_refund) / 11)
    assert round(row["mean_tv_distance"], 3) == 0.051
    assert round(row["max_tv_distance"], 3) == 0.097
    assert round(row["mean_js_divergence"], 3) == 0.008
    assert (round(row["ece_baseline"], 3), round(row["ece_candidate"], 3)) == (0.139, 0.175)
    assert row["coverage_baseline"] == 8 / 11 and row["coverage_candidate"] == 6 / 11
    assert row["same_dataset"] and row["segment_by"] == ["locale"]
    # the UI: the deltas as numbers (the per-partition plots), the diff's page to open
    [meta] = [
        e.materialization.metadata
        for e in second.get_asset_materialization_events()
        if e.asset_key.to_user_string() == "refund/regression_diff"
    ]
    assert meta["coverage_delta"].value == pytest.approx(6 / 11 - 8 / 11)
    assert meta["mean_tv_distance"].value == pytest.approx(row["mean_tv_distance"])
    page = Path(meta["diff_html_path"].value)
    assert page.is_file() and page.name.endswith(".diff.html")
    assert page.with_suffix(".json") == Path(meta["diff_path"].value)
    report = p.wh.read_latest("reports", "refund", CANDIDATE).to_pylist()[-1]
    assert page != Path(report["path"]).with_suffix(".html")  # the report's page stays its own
    assert "Flip matrix" in page.read_text()

    evaluations = regression_checks(second)
    assert list(evaluations) == REFUND_GATES
    failed = [(n, c.severity) for n, c in evaluations.items() if not c.passed]
    assert failed == [("max_mean_tv_distance", dg.AssetCheckSeverity.ERROR)]
    assert (
        evaluations["max_mean_tv_distance"].description
        == "mean_tv_distance 0.05082 violates <= 0.03"
    )
    assert evaluations["max_ece_increase"].metadata["threshold"].value == 0.05
    specs = check_specs(p.entry("refund"), NAME)
    assert [s.name for s in specs] == REFUND_GATES and not any(s.blocking for s in specs)
    assert all(s.description.startswith("regression requirement") for s in specs)

    segments = p.wh.read_latest("diff_segments", "refund", CANDIDATE).to_pylist()
    assert [(s["segment_key"], s["segment_value"], s["matched"], s["baseline_accuracy"],
             s["candidate_accuracy"], s["is_worst"]) for s in segments] == [
        ("locale", "en", 11, 1.0, 1.0, True)
    ]  # fmt: skip
    assert p.wh.read_latest("diff_changes", "refund", CANDIDATE) is None  # no row changed
    every = p.wh.query(
        "SELECT gate, status FROM latest_all_checks WHERE source = 'regression' "
        "AND contract = 'refund' AND target = ?",
        [CANDIDATE],
    ).to_pylist()
    assert sorted((r["gate"], r["status"]) for r in every) == sorted(
        (g, "fail" if g == "max_mean_tv_distance" else "pass") for g in REFUND_GATES
    )

    meta = diff_metadata(second)
    assert meta["baseline"] == STABLE and meta["baseline_rule"] == "default_backend"
    assert "· diff refund_request (choice) · FAIL" in meta["summary"]
    # r1,r2,r5,r7,r9 refund; r3,r6,r8 reject; r4,r10,r11 review (default rule); nothing flips
    assert "| refund | **5** | 0 | 0 | 5 |" in meta["flip_matrix"]
    assert "| reject | 0 | **3** | 0 | 3 |" in meta["flip_matrix"]
    assert "| review | 0 | 0 | **3** | 3 |" in meta["flip_matrix"]

    # the stored diff file = `decguard-pipeline diff` on the same two evaluations written as
    # report files (latencies included) ...
    stored = json.loads(Path(row["diff_path"]).read_text())
    assert Path(row["diff_path"]).parent == p.wh.files_dir("refund", CANDIDATE)
    entry = p.entry("refund")
    files = {}
    for name, target in (("base", STABLE), ("cand", CANDIDATE)):
        report = golden_report(entry, target, p.wh).report
        files[name] = tmp_path / f"{name}.json"
        write_document(files[name], report.document, stream_key="results",
                       items=result_records(report.results))  # fmt: skip
    ran = ours("diff", files["base"], files["cand"], "-c", contract, "-f", "json")
    assert ran.exit_code == 1, ran.stderr
    assert comparable(stored) == comparable(json.loads(ran.stdout))

    # ... and to the diff of report files our CLI's `test` writes for the two backends (apart
    # from the latencies of those separate runs), and the reference's `decguard diff` on them
    stable, candidate = tmp_path / "stable.json", tmp_path / "candidate.json"
    assert ours("test", contract, "-o", stable, "-f", "json").exit_code == 0
    ran = ours("test", contract, "-b", "order_sensitive", "-o", candidate, "-f", "json")
    assert ran.exit_code == 1  # FAIL on max_ece, as in the pipeline
    cli = json.loads(ours("diff", stable, candidate, "-c", contract, "-f", "json").stdout)
    assert comparable(stored, latency=False) == comparable(cli, latency=False)
    reference = ref("diff", stable, candidate, "-c", contract, "-f", "json")
    assert reference.exit_code == 1, reference.stderr
    theirs = comparable(json.loads(reference.stdout), latency=False)
    ours_doc = comparable(stored, latency=False)
    assert theirs.pop("decguard_version") != ours_doc.pop("decguard_version")
    assert ours_doc == theirs


# -- a second version of the same backend, with statistics --------------------------------

CONTRACT = """\
schema_version: "0.1"
decision: {{name: ticket_route, type: choice, options: [billing, tech, other]}}
backend:
  provider: mock
  model: router
  model_version: {version}
  rules:
    - contains: invoice
      probabilities: {invoice}
    - contains: crash
      probabilities: {{billing: 0.05, tech: 0.9, other: 0.05}}
  default: {{billing: 0.2, tech: 0.2, other: 0.6}}
dataset: cases.jsonl
requirements:
  min_accuracy: 0.5
regression:
  max_accuracy_drop: 0.05
  segment_by: [channel]
  min_segment_size: 4
  warnings:
    max_answer_flip_rate: 0.1
pipeline:
  statistics:
    seed: 7
    bootstrap_resamples: 500
    gate_modes: {{max_accuracy_drop: significant}}
"""
V1_INVOICE = "{billing: 0.9, tech: 0.05, other: 0.05}"
V2_INVOICE = "{billing: 0.3, tech: 0.6, other: 0.1}"  # v2 sends invoices to tech
CASES = [
    ("t0", "The invoice is missing", "billing", "email"),
    ("t1", "Wrong amount on my invoice", "billing", "chat"),
    ("t2", "The app shows a crash on start", "tech", "email"),
    ("t3", "Another crash after the update", "tech", "chat"),
    ("t4", "Where is my parcel?", "other", "email"),
    ("t5", "Hello there", "other", "chat"),
    ("t6", "invoice question and a crash", "billing", "email"),  # the first rule wins
    ("t7", "A general question", "other", "chat"),
]
GATES = ["max_accuracy_drop", "max_error_rate_increase", "max_answer_flip_rate_warning"]


def write_contract(folder: Path, version: str, invoice: str) -> Path:
    path = folder / "decguard.yaml"
    path.write_text(CONTRACT.format(version=version, invoice=invoice))
    return path


def gate_results(entry, target: str, wh: Warehouse) -> dict[str, dg.AssetCheckResult]:
    """What the regression checks report for ``target``, by check name: the rows the diff
    called directly stored (as the multi-asset check loads its run's) through
    ``check_result``, called directly."""
    rows = check_rows(entry, target, wh, EPHEMERAL)
    asset = asset_key(entry, NAME)
    named = [(check_name(gate, level), (gate, level)) for gate, level in regression_gates(
        entry.require())]  # fmt: skip
    return {name: check_result(rows[key], asset, name) for name, key in named}


def test_next_version_is_diffed_against_the_previous_one_with_statistics(tmp_path, ours):
    """The asset and its checks called as plain functions on evaluations the golden steps
    wrote: the default rule takes the backend's previous version, and pipeline.statistics
    judges the accuracy drop by its significance."""
    folder = tmp_path / "contracts" / "tickets"
    folder.mkdir(parents=True)
    (folder / "cases.jsonl").write_text(
        "".join(
            json.dumps({"id": i, "input": text, "expected": label,
                        "metadata": {"channel": channel}}) + "\n"
            for i, text, label, channel in CASES
        )
    )  # fmt: skip
    contract = write_contract(folder, "v1", V1_INVOICE)
    [entry] = discover_contracts(str(tmp_path / "contracts"))
    wh = Warehouse(tmp_path / "wh")
    [regression_diff] = parts(entry)
    levels = {s.name: s.description.split()[1] for s in check_specs(entry, NAME)}
    assert levels == {"max_accuracy_drop": "requirement", "max_error_rate_increase": "requirement",
                      "max_answer_flip_rate_warning": "warning"}  # fmt: skip

    evaluate(entry, "default@v1", wh, "run-1")
    first = call_part(entry, regression_diff, "default@v1", wh)
    assert (first["status"], first["baseline"]) == ("NO_BASELINE", "none")
    assert list(gate_results(entry, "default@v1", wh)) == GATES
    row = wh.read_run("diffs", "tickets", "default@v1", EPHEMERAL).to_pylist()[0]
    assert row["status"] == "no_baseline" and row["baseline_target"] is None
    assert wh.read_run("diff_intervals", "tickets", "default@v1", EPHEMERAL) is None
    v1_report = tmp_path / "v1.json"
    assert ours("test", contract, "-o", v1_report, "-f", "json").exit_code == 0

    # the backend now serves v2 (ContractEntry.require() re-reads the edited file)
    write_contract(folder, "v2", V2_INVOICE)
    evaluate(entry, "default@v2", wh, "run-2")  # golden min_accuracy 5/8 holds
    meta = call_part(entry, regression_diff, "default@v2", wh)
    row = wh.read_run("diffs", "tickets", "default@v2", EPHEMERAL).to_pylist()[0]
    assert (row["baseline_target"], row["baseline_rule"]) == ("default@v1", "previous_version")
    assert row["baseline_reason"] == "previous passing version of backend 'default'"
    assert (row["baseline_model_version"], row["model_version"]) == ("v1", "v2")
    assert row["status"] == "warn" and row["has_statistics"]
    # t0, t1, t6 flip billing -> tech and become wrong: accuracy 1 -> 5/8
    assert (row["answer_flips"], row["newly_wrong"], row["newly_correct"]) == (3, 3, 0)
    assert (row["accuracy_baseline"], row["accuracy_candidate"]) == (1.0, 5 / 8)
    tv = 0.5 * (abs(0.9 - 0.3) + abs(0.05 - 0.6) + abs(0.05 - 0.1))  # per flipped case
    assert row["mean_tv_distance"] == pytest.approx(3 * tv / 8)
    changes = wh.read_run("diff_changes", "tickets", "default@v2", EPHEMERAL).to_pylist()
    assert [(c["case_id"], c["kind"], c["expected"], c["baseline_selected"],
             c["candidate_selected"], c["baseline_confidence"], c["candidate_confidence"])
            for c in changes] == [
        (i, "flip", "billing", "billing", "tech", 0.9, 0.6) for i in ("t0", "t1", "t6")
    ]  # fmt: skip
    assert all(c["tv_distance"] == pytest.approx(tv) for c in changes)
    assert changes[0]["input_preview"] == "The invoice is missing"
    segments = wh.read_run("diff_segments", "tickets", "default@v2", EPHEMERAL).to_pylist()
    assert [
        (s["segment_value"], s["candidate_accuracy"], s["answer_flip_rate"], s["is_worst"])
        for s in segments
    ] == [("chat", 0.75, 0.25, False), ("email", 0.5, 0.5, True)]

    results = gate_results(entry, "default@v2", wh)
    assert list(results) == GATES
    drop = results["max_accuracy_drop"]
    # 0.375 > 0.05, but McNemar with 3 discordant pairs all against the candidate gives
    # p(candidate worse) = 0.5^3 = 0.125 > alpha 0.05: not significant, the gate holds
    assert drop.passed and drop.severity == dg.AssetCheckSeverity.ERROR
    assert drop.description == (
        "accuracy_drop 0.375 violates <= 0.05 (not significant: p=0.125 > alpha 0.05)"
    )
    assert drop.metadata["mode"].value == "significant"
    assert drop.metadata["p_value"].value == 0.125
    assert "significant: p=0.125 (alpha 0.05)" in drop.metadata["statistics"].value
    assert drop.metadata["baseline"].value == "default@v1"
    flips = results["max_answer_flip_rate_warning"]
    assert not flips.passed and flips.severity == dg.AssetCheckSeverity.WARN
    assert flips.description == "answer_flip_rate 0.375 violates <= 0.1"
    assert flips.metadata["mode"].value == "point" and "statistics" not in flips.metadata

    # statistics rows: the whole diff and each segment; exact McNemar by hand
    tests = wh.read_run("diff_tests", "tickets", "default@v2", EPHEMERAL).to_pylist()
    mcnemar = {
        t["segment_value"]: (t["baseline_only"], t["candidate_only"], t["p_value"],
                             t["p_value_candidate_worse"])
        for t in tests if t["test"] == "mcnemar_exact"
    }  # fmt: skip
    # two-sided min(1, 2·P(X <= 0)) and one-sided P(X >= b) for X ~ Binomial(b, 1/2)
    assert mcnemar == {None: (3, 0, 0.25, 0.125), "chat": (1, 0, 1.0, 0.5),
                       "email": (2, 0, 0.5, 0.25)}  # fmt: skip
    intervals = wh.read_run("diff_intervals", "tickets", "default@v2", EPHEMERAL).to_pylist()
    overall = {(r["metric"], r["side"]): r for r in intervals if r["segment_key"] is None}
    delta = overall[("accuracy", "delta")]
    assert delta["value"] == 5 / 8 - 1.0 and delta["method"] == "paired_bootstrap"
    assert delta["low"] <= delta["value"] <= delta["high"] <= 0.0
    assert {r["segment_value"] for r in intervals} == {None, "chat", "email"}
    assert {m for m, side in overall if side == "delta"} == {
        "accuracy", "macro_f1", "ece", "brier", "nll", "error_rate"
    }  # fmt: skip

    assert (meta["status"], meta["baseline"], meta["baseline_rule"]) == (
        "WARN", "default@v1", "previous_version"
    )  # fmt: skip
    # baseline rows × candidate columns: the three invoices moved from billing to tech
    assert "| billing | **0** | 3 | 0 | 3 |" in meta["flip_matrix"]
    assert "| tech | 0 | **2** | 0 | 2 |" in meta["flip_matrix"]
    assert "| total | 0 | 5 | 3 | 8 |" in meta["flip_matrix"]
    assert "McNemar" in meta["statistics"] and "Gate modes" in meta["summary"]
    assert len(meta["changes"].records) == 3

    # the stored diff and sidecar = `decguard-pipeline diff -c` on report files of the same
    # two versions written by our CLI (latencies of separate runs aside)
    v2_report = tmp_path / "v2.json"
    assert ours("test", contract, "-o", v2_report, "-f", "json").exit_code == 0
    out = tmp_path / "out" / "diff.json"
    ran = ours("diff", v1_report, v2_report, "-c", contract, "-o", out, "-f", "json")
    assert ran.exit_code == 0, ran.stderr
    stored = json.loads(Path(row["diff_path"]).read_text())
    assert comparable(stored, latency=False) == comparable(json.loads(ran.stdout), latency=False)
    sidecar = json.loads(Path(row["sidecar_path"]).read_text())
    assert Path(row["sidecar_path"]).name.endswith(".diff.pipeline.json")
    assert sidecar == json.loads((tmp_path / "out" / "diff.pipeline.json").read_text())
