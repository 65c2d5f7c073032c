"""The ``pipeline.statistics`` extension of ``diff``: DecGuard's document untouched in point
mode, the sidecar, hand-computed McNemar verdicts for the ``significant`` mode, the
``interval`` mode, segment and implicit gates, pairing, determinism and contract errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats as sp

from decguard_pipeline.core.contract import load_contract
from decguard_pipeline.core.diff import diff_reports, sidecar_path
from decguard_pipeline.core.report.golden import build_report, dataset_info, result_records
from decguard_pipeline.core.report.jsonio import write_document
from decguard_pipeline.core.report.verify import load_report
from decguard_pipeline_tests.support.diff_cases import (
    ALL_GATES,
    contract_text,
    gates_yaml,
    generated_pair,
    normal_json,
    normal_text,
)
from decguard_pipeline_tests.support.golden_results import make_results

AB = ("a", "b")
RIGHT, WRONG = [0.9, 0.1], [0.3, 0.7]  # for expected label "a"


def ab_results(probs: list[list[float]], expected: list[int | None], **kw: Any) -> Any:
    return make_results(probs, expected, labels=AB, kind="noul", name="gen_noul", **kw)


def ab_contract(tmp: Path, body: str, name: str = "c.yaml") -> Path:
    path = tmp / name
    text = contract_text("noul", extra=body).replace("[spam, ham]", "[a, b]")
    path.write_text(text.replace('"spam"', '"a"').replace('"ham"', '"b"'), encoding="utf-8")
    return path


def write_results(path: Path, contract: Path, results: Any, dataset: str = "0") -> Path:
    report = build_report(
        load_contract(contract),
        dataset_info("cases.jsonl", "sha256:" + dataset * 64, len(results),
                     sum(e is not None for e in results.expected)),
        {"name": results.backend, "provider": "mock", "model": None, "model_version": None,
         "details": {}},
        results,
    )  # fmt: skip
    write_document(path, report.document, stream_key="results", items=result_records(results))
    return path


def accuracy_pair(
    tmp: Path,
    *,
    only_base: int,
    only_cand: int = 0,
    n: int = 100,
    cand_errors: int = 0,
    groups: list[str] | None = None,
) -> tuple[Path, Path]:
    """Baseline right on the first 80 of ``n`` cases (all expected "a"); the candidate
    differs on ``only_base`` of those (now wrong) and ``only_cand`` of the others (now right);
    its last ``cand_errors`` cases error."""
    contract = ab_contract(tmp, "", "report.yaml")
    base = [RIGHT if i < 80 else WRONG for i in range(n)]
    cand = list(base)
    for i in range(only_base):
        cand[i] = WRONG
    for i in range(only_cand):
        cand[80 + i] = RIGHT
    errored = np.zeros(n, dtype=bool)
    if cand_errors:
        errored[-cand_errors:] = True
    meta = [{"grp": g} for g in groups] if groups else None
    b = make_results(base, [0] * n, labels=AB, metadata=meta, kind="noul", name="gen_noul")
    c = make_results(
        cand, [0] * n, labels=AB, metadata=meta, errored=errored, kind="noul", name="gen_noul"
    )
    return (
        write_results(tmp / "base.json", contract, b),
        write_results(tmp / "cand.json", contract, c),
    )


def run_json(ours, *args: Any) -> tuple[int, dict[str, Any]]:
    ran = ours("diff", *args, "-f", "json")
    assert ran.exit_code in (0, 1), ran.stderr
    return ran.exit_code, json.loads(ran.stdout)


def check_of(doc: dict[str, Any], gate: str) -> dict[str, Any]:
    return next(c for c in doc["checks"] if c["gate"] == gate)


# --- DecGuard's document stays DecGuard's ---------------------------------------------------------


def test_point_mode_leaves_the_decguard_diff_unchanged(tmp_path, ours, ref):
    base, cand = generated_pair(tmp_path, 31, "choice", p_error=(0.1, 0.2))
    body = "regression:\n" + gates_yaml(ALL_GATES) + "  segment_by: [locale]\n"
    plain = tmp_path / "plain.yaml"
    plain.write_text(contract_text("choice", extra=body), encoding="utf-8")
    extended = tmp_path / "extended.yaml"
    extended.write_text(
        contract_text("choice", extra=body + "pipeline:\n  statistics: {seed: 4}\n"),
        encoding="utf-8",
    )
    a = ours("diff", base, cand, "-c", extended, "-o", tmp_path / "out" / "d.json")
    b = ref("diff", base, cand, "-c", plain)
    assert a.exit_code == b.exit_code == 1
    decguard_part, _, extra = a.stdout.partition("\n\nStatistics   ")
    assert normal_text(decguard_part + "\n") == normal_text(b.stdout)
    assert extra.startswith("95% CI · alpha 0.05 · 2000 bootstrap resamples · seed 4")
    sidecar = tmp_path / "out" / "d.pipeline.json"
    assert a.stderr.splitlines() == [
        f"diff written to {tmp_path / 'out' / 'd.json'}",
        f"statistics written to {sidecar}",
    ]
    ours_doc = normal_json((tmp_path / "out" / "d.json").read_text(encoding="utf-8"))
    ref_doc = normal_json(ref("diff", base, cand, "-c", plain, "-f", "json").stdout)
    assert ours_doc == ref_doc
    side = json.loads(sidecar.read_text(encoding="utf-8"))
    assert [g["mode"] for g in side["gates"]] == ["point"] * len(ref_doc["checks"])
    assert [g["status"] for g in side["gates"]] == [c["status"] for c in ref_doc["checks"]]


def test_sidecar_path():
    assert sidecar_path("out/d.json") == Path("out/d.pipeline.json")
    assert sidecar_path("diff") == Path("diff.pipeline.json")


# --- the significant mode, hand-computed ----------------------------------------------------------


@pytest.mark.parametrize(
    ("only_base", "status", "p"),
    [(3, "pass", 1 / 8), (6, "fail", 1 / 64)],  # one-sided exact: P(X >= b | b, 1/2) = 2^-b
)
def test_significant_accuracy_gate(tmp_path, ours, only_base, status, p):
    base, cand = accuracy_pair(tmp_path, only_base=only_base)
    body = "regression:\n  max_accuracy_drop: 0.02\npipeline:\n  statistics:\n"
    contract = ab_contract(tmp_path, body + "    gate_mode: significant\n")
    code, doc = run_json(ours, base, cand, "-c", contract)
    check = check_of(doc, "max_accuracy_drop")
    drop = 0.8 - (80 - only_base) / 100
    assert check["value"] == drop and check["status"] == status
    verdict = "significant: p=" if status == "fail" else "not significant: p="
    relation = "<=" if status == "fail" else ">"
    assert check["message"] == (
        f"accuracy_drop {drop:.4g} violates <= 0.02 ({verdict}{p:.4g} {relation} alpha 0.05)"
    )
    assert code == (1 if status == "fail" else 0)
    point = ab_contract(tmp_path, "regression:\n  max_accuracy_drop: 0.02\n", "p.yaml")
    assert run_json(ours, base, cand, "-c", point)[0] == 1  # DecGuard's verdict


def test_sidecar_mcnemar_and_records(tmp_path, ours):
    base, cand = accuracy_pair(tmp_path, only_base=6, only_cand=2)
    body = "regression:\n  max_accuracy_drop: 0.0\npipeline:\n  statistics:\n"
    contract = ab_contract(tmp_path, body + "    gate_modes: {max_accuracy_drop: significant}\n")
    ran = ours("diff", base, cand, "-c", contract, "-o", tmp_path / "d.json")
    assert ran.exit_code == 0  # drop 0.04 but p = P(X >= 6 | 8) = 37/256 > 0.05
    side = json.loads((tmp_path / "d.pipeline.json").read_text(encoding="utf-8"))
    mc = side["overall"]["mcnemar"]
    assert mc == {
        "n_pairs": 100,
        "baseline_only_correct": 6,
        "candidate_only_correct": 2,
        "p_value": 2 * 37 / 256,
        "p_value_candidate_worse": 37 / 256,
    }
    record = side["gates"][0]
    assert (record["gate"], record["mode"], record["status"]) == (
        "max_accuracy_drop",
        "significant",
        "pass",
    )
    assert record["p_value"] == 37 / 256 and record["test"] == "mcnemar_exact"
    assert "Statistics" in ran.stdout and "McNemar" in ran.stdout


# --- the interval mode ----------------------------------------------------------------------------


@pytest.mark.parametrize(("limit", "status"), [(0.05, "fail"), (0.2, "pass")])
def test_interval_accuracy_gate(tmp_path, ours, limit, status):
    # drop 0.03 holds against both limits; the interval's upper end decides
    base, cand = accuracy_pair(tmp_path, only_base=3)
    body = f"regression:\n  max_accuracy_drop: {limit}\npipeline:\n  statistics:\n"
    contract = ab_contract(tmp_path, body + "    gate_mode: interval\n    seed: 1\n")
    code, doc = run_json(ours, base, cand, "-c", contract)
    check = check_of(doc, "max_accuracy_drop")
    assert (code, check["status"]) == (1 if status == "fail" else 0, status)
    assert check["message"].startswith(f"accuracy_drop 0.03 <= {limit:g} (95% CI [")
    where = "reaches past the limit" if status == "fail" else "within the limit"
    assert check["message"].endswith(f"] {where})")
    side = diff_reports(
        load_report(base), load_report(cand), contract=load_contract(contract)
    ).statistics
    low, high = side["gates"][0]["low"], side["gates"][0]["high"]
    # resampled drops are (discordant cases drawn)/100 with 3 discordant cases of 100
    assert 0.0 <= low <= 0.03 <= high and (high > limit) == (status == "fail")


# --- implicit, error and segment gates ------------------------------------------------------------


def test_implicit_error_gate_stays_a_point_gate(tmp_path, ours):
    base, cand = accuracy_pair(tmp_path, only_base=0, cand_errors=1)
    stats = "pipeline:\n  statistics:\n    gate_mode: significant\n"
    implicit = ab_contract(tmp_path, stats, "i.yaml")
    code, doc = run_json(ours, base, cand, "-c", implicit)
    check = check_of(doc, "max_error_rate_increase")
    assert (code, check["status"], check["message"]) == (
        1, "fail", "error_rate_increase 0.01 violates <= 0",
    )  # fmt: skip
    explicit = ab_contract(
        tmp_path, "regression:\n  max_error_rate_increase: 0\n" + stats, "e.yaml"
    )
    code, doc = run_json(ours, base, cand, "-c", explicit)
    # one new error, no recovery: P(X >= 1 | 1, 1/2) = 0.5
    assert (code, check_of(doc, "max_error_rate_increase")["message"]) == (
        0, "error_rate_increase 0.01 violates <= 0 (not significant: p=0.5 > alpha 0.05)",
    )  # fmt: skip


@pytest.mark.parametrize(("only_base", "status"), [(3, "pass"), (6, "fail")])
def test_segment_gate_judged_per_segment(tmp_path, ours, only_base, status):
    groups = ["x"] * 50 + ["y"] * 50
    base, cand = accuracy_pair(tmp_path, only_base=only_base, groups=groups)
    body = (
        "regression:\n  max_error_rate_increase: 1\n  warnings:\n"
        "    max_segment_accuracy_drop: 0.05\n  segment_by: [grp]\n"
        "pipeline:\n  statistics:\n    gate_mode: significant\n"
    )
    code, doc = run_json(ours, base, cand, "-c", ab_contract(tmp_path, body), "--fail-on-warn")
    check = check_of(doc, "max_segment_accuracy_drop")
    drop = 1.0 - (50 - only_base) / 50
    p = 2.0**-only_base
    verdict = (
        f"significant: p={p:.4g} <= alpha 0.05"
        if status == "fail"
        else f"not significant: p={p:.4g} > alpha 0.05"
    )
    assert check["message"] == (
        f"segment_accuracy_drop {drop:.4g} violates <= 0.05 (worst segment grp=x; grp=x: {verdict})"
    )
    assert check["status"] == ("warn" if status == "fail" else "pass")
    assert code == (1 if status == "fail" else 0)


# --- pairing, determinism, other gates ------------------------------------------------------------


def test_identical_runs_have_zero_width_paired_intervals(tmp_path):
    base, _ = generated_pair(tmp_path, 33, "choice", n=80)
    contract = tmp_path / "c.yaml"
    contract.write_text(
        contract_text("choice", extra="pipeline:\n  statistics: {bootstrap_resamples: 300}\n"),
        encoding="utf-8",
    )
    report = load_report(base)
    side = diff_reports(report, report, contract=load_contract(contract)).statistics
    for name, entry in side["overall"]["metrics"].items():
        assert (entry["delta"]["value"], entry["delta"]["low"], entry["delta"]["high"]) == (
            0.0, 0.0, 0.0,
        ), name  # fmt: skip
        # an unpaired bootstrap would not collapse; the per-run intervals stay wide
        if name not in ("accuracy", "error_rate"):
            assert entry["baseline"]["low"] < entry["baseline"]["high"]
    assert side["overall"]["mcnemar"]["p_value"] == 1.0


def test_sidecar_is_deterministic_for_a_seed(tmp_path, ours):
    base, cand = generated_pair(tmp_path, 34, "score", p_error=(0.1, 0.1))
    texts = []
    for seed in (5, 5, 6):
        body = f"regression:\n  segment_by: [locale]\npipeline:\n  statistics: {{seed: {seed}}}\n"
        contract = tmp_path / "c.yaml"
        contract.write_text(contract_text("score", extra=body), encoding="utf-8")
        assert ours("diff", base, cand, "-c", contract, "-o", tmp_path / "d.json").exit_code in (
            0,
            1,
        )
        texts.append((tmp_path / "d.pipeline.json").read_text(encoding="utf-8"))
    assert texts[0] == texts[1] != texts[2]


def test_shift_gates_test_against_the_limit(tmp_path):
    base, cand = generated_pair(tmp_path, 35, "choice", n=200)
    gates = {"max_answer_flip_rate": 0.05, "max_mean_tv_distance": 0.05}
    body = (
        "regression:\n"
        + gates_yaml(gates)
        + "pipeline:\n  statistics:\n    gate_mode: significant\n"
    )
    contract = tmp_path / "c.yaml"
    contract.write_text(contract_text("choice", extra=body), encoding="utf-8")
    b_doc = json.loads(base.read_text(encoding="utf-8"))
    c_doc = json.loads(cand.read_text(encoding="utf-8"))
    # count flips independently, from the stored records
    before = {r["case_id"]: r["result"] for r in b_doc["results"]}
    compared = flips = 0
    for r in c_doc["results"]:
        old = before.get(r["case_id"])
        if old is not None and r["result"] is not None:
            compared += 1
            flips += old["selected"] != r["result"]["selected"]
    diff = diff_reports(load_report(base), load_report(cand), contract=load_contract(contract))
    flip_gate, tv_gate = diff.statistics["gates"][:2]
    assert flip_gate["p_value"] == pytest.approx(sp.binom.sf(flips - 1, compared, 0.05), rel=1e-9)
    assert flip_gate["test"] == "binomial_exact" and tv_gate["test"] == "bootstrap"
    ci = sp.binomtest(flips, compared).proportion_ci(method="wilson")
    assert (flip_gate["low"], flip_gate["high"]) == pytest.approx((ci.low, ci.high), abs=1e-12)
    assert diff.document["checks"][0]["status"] == (
        "fail" if flip_gate["p_value"] <= 0.05 else "pass"
    )


def test_flip_matrix(tmp_path):
    contract = ab_contract(tmp_path, "", "report.yaml")
    b = ab_results([RIGHT, RIGHT, WRONG, WRONG, RIGHT], [0, 0, 0, None, 0])
    errored = np.array([False, False, False, False, True])
    c = ab_results([RIGHT, WRONG, WRONG, RIGHT, RIGHT], [0, 0, 0, None, 0], errored=errored)
    base = load_report(write_results(tmp_path / "b.json", contract, b))
    cand = load_report(write_results(tmp_path / "c.json", contract, c))
    # compared: a->a, a->b, b->b, b->a (the fifth case errored in the candidate)
    assert diff_reports(base, cand).flip_matrix() == [[1, 1], [1, 1]]


# --- contract errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ("gate_modes: {max_latency_p95_increase_ms: interval}",
         "pipeline.statistics.gate_modes: max_latency_p95_increase_ms can only use mode 'point'"),
        ("gate_modes: {max_accuracy_gain: point}",
         "pipeline.statistics.gate_modes.max_accuracy_gain"),
        ("gate_mode: strict", "pipeline.statistics.gate_mode: Input should be 'point'"),
        ("alpha: 0.7", "pipeline.statistics.alpha: Input should be less than 0.5"),
        ("bootstrap_resamples: 10", "pipeline.statistics.bootstrap_resamples"),
        ("seeds: 1", "pipeline.statistics.seeds: unknown field"),
    ],
)  # fmt: skip
def test_invalid_statistics_section(tmp_path, ours, section, message):
    base, cand = accuracy_pair(tmp_path, only_base=1)
    contract = ab_contract(tmp_path, f"pipeline:\n  statistics: {{{section}}}\n")
    ran = ours("diff", base, cand, "-c", contract)
    assert ran.exit_code == 2 and ran.stdout == ""
    assert ran.stderr.startswith(f"error: {contract}: invalid contract:\n")
    assert message in ran.stderr


@pytest.mark.parametrize(
    ("overlap", "p_error", "p_unlabeled", "mode"),
    [
        (0.0, (0.1, 0.1), 0.2, "significant"),  # nothing matched
        (1.0, (0.0, 1.0), 0.2, "interval"),  # the candidate errored on every case
        (1.0, (0.1, 0.1), 1.0, "significant"),  # nothing labeled
        (0.5, (0.2, 0.0), 0.3, "interval"),
    ],
)
def test_degenerate_pairs_keep_decguards_verdict_shape(
    tmp_path, ours, ref, overlap, p_error, p_unlabeled, mode
):
    base, cand = generated_pair(
        tmp_path, 36, "choice", n=30, overlap=overlap, p_error=p_error, p_unlabeled=p_unlabeled
    )
    body = (
        "regression:\n" + gates_yaml(ALL_GATES) + "  segment_by: [locale]\n  min_segment_size: 1\n"
    )
    plain = tmp_path / "plain.yaml"
    plain.write_text(contract_text("choice", extra=body), encoding="utf-8")
    stats = f"pipeline:\n  statistics: {{gate_mode: {mode}, bootstrap_resamples: 200}}\n"
    extended = tmp_path / "extended.yaml"
    extended.write_text(contract_text("choice", extra=body + stats), encoding="utf-8")
    a = ours("diff", base, cand, "-c", extended, "-f", "json", "-o", tmp_path / "d.json")
    b = ref("diff", base, cand, "-c", plain, "-f", "json")
    assert a.exit_code in (0, 1) and b.exit_code in (0, 1), a.stderr
    mine, theirs = normal_json(a.stdout), normal_json(b.stdout)
    # everything but the checks is DecGuard's; checks keep gate, level, metric, value
    for key in theirs:
        if key not in ("checks", "status", "exit_code"):
            assert mine[key] == theirs[key], key
    keep = ("gate", "level", "metric", "comparison", "threshold", "value")
    assert [{k: c[k] for k in keep} for c in mine["checks"]] == [
        {k: c[k] for k in keep} for c in theirs["checks"]
    ]
    side = json.loads((tmp_path / "d.pipeline.json").read_text(encoding="utf-8"))
    assert len(side["segments"]) == len(theirs["segments"])
    assert [g["gate"] for g in side["gates"]] == [c["gate"] for c in theirs["checks"]]
