"""Golden metrics and gates: the spec's pinned vectors (§5, §6), scikit-learn's definitions,
and decguard==0.1.1's own ``compute_metrics``/``make_check`` on random case results."""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import pytest

from decguard_pipeline.core.contract import DecisionSpec, Evaluation, Gates
from decguard_pipeline.core.decision import select_many
from decguard_pipeline.core.gates import make_check, overall_status
from decguard_pipeline.core.golden.gates import golden_checks
from decguard_pipeline.core.golden.metrics import (
    brier,
    expected_calibration_error,
    gate_values,
    golden_metrics,
    macro_f1,
    nll,
    ordinal_mae,
    percentile,
    reliability,
)
from decguard_pipeline.core.results import CaseResults


def make_results(
    labels: tuple[str, ...],
    rows: list[tuple[str | None, list[float] | None, str | None]],
    *,
    kind: str = "choice",
    latency: list[float] | None = None,
) -> CaseResults:
    """Case results from (expected, probabilities or None, error kind) rows."""
    n, k = len(rows), len(labels)
    probs = np.full((n, k), np.nan)
    for i, (_, p, _) in enumerate(rows):
        if p is not None:
            probs[i] = p
    selected, confidence = select_many(probs)
    lat = np.array(latency if latency is not None else [1.0] * n, dtype=float)
    lat[selected < 0] = np.nan
    return CaseResults(
        spec=DecisionSpec("d", kind, labels),
        backend="default",
        provider="mock",
        case_ids=[f"c{i}" for i in range(n)],
        inputs=["x"] * n,
        expected=[e for e, _, _ in rows],
        metadata=[{} for _ in rows],
        probs=probs,
        selected=selected,
        confidence=confidence,
        latency_ms=lat,
        model=[None] * n,
        model_version=[None] * n,
        result_metadata=[{} for _ in rows],
        error_kind=[err for _, _, err in rows],
        error_message=[None if err is None else "m" for _, _, err in rows],
    )


def test_counts_coverage_and_selective_vector():
    results = make_results(
        ("a", "b"),
        [
            ("a", [0.9, 0.1], None),
            ("b", [0.6, 0.4], None),
            ("b", [0.2, 0.8], None),
            (None, [0.95, 0.05], None),
            ("a", None, "timeout"),
        ],
    )
    m = golden_metrics(results, calibration_bins=10, confidence_threshold=0.8)
    assert m["counts"] == {
        "total": 5,
        "succeeded": 4,
        "errored": 1,
        "labeled": 3,
        "errors_by_kind": {"timeout": 1},
        "error_rate": 0.2,
    }
    assert m["classification"]["accuracy"] == 2 / 3
    assert m["selective"] == {
        "threshold": 0.8,
        "n": 4,
        "coverage": 0.75,
        "abstention_rate": 0.25,
        "selective_accuracy": 1.0,
        "n_covered_labeled": 2,
    }
    assert m["latency"]["n"] == 4


def test_macro_f1_vector():
    exp, pred = np.array([0, 0, 1, 2]), np.array([0, 1, 1, 0])
    assert macro_f1(exp, pred, 3) == (0.5 + 2 / 3 + 0) / 3
    from sklearn.metrics import f1_score

    assert macro_f1(exp, pred, 3) == pytest.approx(
        f1_score(exp, pred, average="macro", zero_division=0), rel=1e-15
    )
    # only labels present in expected or predicted count
    assert macro_f1(np.array([0, 0]), np.array([0, 0]), 5) == 1.0
    assert macro_f1(np.array([], dtype=int), np.array([], dtype=int), 3) is None


def test_nll_brier_and_ordinal_vectors():
    assert nll(np.array([0.7, 0.4])) == -(math.log(0.7) + math.log(0.4)) / 2
    assert nll(np.array([0.0])) == -math.log(1e-15)  # a certain miss costs ~34.539
    assert round(nll(np.array([0.0])), 3) == 34.539
    assert nll(np.array([])) is None
    probs = np.array([[0.7, 0.2, 0.1], [0.4, 0.5, 0.1]])
    assert brier(probs, np.array([0, 0])) == pytest.approx((0.14 + 0.62) / 2, abs=1e-15)
    assert brier(np.array([[0.0, 1.0]]), np.array([0])) == 2.0
    assert ordinal_mae(np.array([0, 3]), np.array([1, 1])) == 1.5


