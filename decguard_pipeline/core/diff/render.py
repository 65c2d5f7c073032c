"""The ``diff`` terminal layout, line for line as DecGuard 0.1 prints it (spec §8)."""

from __future__ import annotations

from typing import Any

from decguard_pipeline.core.formatting import check_line, num, pct, signed
from decguard_pipeline.core.report.render import MAX_SHOWN, model_label, preview

VERDICTS = {
    "pass": "PASS: no regression gate is violated",
    "warn": "WARN: requirements hold, some warning gates do not",
    "fail": "FAIL: the candidate regresses beyond the contract's limits",
}


def render_diff(doc: dict[str, Any]) -> str:
    c, s = doc["counts"], doc["shift"]
    lines = [
        f"DecGuard {doc['decguard_version']} · diff {doc['contract']['name']}"
        f" ({doc['contract']['type']}) · {doc['status'].upper()}",
        "",
    ]
    for role in ("baseline", "candidate"):
        run = doc[role]
        backend = run["backend"]
        lines.append(
            f"  {role:<10}{run['path']}  {backend['name']}: {backend['provider']}"
            f" · {model_label(backend)}"
        )
    if not doc["same_dataset"]:
        lines.append("  note      the runs used different datasets; cases are matched by id")
    lines += [
        "",
        f"  Cases        {c['matched']} matched · {c['compared']} compared"
        f" · {c['only_in_baseline']} only in baseline · {c['only_in_candidate']} only in"
        " candidate",
        f"  Answers      {c['answer_flips']} flipped ({pct(s['answer_flip_rate'])})"
        f" · {c['newly_wrong']} newly wrong · {c['newly_correct']} newly correct",
        f"  Errors       {c['newly_errored']} new · {c['recovered']} recovered"
        f" · {c['still_errored']} still",
        f"  Shift        mean TV {num(s['mean_tv_distance'])}   max TV {num(s['max_tv_distance'])}"
        f"   mean JS {num(s['mean_js_divergence'])}",
        f"  Confidence   mean shift {num(s['mean_confidence_delta'])}"
        f"   mean |shift| {num(s['mean_abs_confidence_delta'])}"
        f"   max |shift| {num(s['max_abs_confidence_delta'])}",
        "",
        f"  {'Metric':<16}{'baseline':>10}{'candidate':>11}{'delta':>10}",
    ]
    for name, m in doc["metrics"].items():
        if m["baseline"] is None and m["candidate"] is None:
            continue
        lines.append(
            f"  {name:<16}{num(m['baseline']):>10}{num(m['candidate']):>11}{signed(m['delta']):>10}"
        )
    if doc["segments"]:
        lines += ["", "  Segments"]
        lines += [
            segment_line(
                seg,
                f"accuracy {num(seg['baseline_accuracy'])} -> {num(seg['candidate_accuracy'])}"
                f"   flips {pct(seg['answer_flip_rate'])}",
            )
            for seg in doc["segments"]
        ]
    lines += ["", "  Checks"]
    lines += [
        check_line(c["status"], c["gate"], c["message"], width=30, level=c["level"])
        for c in doc["checks"]
    ]
    changes = doc["changes"]
    if changes:
        shown = changes[:MAX_SHOWN]
        lines += ["", f"  Changes ({len(shown)} of {len(changes)})"]
        for change in shown:
            lines.append(f"    {change['case_id']:<12} {_describe(change)}")
            lines.append(f"    {'':<12} input: {preview(change['input'])}")
    lines += ["", VERDICTS[doc["status"]]]
    return "\n".join(lines)


def segment_line(seg: dict[str, Any], text: str) -> str:
    """One segment in the diff's layouts: its key, value and size, what is said about it, and
    a note when it is too small to be gated."""
    return f"    {seg['key']}={seg['value']:<14} n={seg['matched']:<4} {text}" + (
        "" if seg["gated"] else "   (not gated: small)"
    )


def _describe(change: dict[str, Any]) -> str:
    if change["kind"] == "newly_errored":
        return f"now errors: {change['error']}"
    if change["kind"] == "recovered":
        return f"recovered: {change['candidate_selected']}"
    text = (
        f"{change['baseline_selected']} ({num(change['baseline_confidence'], 2)}) -> "
        f"{change['candidate_selected']} ({num(change['candidate_confidence'], 2)})"
    )
    return text + (f", expected {change['expected']}" if change["expected"] else "")
