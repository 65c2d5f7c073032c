"""Terminal layouts, line for line as DecGuard 0.1 prints them."""

from __future__ import annotations

import json
from typing import Any

from decguard_pipeline.core.formatting import num, pct, printable
from decguard_pipeline.core.product import PROGRAM

MAX_SHOWN = 10

VERDICTS = {
    "pass": "PASS: all gates hold",
    "warn": "WARN: requirements hold, some warning gates do not",
    "fail": "FAIL: at least one requirement does not hold",
}


def short_hash(value: str) -> str:
    algorithm, _, digest = value.partition(":")
    return f"{algorithm}:{digest[:12]}"


def preview(value: Any, width: int = 70) -> str:
    """One line of an input: whitespace collapsed, cut to ``width`` with an ellipsis."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def model_label(backend: dict[str, Any]) -> str:
    """Model and version as a report says them: what a server served, made safe to print."""
    label = " / ".join(p for p in (backend.get("model"), backend.get("model_version")) if p)
    return printable(label) or "-"


def describe_example(presentation: list[list[str]] | None, value: Any) -> str:
    """The options as shown (when reordered or reformatted) and the input, on one line."""
    text = preview(value)
    if presentation:
        text = f"options [{', '.join(shown for shown, _ in presentation)}] · {text}"
    return text


def render_report(doc: dict[str, Any]) -> str:
    """The ``test``/``fuzz``/``test --all`` summary of a report document."""
    m = doc["metrics"]
    c = m["counts"]
    backend = doc["backend"]
    lines = [
        f"DecGuard {doc['decguard_version']} · {doc['contract']['name']} "
        f"({doc['contract']['type']}) · {doc['status'].upper()}",
        "",
        f"  contract  {doc['contract']['path']}  {short_hash(doc['contract']['hash'])}",
        f"  dataset   {doc['dataset']['path']}  {short_hash(doc['dataset']['hash'])}",
        f"  backend   {backend['name']}: {backend['provider']} · {model_label(backend)}",
    ]
    health = doc.get("health")
    if health is not None and health["status"] != "ok":
        lines.append(f"  health    {health['status']}: {health['detail']}")
    errors = ", ".join(f"{kind} {n}" for kind, n in c["errors_by_kind"].items())
    lines += [
        "",
        f"  Cases        {c['total']} total · {c['succeeded']} decided · {c['errored']} errored"
        + (f" ({errors})" if errors else "")
        + f" · {c['labeled']} labeled",
    ]
    if doc["mode"] != "fuzz":
        lines += _golden_lines(m)
    properties = doc.get("properties")
    if properties is not None:
        lines += _property_lines(properties)
    lines += ["", "  Checks"]
    for check in doc["checks"]:
        tag = "" if check["level"] == "requirement" else " (warning)"
        lines.append(
            f"    {check['status'].upper():<4}  {check['gate']:<38} {check['message']}{tag}"
        )
    if doc["failures"] and doc["mode"] != "fuzz":
        shown = doc["failures"][:MAX_SHOWN]
        lines += ["", f"  Failures ({len(shown)} of {len(doc['failures'])})"]
        for failure in shown:
            if failure["kind"] == "error":
                what = failure["error"] or "error"
            else:
                what = (
                    f"expected {failure['expected']}, got {failure['selected']}"
                    f" ({num(failure['confidence'], 2)})"
                )
            lines.append(f"    {failure['case_id']:<12} {what}")
            lines.append(f"    {'':<12} input: {preview(failure['input'])}")
    if properties is not None:
        lines += _property_failure_lines(properties)
    lines += ["", VERDICTS[doc["status"]]]
    return "\n".join(lines)


def _golden_lines(m: dict[str, Any]) -> list[str]:
    cls, cal, lat, sel = m["classification"], m["calibration"], m["latency"], m["selective"]
    mae = cls["ordinal_mae"]
    lines = [
        f"  Accuracy     {num(cls['accuracy'])}   macro-F1 {num(cls['macro_f1'])}"
        + (f"   ordinal MAE {num(mae)}" if mae is not None else ""),
        f"  Calibration  ECE {num(cal['ece'])}   Brier {num(cal['brier'])}"
        f"   NLL {num(cal['nll'])}   ({cal['bins']} bins)",
    ]
    if sel is not None:
        lines.append(
            f"  Selective    confidence >= {sel['threshold']:g}: coverage {num(sel['coverage'])}"
            f"   abstention {num(sel['abstention_rate'])}"
            f"   accuracy {num(sel['selective_accuracy'])}"
        )
    lines.append(
        f"  Latency ms   mean {num(lat['mean_ms'], 1)}   p50 {num(lat['p50_ms'], 1)}"
        f"   p95 {num(lat['p95_ms'], 1)}   max {num(lat['max_ms'], 1)}"
    )
    return lines


def _property_lines(run: dict[str, Any]) -> list[str]:
    lines = ["", f"  Properties   seed {run['seed']}"]
    for s in run["summaries"]:
        parts = [
            f"{s['n_evaluated']} compared",
            f"{s['n_violations']} violating ({pct(s['violation_rate'])})",
            f"flips {s['n_flips']} ({pct(s['flip_rate'])})",
        ]
        if s["max_level_decrease"] is not None:
            parts.append(f"max level drop {num(s['max_level_decrease'])}")
        else:
            parts.append(f"max TV {num(s['max_tv_distance'])}")
        if s["n_errors"]:
            parts.append(f"{s['n_errors']} errored")
        if s["n_skipped"]:
            parts.append(f"{s['n_skipped']} skipped")
        lines.append(f"    {s['property']:<20} " + " · ".join(parts))
    return lines


def failed_pairs(run: dict[str, Any]) -> list[dict[str, Any]]:
    """Pairs with violations, or errors other than an errored original."""
    return [
        p
        for p in run["pairs"]
        if p["violations"] or (p["error"] is not None and p["error"]["kind"] != "original_error")
    ]


def _property_failure_lines(run: dict[str, Any]) -> list[str]:
    failed = failed_pairs(run)
    if not failed:
        return []
    shown = failed[:MAX_SHOWN]
    lines = [
        "",
        f"  Property failures ({len(shown)} of {len(failed)}; replay with `{PROGRAM} replay`)",
    ]
    for pair in shown:
        lines.append(f"    {pair['id']}")
        if pair["error"] is not None:
            lines.append(f"      error: {pair['error']['kind']}: {pair['error']['message']}")
        else:
            lines.append(f"      {'; '.join(pair['violations'])}")
        lines.append(f"      sent: {describe_example(pair['presentation'], pair['input'])}")
        reduced = pair.get("reduced")
        if reduced is not None:
            lines.append(
                f"      minimal: {describe_example(reduced['presentation'], reduced['input'])}"
                f" ({'; '.join(reduced['violations'])})"
            )
    return lines