def test_reliability_bins_vector():
    conf = np.array([0.95, 0.85, 0.3, 0.3])
    correct = np.array([True, False, True, False])
    bins = reliability(conf, correct, 10)
    assert [b["count"] for b in bins] == [0, 0, 2, 0, 0, 0, 0, 0, 1, 1]
    assert expected_calibration_error(bins) == pytest.approx(0.325, abs=1e-15)
    assert bins[2] == {
        "lower": 0.2,
        "upper": 0.3,
        "count": 2,
        "mean_confidence": 0.3,
        "accuracy": 0.5,
    }
    assert bins[0]["mean_confidence"] is None and bins[0]["accuracy"] is None
    assert expected_calibration_error(reliability(np.array([]), np.array([], bool), 3)) is None


@pytest.mark.parametrize(
    ("confidence", "index"),
    [(0.0, 0), (0.1, 0), (0.1000001, 1), (0.3, 2), (0.7, 6), (0.95, 9), (1.0, 9)],
)
def test_bin_edges_are_right_closed(confidence, index):
    bins = reliability(np.array([confidence]), np.array([True]), 10)
    assert [b["count"] for b in bins].index(1) == index


def test_bin_edges_match_reference_for_many_counts():
    from decguard.metrics.core import reliability_bins

    rng = random.Random(3)
    conf = [rng.choice((0.0, 1.0, 0.5, 1 / 3, 2 / 3, 0.1, 0.7)) for _ in range(50)]
    conf += [rng.random() for _ in range(200)]
    correct = [rng.random() < 0.5 for _ in conf]
    for n_bins in (1, 2, 3, 7, 10, 13, 100, 1000):
        mine = reliability(np.array(conf), np.array(correct), n_bins)
        theirs = [vars(b) for b in reliability_bins(conf, correct, n_bins)]
        assert mine == theirs


def test_percentile_vectors():
    assert percentile(np.array([4.0, 1.0, 3.0, 2.0]), 50) == 2.5
    assert percentile(np.array([1.0, 2.0, 3.0, 4.0]), 95) == pytest.approx(3.85, abs=1e-15)
    assert percentile(np.array([7.0]), 99) == 7.0
    assert percentile(np.array([]), 50) is None
    values = np.random.default_rng(0).random(101)
    for q in (50, 90, 95, 99):
        assert percentile(values, q) == np.percentile(values, q)


# -- against the reference's compute_metrics on random results -------------------------------


def _random_rows(
    rng: random.Random, labels: tuple[str, ...]
) -> list[tuple[str | None, list[float] | None, str | None]]:
    rows: list[tuple[str | None, list[float] | None, str | None]] = []
    for _ in range(rng.randint(1, 60)):
        expected = rng.choice((*labels, None)) if rng.random() < 0.9 else None
        if rng.random() < 0.1:
            rows.append((expected, None, rng.choice(("timeout", "invalid_response"))))
            continue
        raw = [rng.random() ** 3 for _ in labels]
        if rng.random() < 0.2:  # ties and round numbers
            raw = [rng.choice((1.0, 2.0)) for _ in labels]
        total = math.fsum(raw)
        rows.append((expected, [v / total for v in raw], None))
    return rows


def _reference_metrics(
    labels: tuple[str, ...], kind: str, rows: list[Any], latency: list[float], evaluation: Any
) -> dict[str, Any]:
    from decguard.decisions import DecisionRequest, DecisionSpec, Prediction, build_result
    from decguard.metrics import compute_metrics
    from decguard.runner import CaseError, CaseRecord

    spec = DecisionSpec(name="d", type=kind, labels=labels)
    records = []
    for i, (expected, p, err) in enumerate(rows):
        base = {"case_id": f"c{i}", "input": "x", "expected": expected}
        if p is None:
            records.append(CaseRecord(**base, error=CaseError(kind=err, message="m")))
            continue
        request = DecisionRequest(case_id=f"c{i}", decision=spec, input="x")
        prediction = Prediction(probabilities=dict(zip(labels, p, strict=True)))
        result = build_result(
            request, prediction, backend="default", provider="mock", latency_ms=latency[i]
        )
        records.append(CaseRecord(**base, result=result))
    return compute_metrics(spec, records, evaluation).model_dump(mode="json")


