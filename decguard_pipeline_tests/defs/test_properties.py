"""Metamorphic properties in Dagster (issue 5): ``property_results`` and its checks in the
contract's group, warehouse rows equal to the ``properties`` section of ``test --all`` (ours and
decguard 0.1.1) for the same contract and backend, the mode ``all`` report verified by the
reference, originals sent once, blocking requirements, warnings that do not block, and
contracts without properties left alone."""

from __future__ import annotations

import json
import math
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from decguard_pipeline.definitions import build_definitions
from decguard_pipeline.defs.assets.base import asset_key
from decguard_pipeline.defs.assets.properties import (
    NAME,
    check_name,
    check_result,
    parts,
)
from decguard_pipeline.defs.assets.verdict import EPHEMERAL
from decguard_pipeline.defs.partitions import targets_name
from decguard_pipeline.steps.contracts import discover_contracts
from decguard_pipeline.steps.diff import known_targets
from decguard_pipeline.steps.properties import check_rows, gate_list
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline_tests.conftest import EXAMPLES
from decguard_pipeline_tests.support.evaluations import (
    call_part,
    evaluate,
    execute_target,
    refund_over_http,
)
from decguard_pipeline_tests.support.fuzz_scenarios import first_difference, normalised
from decguard_pipeline_tests.support.golden_assets import check_specs

QUIET = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
DEFAULT = "default@refund-mock-v1"
ORDER_SENSITIVE = "order_sensitive@refund-mock-v2"
OPTION_ORDER = "option_order: {samples: 3, max_tv_distance: 0.03, max_flip_rate: 0}"


@pytest.fixture
def refund(tmp_path: Path) -> Path:
    """A private copy of the refund example (tests edit it); returns its contract."""
    root = tmp_path / "contracts"
    shutil.copytree(EXAMPLES / "refund", root / "refund")
    return root / "refund" / "decguard.yaml"


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def materialise(contract: Path, target: str, wh: Warehouse, *, instance=None, selection=None):
    return execute_target(contract, target, wh.root, instance=instance, selection=selection)


def materialised(result) -> set[str]:
    return {e.asset_key.to_user_string() for e in result.get_asset_materialization_events()}


def property_checks_of(result) -> list:
    return [
        e
        for e in result.get_asset_check_evaluations()
        if e.asset_key.to_user_string() == "refund/property_results"
    ]


def rows(wh: Warehouse, table: str, target: str) -> list[dict[str, Any]]:
    return wh.query(
        f"SELECT * FROM latest_{table} WHERE contract = 'refund' AND target = ? ORDER BY position",
        [target],
    ).to_pylist()


