"""Regression gates judged in a statistics mode (``pipeline.statistics.gate_mode(s)``).

* ``point`` — DecGuard: the point estimate against the limit.
* ``significant`` — fails only when the point estimate violates the limit *and* the
  regression is significant at ``alpha`` (one-sided: the candidate is worse). For gates on a
  change between the runs (accuracy, macro-F1, ECE, Brier, NLL, error rate, segment accuracy)
  the null hypothesis is "no change"; for gates on how much the answers moved (flip rate,
  mean TV, mean |confidence shift|), which are 0 only for identical models, it is "the true
  value is within the limit".
* ``interval`` — fails whenever the upper end of the ``confidence`` interval of the gated
  value reaches past the limit (even if the point estimate holds).

The check keeps DecGuard's shape and value (the point estimate); its status is the mode's
verdict and its message says why. The implicit ``max_error_rate_increase`` requirement
(not set in the contract) always stays a point gate: new errors always count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from decguard_pipeline.core.contract import Regression
from decguard_pipeline.core.contract.statistics import StatisticsSettings
from decguard_pipeline.core.diff.gates import (
    IMPLICIT_GATE,
    SEGMENT_GATE,
    configured_gates,
    point_check,
    worst_detail,
)
from decguard_pipeline.core.diff.statistics import Block
from decguard_pipeline.core.gates import FAIL, PASS, WARN, Check
from decguard_pipeline.core.stats import binomial_sf, bootstrap_p_value

# gate -> (metric whose delta it limits, True when a drop of that metric is the regression)
DELTA_GATES: dict[str, tuple[str, bool]] = {
    "max_accuracy_drop": ("accuracy", True),
    "max_macro_f1_drop": ("macro_f1", True),
    "max_ece_increase": ("ece", False),
    "max_brier_increase": ("brier", False),
    "max_nll_increase": ("nll", False),
    "max_error_rate_increase": ("error_rate", False),
}
SHIFT_GATES = {
    "max_mean_tv_distance": "mean_tv_distance",
    "max_mean_confidence_shift": "mean_abs_confidence_delta",
}


@dataclass
class Evidence:
    p_value: float | None  # one-sided: the regression (or the excess over the limit) is real
    low: float | None  # interval of the gated value
    high: float | None
    test: str


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def delta_evidence(block: Block, metric: str, drop: bool) -> Evidence:
    delta = block.document["metrics"][metric]["delta"]
    low, high = delta["low"], delta["high"]
    if drop and low is not None:
        low, high = -high, -low
    return Evidence(delta["p_value_candidate_worse"], low, high, delta["test"])


def gate_evidence(gate: str, limit: float, block: Block) -> Evidence | None:
    """What the statistics say about one gate over a block of pairs; None for point-only."""
    if gate in DELTA_GATES:
        return delta_evidence(block, *DELTA_GATES[gate])
    if gate == "max_answer_flip_rate":
        rate = block.document["shift"]["answer_flip_rate"]
        p = binomial_sf(rate["flips"], rate["compared"], limit) if rate["compared"] else None
        return Evidence(p, rate["low"], rate["high"], "binomial_exact")
    if gate in SHIFT_GATES:
        name = SHIFT_GATES[gate]
        entry = block.document["shift"][name]
        p = bootstrap_p_value(block.shift_samples[name], null=limit)
        return Evidence(p, entry["low"], entry["high"], "bootstrap")
    return None


def level_label(confidence: float) -> str:
    return f"{confidence * 100:g}% CI"


def _record(check: Check, mode: str, ev: Evidence | None, settings: StatisticsSettings) -> dict:
    return {
        "gate": check["gate"],
        "level": check["level"],
        "mode": mode,
        "metric": check["metric"],
        "threshold": check["threshold"],
        "value": check["value"],
        "status": check["status"],
        "p_value": None if ev is None else ev.p_value,
        "alpha": settings.alpha,
        "low": None if ev is None else ev.low,
        "high": None if ev is None else ev.high,
        "confidence": settings.confidence,
        "test": None if ev is None else ev.test,
        "segment": None,
    }


def _restated(check: Check, holds: bool, detail: str, base_detail: str) -> Check:
    """``check`` with the mode's verdict and its reason appended to DecGuard's message."""
    value, metric = check["value"], check["metric"]
    verb = "" if value <= check["threshold"] else "violates "
    reason = "; ".join(part for part in (base_detail, detail) if part)
    message = f"{metric} {value:.4g} {verb}<= {check['threshold']:g}"
    if reason:
        message += f" ({reason})"
    failed = FAIL if check["level"] == "requirement" else WARN
    return {**check, "status": PASS if holds else failed, "message": message}


def _verdict(
    value: float, limit: float, mode: str, ev: Evidence, settings: StatisticsSettings
) -> tuple[bool, str] | None:
    """(holds, reason) under ``mode``; None when the statistics cannot decide (point rules)."""
    if mode == "significant":
        if value <= limit:
            return True, ""
        if ev.p_value is None:
            return None
        if ev.p_value <= settings.alpha:
            return False, f"significant: p={_fmt(ev.p_value)} <= alpha {settings.alpha:g}"
        return True, f"not significant: p={_fmt(ev.p_value)} > alpha {settings.alpha:g}"
    if ev.high is None:
        return None
    reaches = ev.high > limit
    where = "reaches past the limit" if reaches else "within the limit"
    return (
        not reaches,
        f"{level_label(settings.confidence)} [{_fmt(ev.low)}, {_fmt(ev.high)}] {where}",
    )


def judge(
    check: Check,
    mode: str,
    ev: Evidence | None,
    settings: StatisticsSettings,
    base_detail: str = "",
) -> tuple[Check, dict[str, Any]]:
    """The check as the mode decides it, and its record for the sidecar."""
    value = check["value"]
    if mode == "point" or ev is None or value is None:
        return check, _record(check, "point" if ev is None else mode, ev, settings)
    verdict = _verdict(value, check["threshold"], mode, ev, settings)
    if verdict is None:
        return check, _record(check, mode, ev, settings)
    judged = _restated(check, *verdict, base_detail)
    return judged, _record(judged, mode, ev, settings)


def judge_segments(
    check: Check,
    mode: str,
    gated: list[tuple[dict[str, Any], Block]],
    settings: StatisticsSettings,
    base_detail: str,
) -> tuple[Check, dict[str, Any]]:
    """The segment gate: every gated segment is judged on its own; the gate fails when one
    fails (DecGuard's value, the worst drop, is kept)."""
    if mode == "point" or check["value"] is None:
        return check, _record(check, mode, None, settings)
    limit = check["threshold"]
    verdicts = []
    for seg, block in gated:
        ev = delta_evidence(block, "accuracy", drop=True)
        verdict = _verdict(seg["accuracy_drop"], limit, mode, ev, settings)
        if verdict is not None:
            verdicts.append((seg, ev, *verdict))
    failing = [v for v in verdicts if not v[2]]
    if failing:
        seg, ev, holds, reason = failing[0]
    elif verdicts:
        # the segment the statistics came closest to failing on
        seg, ev, holds, reason = max(
            verdicts,
            key=lambda v: (v[1].high or 0.0) if mode == "interval" else -(v[1].p_value or 1.0),
        )
    else:
        return check, _record(check, mode, None, settings)
    named = f"{seg['key']}={seg['value']}: {reason}" if reason else ""
    judged = _restated(check, holds, named, base_detail)
    record = _record(judged, mode, ev, settings)
    record["segment"] = {"key": seg["key"], "value": seg["value"]}
    return judged, record


def judged_checks(
    regression: Regression,
    values: dict[str, float | None],
    worst: dict[str, Any] | None,
    overall: Block,
    gated_segments: list[tuple[dict[str, Any], Block]],
    settings: StatisticsSettings,
) -> tuple[list[Check], list[dict[str, Any]]]:
    """Checks in DecGuard's order, each decided by its mode; and their sidecar records."""
    explicit = set(regression.configured())
    base_detail = worst_detail(worst)
    checks, records = [], []
    for gate, limit, level in configured_gates(regression):
        mode = settings.mode_for(gate)
        if gate == IMPLICIT_GATE and level == "requirement" and gate not in explicit:
            mode = "point"
        if gate == SEGMENT_GATE:
            point = point_check(gate, limit, level, values, base_detail)
            check, record = judge_segments(point, mode, gated_segments, settings, base_detail)
        else:
            point = point_check(gate, limit, level, values)
            check, record = judge(point, mode, gate_evidence(gate, limit, overall), settings)
        checks.append(check)
        records.append(record)
    return checks, records