@pytest.mark.parametrize("seed", range(40))
def test_metrics_match_reference(seed):
    from decguard.contracts.models import Evaluation as RefEvaluation

    rng = random.Random(seed)
    kind = rng.choice(("choice", "noul", "score"))
    k = 2 if kind == "noul" else rng.randint(2, 6)
    labels = tuple(f"l{i}" for i in range(k))
    rows = _random_rows(rng, labels)
    latency = [rng.choice((rng.random() * 50, 0.0073, 1e-3)) for _ in rows]
    threshold = rng.choice((None, 0.0, 0.5, 0.8, 1.0, rng.random()))
    bins = rng.choice((1, 3, 10, 1000, rng.randint(1, 50)))
    results = make_results(labels, rows, kind=kind, latency=latency)
    mine = golden_metrics(results, calibration_bins=bins, confidence_threshold=threshold)
    evaluation = RefEvaluation(confidence_threshold=threshold, calibration_bins=bins)
    theirs = _reference_metrics(labels, kind, rows, latency, evaluation)
    assert mine == theirs
    # and the gates over them
    from decguard.contracts.models import Gates as RefGates
    from decguard.metrics import Metrics
    from decguard.reports.gates import evaluate_gates

    gates = {"min_accuracy": 0.5, "max_ece": 0.1, "max_nll": 1.0, "max_brier": 0.5}
    if threshold is not None:
        gates |= {"min_coverage": 0.5, "min_selective_accuracy": 0.9}
    if kind == "score":
        gates["max_ordinal_mae"] = 0.5
    warn = {"min_macro_f1": 0.8, "max_latency_p95_ms": 10.0, "max_error_rate": 0.05}
    checks = golden_checks(Gates(**gates), Gates(**warn), gate_values(mine))
    ref_checks, ref_status = evaluate_gates(
        RefGates(**gates), RefGates(**warn), Metrics.model_validate(theirs)
    )
    assert checks == [c.model_dump(mode="json") for c in ref_checks]
    assert overall_status(checks) == ref_status.value


# -- check messages --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [(1.0, "1"), (-0.0, "-0"), (5 / 6, "0.8333"), (0.0078221, "0.007822"), (1e-7, "1e-07"),
     (123456.0, "1.235e+05"), (0.30000000000000004, "0.3")],
)  # fmt: skip
def test_check_message_formats(value, text):
    check = make_check("max_x", "x", "<=", 0.5, value, level="requirement")
    holds = value <= 0.5
    assert check["message"] == (f"x {text} <= 0.5" if holds else f"x {text} violates <= 0.5")
    assert check["status"] == ("pass" if holds else "fail")


def test_checks_match_reference_make_check():
    from decguard.reports.gates import make_check as ref_make_check

    values = [None, 0.0, -0.0, 0.5, 0.25, 1.0, 2 / 3, 1e-9, 34.538776394910684, 500.0]
    thresholds = [0.0, 0.5, 0.25, 1.0, 0.9, 500.0, 1e-05, 2.0]
    for value in values:
        for threshold in thresholds:
            for comparison in (">=", "<="):
                for level in ("requirement", "warning"):
                    for detail in ("", "per case: max_tv_distance 0.03"):
                        args = ("g", "m", comparison, threshold, value)
                        kw = {"level": level, "detail": detail, "missing": "no eligible cases"}
                        mine = make_check(*args, **kw)
                        theirs = ref_make_check(*args, **kw).model_dump(mode="json")
                        assert mine == theirs


def test_implicit_error_rate_gate_and_order():
    values = dict.fromkeys(
        ("accuracy", "macro_f1", "ordinal_mae", "nll", "brier", "ece", "coverage",
         "abstention_rate", "selective_accuracy", "latency_p95_ms"), 0.5,
    ) | {"error_rate": 0.0}  # fmt: skip
    checks = golden_checks(Gates(max_ece=0.6, min_accuracy=0.4), Gates(max_nll=0.1), values)
    assert [(c["gate"], c["level"], c["status"]) for c in checks] == [
        ("min_accuracy", "requirement", "pass"),
        ("max_ece", "requirement", "pass"),
        ("max_error_rate", "requirement", "pass"),
        ("max_nll", "warning", "warn"),
    ]
    assert overall_status(checks) == "warn"
    configured = golden_checks(Gates(max_error_rate=0.1), Gates(), values)
    assert [(c["gate"], c["threshold"]) for c in configured] == [("max_error_rate", 0.1)]
    assert Evaluation().model_dump() == {
        "confidence_threshold": None,
        "calibration_bins": 10,
        "probability_tolerance": 0.001,
        "max_concurrency": 4,
    }
