"""Terminal layout of a production check: DecGuard's lines exactly (spec §11.5), then, when
the contract turns them on, the extension sections."""

from __future__ import annotations

from typing import Any

from decguard_pipeline.core.formatting import num, pct, signed
from decguard_pipeline.core.production.segments import shown

VERDICTS = {
    "pass": "PASS: all post-deployment gates hold",
    "warn": "WARN: requirements hold, some warning gates do not",
    "fail": "FAIL: at least one post-deployment requirement does not hold",
}


def render_check(doc: dict[str, Any]) -> str:
    """DecGuard's summary of a check report document."""
    m = doc["metrics"]
    counts, calibration, confidence = m["counts"], m["calibration"], m["confidence"]
    routing = m["routing"]
    lines = [
        f"DecGuard {doc['decguard_version']} · {doc['contract']['name']} "
        f"({doc['contract']['type']}) · {doc['status'].upper()}",
        "",
        f"  Records       {counts['total']} total · {counts['with_correctness']} with "
        f"correctness · {counts['with_outcome']} with label outcome",
        f"  Outcomes      accuracy {num(m['outcomes']['accuracy'])} · "
        f"error {num(m['outcomes']['error_rate'])}",
        f"  Calibration   ECE {num(calibration['ece'])} · Brier {num(calibration['brier'])} · "
        f"NLL {num(calibration['nll'])}",
        f"  Confidence    mean {num(confidence['mean'])} · p50 {num(confidence['p50'])} · "
        f"p95 {num(confidence['p95'])}",
    ]
    threshold = m["threshold"]
    if threshold is not None:
        lines.append(
            f"  Threshold     confidence >= {threshold['threshold']:g}: "
            f"coverage {num(threshold['coverage'])}"
        )
    lines.append(
        f"  Routing       abstain {num(routing['abstention_rate'])} · "
        f"fallback {num(routing['fallback_rate'])} · review {num(routing['human_review_rate'])}"
    )
    baseline, drift = doc["baseline"], doc["drift"]
    if baseline is not None:
        lines += [
            "",
            f"  Baseline      {baseline['source']} · {baseline['n_records']} records",
            f"  Drift         confidence TV {num(drift['confidence_tv_distance'])} · "
            f"mean delta {num(drift['confidence_mean_delta'])} · "
            f"accuracy drop {num(drift['accuracy_drop'])} · "
            f"ECE increase {num(drift['ece_increase'])}",
        ]
    if doc["segments"]:
        lines += ["", "  Segments"]
        for segment in doc["segments"]:
            sm = segment["metrics"]
            lines.append(
                f"    {segment['status'].upper():<4} {segment['key']}={shown(segment['value'])}"
                f" · {sm['counts']['total']} records · accuracy {num(sm['outcomes']['accuracy'])}"
                f" · ECE {num(sm['calibration']['ece'])}"
            )
    if doc["checks"]:
        lines += ["", "  Checks"]
        for check in doc["checks"]:
            lines.append(
                f"    {check['status'].upper():<4}  {check['gate']:<48} {check['message']}"
            )
    lines += ["", VERDICTS[doc["status"]]]
    return "\n".join(lines)


def _interval(entry: dict[str, Any]) -> str:
    if entry["low"] is None:
        return "n/a (no record with correctness)"
    level = f"{entry['confidence'] * 100:g}%"
    return f"{level} Wilson [{num(entry['low'])}, {num(entry['high'])}]"


def render_extensions(ext: dict[str, Any]) -> str:
    """The extension sections, printed after DecGuard's verdict."""
    outcomes = ext["outcomes"]
    accuracy = ext["accuracy_interval"]
    lines = [
        "Pipeline extensions",
        f"  Outcomes      {outcomes['pending']} of {outcomes['total']} records still lack an "
        f"outcome ({pct(outcomes['pending_rate'])}) · {outcomes['pending_label']} lack a label "
        "outcome",
        f"  Accuracy      {num(accuracy['accuracy'])} · {_interval(accuracy)} · "
        f"{accuracy['n']} records with correctness",
    ]
    drift = ext["label_drift"]
    shares = " · ".join(
        f"{label} {num(share)}"
        for label, share in zip(drift["labels"], drift["current"], strict=True)
    )
    if drift["baseline"] is None:
        lines.append(f"  Labels        {shares}")
    else:
        moves = " · ".join(
            f"{label} {num(b)} -> {num(c)}"
            for label, b, c in zip(
                drift["labels"], drift["baseline"], drift["current"], strict=True
            )
        )
        lines += [
            f"  Label drift   TV {num(drift['tv_distance'])} · PSI {num(drift['psi'])} "
            f"(empty share read as {drift['psi_epsilon']:g})",
            f"  Labels        {moves}",
        ]
    lines.append("  Calibration by model_version")
    for entry in ext["calibration_by_model_version"]:
        version = "(none)" if entry["model_version"] is None else entry["model_version"]
        text = (
            f"    {version:<20} {entry['n']} records · {entry['n_correctness']} with correctness"
            f" · accuracy {num(entry['accuracy'])} · ECE {num(entry['ece'])}"
        )
        if entry["baseline"] is not None:
            text += f" · baseline {num(entry['baseline']['ece'])} ({signed(entry['ece_increase'])})"
        lines.append(text)
    if ext["segments"]:
        lines.append("  Segments")
        for segment in ext["segments"]:
            seg_outcomes, seg_accuracy = segment["outcomes"], segment["accuracy_interval"]
            lines.append(
                f"    {segment['key']}={shown(segment['value'])} · {seg_outcomes['pending']} of "
                f"{seg_outcomes['total']} lack an outcome · accuracy "
                f"{num(seg_accuracy['accuracy'])} {_interval(seg_accuracy)}"
            )
    return "\n".join(lines)