def without_latency(result: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if result is None else {**result, "latency_ms": 0.0}


def assert_rows_equal_section(wh: Warehouse, target: str, section: dict, checks: list) -> None:
    """Every stored pair, skip, summary and check against a ``test --all`` section."""
    pairs = rows(wh, "property_pairs", target)
    assert [r["pair_id"] for r in pairs] == [p["id"] for p in section["pairs"]]
    for row, pair in zip(pairs, section["pairs"], strict=True):
        assert (row["property"], row["case_id"], row["sample"]) == (
            pair["property"], pair["case_id"], pair["sample"],
        )  # fmt: skip
        assert json.loads(row["steps_json"]) == pair["steps"]
        assert json.loads(row["provenance_json"]) == pair["provenance"]
        assert json.loads(row["input_json"]) == pair["input"]
        shown = json.loads(row["presentation_json"]) if row["presentation_json"] else None
        assert shown == pair["presentation"]
        if pair["presentation"] is not None:
            assert row["shown_labels"] == [s for s, _ in pair["presentation"]]
        result, comparison, error = pair["result"], pair["comparison"], pair["error"]
        if result is None:
            assert row["probs_after"] is None and row["selected_after"] is None
        else:
            assert row["probs_after"] == list(result["probabilities"].values())
            assert dict(row["probabilities_after"]) == result["probabilities"]
            assert row["confidence_after"] == result["confidence"]
            assert row["result_model"] == result["model"]
        for key in ("tv_distance", "js_divergence", "max_abs_delta", "confidence_delta",
                    "selected_before", "selected_after", "flipped", "rank_changed",
                    "level_delta"):  # fmt: skip
            assert row[key] == (comparison or {}).get(key), (pair["id"], key)
        assert row["violations"] == pair["violations"]
        assert (row["error_kind"], row["error_message"]) == (
            (None, None) if error is None else (error["kind"], error["message"])
        )
        reduced = json.loads(row["reduced_json"]) if row["reduced_json"] else None
        expected = pair["reduced"]
        if reduced is not None and expected is not None:  # a reduction decided again
            reduced["result"] = without_latency(reduced["result"])
            expected = {**expected, "result": without_latency(expected["result"])}
        assert reduced == expected, pair["id"]

    skips = rows(wh, "property_skips", target)
    assert [{k: r[k] for k in ("property", "case_id", "reason")} for r in skips] == section[
        "skipped"
    ]

    summaries = rows(wh, "property_summaries", target)
    assert [r["property"] for r in summaries] == [s["property"] for s in section["summaries"]]
    for row, summary in zip(summaries, section["summaries"], strict=True):
        for key, value in summary.items():
            stored = json.loads(row["errors_by_kind_json"]) if key == "errors_by_kind" else row[key]
            assert stored == value, (summary["property"], key)

    stored_checks = wh.query(
        "SELECT gate, level, metric, comparison, threshold, value, status, message "
        "FROM latest_property_checks WHERE contract = 'refund' AND target = ?",
        [target],
    ).to_pylist()
    assert stored_checks == [c for c in checks if "." in c["gate"]]
    everything = wh.query(
        "SELECT gate FROM latest_all_checks WHERE contract = 'refund' AND target = ? "
        "AND source IN ('golden', 'properties')",
        [target],
    ).to_pylist()
    assert sorted(c["gate"] for c in checks) == sorted(r["gate"] for r in everything)


def cli_run(run, contract: Path, backend: str, out: Path | None = None) -> dict:
    args = ["test", contract, "--all", "-b", backend]
    if out is None:
        return json.loads(run(*args, "-f", "json").stdout)
    run(*args, "-o", out)
    return json.loads(out.read_text())


def report_of(wh: Warehouse, target: str) -> tuple[Path, dict]:
    row = wh.read_latest("reports", "refund", target).to_pylist()[0]
    return Path(row["path"]), json.loads(Path(row["path"]).read_text())


def assert_same(mine: dict, theirs: dict) -> None:
    a, b = normalised(mine), normalised(theirs)
    assert a == b, first_difference(a, b)


def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """The 95% Wilson score interval, written out from its formula."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def test_default_target_equals_test_all_and_the_reference(refund, tmp_path, ours, ref):
    wh = Warehouse(tmp_path / "wh")
    instance = dg.DagsterInstance.ephemeral()
    result = materialise(refund, DEFAULT, wh, instance=instance)
    assert result.success
    assert {"refund/property_results", "refund/report"} <= materialised(result)

    cli_out = tmp_path / "cli" / "report.json"
    cli = cli_run(ours, refund, "default", cli_out)
    theirs = cli_run(ref, refund, "default")
    assert_same({"properties": cli["properties"]}, {"properties": theirs["properties"]})
    assert_rows_equal_section(wh, DEFAULT, cli["properties"], cli["checks"])

    # one check per property gate, in DecGuard's order, at the gate's level
    evaluations = property_checks_of(result)
    gates = [c for c in theirs["checks"] if "." in c["gate"]]
    assert [e.check_name for e in evaluations] == [c["gate"] for c in gates]  # the CLI's names
    assert len(gates) == 13 and all(e.passed for e in evaluations)
    assert {e.severity for e in evaluations} == {dg.AssetCheckSeverity.ERROR}
    assert {e.partition for e in evaluations} == {DEFAULT}
    flips = next(e for e in evaluations if e.check_name == "option_order.max_flip_rate")
    assert flips.metadata["threshold"].value == 0.0 and flips.metadata["value"].value == 0.0
    assert flips.description == "option_order.flip_rate 0 <= 0"

    # the report is the mode `all` report `test --all -o` writes, and the reference verifies it
    path, doc = report_of(wh, DEFAULT)
    assert doc["mode"] == "all" and doc["status"] == "pass"
    assert_same(doc, json.loads(cli_out.read_text()))
    assert_same({k: v for k, v in doc.items() if k not in ("backend", "contract")},
                {k: v for k, v in theirs.items() if k not in ("backend", "contract")})  # fmt: skip
    verified = ref("report", path)
    assert verified.exit_code == 0, verified.stderr
    sidecar = json.loads(path.with_name(path.stem + ".pipeline.json").read_text())
    cli_sidecar = json.loads((cli_out.parent / "report.pipeline.json").read_text())
    assert sidecar["report"] == path.name and sidecar["created_at"] == doc["created_at"]
    assert sidecar["properties"] == cli_sidecar["properties"]
    calls = rows(wh, "property_summaries", DEFAULT)
    assert [r["calls_total"] for r in calls] == [33, 22, 22, 11, 22, 11]  # no violations
    assert [(r["violation_rate_low"], r["flip_rate_low"]) for r in calls] == [(0.0, 0.0)] * 6
    assert calls[0]["violation_rate_high"] == pytest.approx(wilson(0, 33)[1], abs=1e-12)

    # a report built now from stale properties would not be the one `test --all` writes; it
    # says so instead of writing one: after a change of the fuzz settings ...
    report = [dg.AssetKey(["refund", "report"])]
    text = refund.read_text()
    edit(refund, "seed: 42", "seed: 7")
    stale = materialise(refund, DEFAULT, wh, instance=instance, selection=report)
    failure = next(e for e in stale.all_events if e.is_step_failure)
    assert "fuzz settings changed" in str(failure.event_specific_data.error)
    refund.write_text(text)
    # ... and after the golden results were evaluated again (other originals), to a verdict
    golden = [dg.AssetKey(["refund", n]) for n in ("case_results", "golden_metrics", "verdict")]
    assert materialise(refund, DEFAULT, wh, instance=instance, selection=golden).success
    stale = materialise(refund, DEFAULT, wh, instance=instance, selection=report)
    failure = next(e for e in stale.all_events if e.is_step_failure)
    assert "not with the newest one" in str(failure.event_specific_data.error)
    assert len(wh.query("SELECT * FROM reports WHERE contract = 'refund'")) == 1


def test_failing_property_requirement_blocks_the_approval(refund, tmp_path, ours, ref):
    edit(refund, "max_ece: 0.15", "max_ece: 0.2")  # the golden gates hold for order_sensitive
    wh = Warehouse(tmp_path / "wh")
    result = materialise(refund, ORDER_SENSITIVE, wh)
    assert result.success  # a verdict, not a crash
    done = materialised(result)
    assert {"refund/golden_metrics", "refund/property_results", "refund/report"} <= done
    assert "refund/verdict" in done and "refund/approved_target" not in done
    _, doc = report_of(wh, ORDER_SENSITIVE)
    assert (doc["mode"], doc["status"], doc["exit_code"]) == ("all", "fail", 1)
    failed = [e for e in result.get_asset_check_evaluations() if not e.passed]
    assert [(e.check_name, e.severity) for e in failed] == [
        ("option_order.max_violation_rate", dg.AssetCheckSeverity.ERROR),
        ("verdict", dg.AssetCheckSeverity.ERROR),
    ]
    assert failed[0].description == (
        "option_order.violation_rate 0.8182 violates <= 0 (per case: max_tv_distance 0.03)"
    )
    assert failed[0].metadata["value"].value == pytest.approx(27 / 33, rel=1e-11)
    # the golden gates held, but the target is not approved: it cannot be a later baseline
    known = {k["target"]: k["requirements_passed"] for k in known_targets("refund", wh)}
    assert known == {ORDER_SENSITIVE: False}
    [props] = [
        e.materialization.metadata
        for e in result.get_asset_materialization_events()
        if e.asset_key.to_user_string() == "refund/property_results"
    ]
    assert props["option_order.violation_rate"].value == pytest.approx(27 / 33)
    assert isinstance(props["option_order.flip_rate"], dg.FloatMetadataValue)

    cli = cli_run(ours, refund, "order_sensitive")
    theirs = cli_run(ref, refund, "order_sensitive")
    assert cli["status"] == theirs["status"] == "fail"
    assert_same({"properties": cli["properties"]}, {"properties": theirs["properties"]})
    section = cli["properties"]
    assert sum(p["reduced"] is not None for p in section["pairs"]) == 16
    assert_rows_equal_section(wh, ORDER_SENSITIVE, section, cli["checks"])

    summary = rows(wh, "property_summaries", ORDER_SENSITIVE)[0]
    low, high = wilson(27, 33)
    assert summary["violation_rate_low"] == pytest.approx(low, abs=1e-12)
    assert summary["violation_rate_high"] == pytest.approx(high, abs=1e-12)
    # 33 sent, then minimisation: the reductions' stored calls are what it made
    reductions = sum(p["reduced"]["backend_calls"] for p in section["pairs"] if p["reduced"])
    assert (summary["calls_transformed"], summary["calls_minimize"]) == (33, 30)
    assert reductions <= summary["calls_minimize"]


def test_asset_and_checks_called_as_plain_functions(refund, tmp_path):
    """``property_results`` (its part, as the evaluation step runs it) and its check results
    called directly on the golden evaluation the steps wrote: what the UI shows, and a check
    per gate."""
    edit(refund, "max_ece: 0.15", "max_ece: 0.2")
    [entry] = discover_contracts(str(refund))
    wh = Warehouse(tmp_path / "wh")
    evaluate(entry, ORDER_SENSITIVE, wh, "golden-run")
    [property_results] = parts(entry)
    meta = call_part(entry, property_results, ORDER_SENSITIVE, wh)

    # what the direct call stored (no verdict follows it: read by its run id)
    pairs = wh.read_run("property_pairs", "refund", ORDER_SENSITIVE, EPHEMERAL).to_pylist()
    assert [p["position"] for p in pairs] == sorted(p["position"] for p in pairs)
    violating = [p for p in pairs if p["violated"]]
    assert (meta["status"], meta["golden_run_id"]) == ("FAIL", "golden-run")
    assert (meta["pairs"], meta["dagster/row_count"]) == (len(pairs), len(pairs))
    assert meta["violating_pairs"] == len(violating) == 27
    assert (meta["skips"], meta["skip_reasons"]) == (0, {})
    low, high = wilson(27, 33)
    assert (
        f"| option_order | requirement | 33 | 27 ({27 / 33:.1%}) | [{low:.1%}, {high:.1%}] |"
        in meta["summary"]
    )
    assert (
        "- FAIL option_order.max_violation_rate: option_order.violation_rate 0.8182"
        in (meta["summary"])
    )
    # the worst pairs first: violating ones by TV distance, largest first (section order
    # among equals), as they were sent
    worst = meta["worst_pairs"].records
    assert len(worst) == 20 and all(r.data["violations"] == "tv_distance 0.1 > 0.03" for r in worst)
    by_tv = sorted(violating, key=lambda p: -p["tv_distance"])
    assert [r.data["id"] for r in worst] == [p["pair_id"] for p in by_tv][:20]
    first = by_tv[0]
    shown = ", ".join(first["shown_labels"])
    assert worst[0].data["sent"] == f"options [{shown}] · {json.loads(first['input_json'])}"

    stored = check_rows(entry, ORDER_SENSITIVE, wh, EPHEMERAL)
    asset = asset_key(entry, NAME)
    results = {
        check_name(gate): check_result(stored[gate], asset, check_name(gate))
        for gate, _ in gate_list(entry.require())
    }
    assert list(results) == [s.name for s in check_specs(entry, NAME)]
    failed = [(name, r.severity) for name, r in results.items() if not r.passed]
    assert failed == [("option_order.max_violation_rate", dg.AssetCheckSeverity.ERROR)]
    violation = results["option_order.max_violation_rate"]
    assert violation.metadata["property"].value == "option_order"
    assert violation.metadata["value"].value == pytest.approx(27 / 33, rel=1e-11)


def test_warning_property_does_not_block(refund, tmp_path, ours, ref):
    edit(refund, "max_ece: 0.15", "max_ece: 0.2")
    edit(refund, OPTION_ORDER, OPTION_ORDER[:-1] + ", level: warning}")
    wh = Warehouse(tmp_path / "wh")
    result = materialise(refund, ORDER_SENSITIVE, wh)
    assert result.success
    assert {"refund/report", "refund/approved_target"} <= materialised(result)  # not blocked
    warned = [e for e in result.get_asset_check_evaluations() if not e.passed]
    assert [(e.check_name, e.severity) for e in warned] == [
        ("option_order.max_violation_rate", dg.AssetCheckSeverity.WARN),
        ("verdict", dg.AssetCheckSeverity.WARN),
    ]
    path, doc = report_of(wh, ORDER_SENSITIVE)
    assert (doc["mode"], doc["status"], doc["exit_code"]) == ("all", "warn", 0)
    cli_out = tmp_path / "cli" / "report.json"
    assert_same(doc, cli_run(ours, refund, "order_sensitive", cli_out))
    verified = ref("report", path)
    assert verified.exit_code == 0, verified.stderr
    theirs = cli_run(ref, refund, "order_sensitive")
    assert_same({"properties": doc["properties"], "checks": doc["checks"]},
                {"properties": theirs["properties"], "checks": theirs["checks"]})  # fmt: skip


def test_originals_are_sent_once_over_http(tmp_path, loopback, ref):
    """A real decguard.http/0.1 model: the golden run and the property run together send each
    original case exactly once; every other request is a pair (counted per property)."""
    server = loopback({"seed": 1, "position_bias": 0.2}, labels=("refund", "reject", "review"))
    folder = tmp_path / "contracts" / "loop"
    contract = refund_over_http(
        folder,
        server,
        "evaluation: {max_concurrency: 8}\n"
        "fuzz: {seed: 42, max_minimize_calls: 4}\n"
        "properties:\n"
        "  option_order: {samples: 3, max_tv_distance: 0.03, level: warning}\n"
        "  whitespace: {max_tv_distance: 0.0, level: warning}\n",
    )
    wh = Warehouse(tmp_path / "wh")
    target = "default@loop-v1"
    entries = discover_contracts(str(contract))
    defs = build_definitions(entries, warehouse_root=str(wh.root))
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(targets_name("loop"), [target])
    result = defs.resolve_job_def("evaluate_loop").execute_in_process(
        instance=instance, partition_key=target, raise_on_error=False, run_config=QUIET
    )
    failures = [str(e.event_specific_data.error) for e in result.all_events if e.is_step_failure]
    assert result.success, failures
    assert "loop/property_results" in materialised(result)

    ids = [json.loads(line)["id"] for line in (folder / "cases.jsonl").read_text().splitlines()]
    sent = Counter(r["case_id"] for r in server.behaviour.requests)
    assert {i: sent[i] for i in ids} == dict.fromkeys(ids, 1)
    pairs = Counter(c.split("/")[0] for c in sent.elements() if "/" in c)
    assert sum(sent.values()) == len(ids) + sum(pairs.values())
    summaries = wh.query(
        "SELECT property, calls_transformed, calls_minimize, calls_total "
        "FROM latest_property_summaries ORDER BY position"
    ).to_pylist()
    assert {s["property"]: s["calls_total"] for s in summaries} == dict(pairs)
    runs = wh.query("SELECT backend_calls, health_status, n_cases FROM latest_property_runs")
    assert runs.to_pylist() == [
        {"backend_calls": sum(pairs.values()), "health_status": "ok", "n_cases": len(ids)}
    ]
    assert any(s["calls_minimize"] for s in summaries)  # the bias makes option_order fail
    path = Path(wh.read_latest("reports", "loop", target).to_pylist()[0]["path"])
    assert ref("report", path).exit_code == 0


def test_contract_without_properties_keeps_the_golden_report(refund, tmp_path):
    text = refund.read_text()
    refund.write_text(re.sub(r"\nproperties:\n(  .*\n)+", "\n", text))
    entries = discover_contracts(str(refund))
    assert not entries[0].require().contract.properties.enabled()
    defs = build_definitions(entries, warehouse_root=str(tmp_path / "wh"))
    keys = {k.to_user_string() for k in defs.resolve_asset_graph().get_all_asset_keys()}
    assert "refund/case_results" in keys and "refund/property_results" not in keys
    wh = Warehouse(tmp_path / "wh")
    result = materialise(refund, DEFAULT, wh)
    assert result.success and not property_checks_of(result)
    path, doc = report_of(wh, DEFAULT)
    assert (doc["mode"], doc["properties"]) == ("test", None)
    assert not path.with_name(path.stem + ".pipeline.json").exists()
    assert wh.read_latest("property_runs", "refund", DEFAULT) is None


def test_definitions_have_one_check_per_property_gate(refund):
    edit(refund, OPTION_ORDER, OPTION_ORDER[:-1] + ", level: warning}")
    entries = discover_contracts(str(refund))
    defs = build_definitions(entries)
    dg.Definitions.validate_loadable(defs)
    graph = defs.resolve_asset_graph()
    asset = dg.AssetKey(["refund", "property_results"])
    assert graph.get(asset).parent_keys == {dg.AssetKey(["refund", "case_results"])}
    assert asset in graph.get(dg.AssetKey(["refund", "report"])).parent_keys
    specs = [s for a in defs.assets for s in a.check_specs if s.asset_key == asset]
    assert [s.name for s in specs][:4] == [
        "option_order.max_error_rate",  # always a requirement
        "option_order.max_violation_rate",
        "option_order.max_flip_rate",
        "label_format.max_error_rate",
    ]
    assert len(specs) == 13 and [s.name for s in specs if s.description.startswith("warning")] == [
        "option_order.max_violation_rate", "option_order.max_flip_rate",
    ]  # fmt: skip
    # they record and never stop a run; a failing requirement blocks the approval, which
    # comes after them
    assert not any(s.blocking for s in specs)
    assert asset in graph.get(dg.AssetKey(["refund", "verdict"])).parent_keys
