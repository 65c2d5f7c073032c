"""Seeded simulation: when two models are equally good, the ``significant`` gate mode raises a
false alarm in about alpha of the diffs, while DecGuard's point gate (limit 0) alarms on about
every other diff. A clearly worse candidate is still caught."""

from __future__ import annotations

import numpy as np
import pytest

from decguard_pipeline.core.contract import load_contract
from decguard_pipeline.core.diff import diff_reports
from decguard_pipeline.core.report.golden import build_report, dataset_info
from decguard_pipeline_tests.support.diff_cases import contract_text
from decguard_pipeline_tests.support.golden_results import make_results

N_PAIRS = 400
N_CASES = 300
ALPHA = 0.05
GATES = ("max_accuracy_drop", "max_macro_f1_drop", "max_brier_increase", "max_nll_increase")
LABELS = ("refund", "reject", "review")


def _model_run(rng: np.random.Generator, truth: np.ndarray, skill: float, contract) -> object:
    """One model's answers: softmax of (skill on the true label + standard normal noise)."""
    logits = rng.normal(size=(len(truth), len(LABELS)))
    logits[np.arange(len(truth)), truth] += skill
    probs = np.exp(logits)
    probs /= probs.sum(axis=1, keepdims=True)
    results = make_results(probs, truth.tolist(), labels=LABELS, name="gen_choice")
    info = dataset_info("cases.jsonl", "sha256:" + "0" * 64, len(truth), len(truth))
    backend = {"name": "default", "provider": "mock", "model": None, "model_version": None,
               "details": {}}  # fmt: skip
    return build_report(contract, info, backend, results, created_at="2026-01-01T00:00:00+00:00")


def _alarm_rates(tmp_path, candidate_skill: float, n_pairs: int) -> tuple[dict, dict]:
    gates = "".join(f"  {gate}: 0\n" for gate in GATES)
    stats = f"pipeline:\n  statistics:\n    gate_mode: significant\n    alpha: {ALPHA}\n"
    stats += "    bootstrap_resamples: 200\n"
    point = tmp_path / "point.yaml"
    point.write_text(contract_text("choice", extra="regression:\n" + gates), encoding="utf-8")
    significant = tmp_path / "significant.yaml"
    significant.write_text(
        contract_text("choice", extra="regression:\n" + gates + stats), encoding="utf-8"
    )
    point_c, sig_c = load_contract(point), load_contract(significant)
    rng = np.random.default_rng(2026)
    point_alarms = dict.fromkeys(GATES, 0)
    sig_alarms = dict.fromkeys(GATES, 0)
    for _ in range(n_pairs):
        truth = rng.integers(0, len(LABELS), size=N_CASES)
        base = _model_run(rng, truth, 1.5, point_c)
        cand = _model_run(rng, truth, candidate_skill, point_c)
        for contract, alarms in ((point_c, point_alarms), (sig_c, sig_alarms)):
            checks = diff_reports(base, cand, contract=contract).document["checks"]
            for check in checks:
                if check["gate"] in alarms and check["status"] == "fail":
                    alarms[check["gate"]] += 1
    return (
        {g: n / n_pairs for g, n in point_alarms.items()},
        {g: n / n_pairs for g, n in sig_alarms.items()},
    )


@pytest.mark.slow
def test_false_alarm_rate_of_the_significance_gate(tmp_path):
    point, significant = _alarm_rates(tmp_path, candidate_skill=1.5, n_pairs=N_PAIRS)
    for gate in GATES:
        assert ALPHA - 0.03 <= significant[gate] <= ALPHA + 0.03, (gate, significant)
        assert point[gate] >= 0.4, (gate, point)  # ~ every other diff: pure noise


def test_a_clearly_worse_candidate_is_caught(tmp_path):
    point, significant = _alarm_rates(tmp_path, candidate_skill=0.9, n_pairs=25)
    for gate in GATES:
        assert point[gate] == 1.0 and significant[gate] >= 0.9, (gate, significant)
