"""Text sections of the guard extension, printed after DecGuard's layout (which stays DecGuard's
line for line). Rendered from the sidecar document alone, like ``render_report``."""

from __future__ import annotations

from typing import Any

from decguard_pipeline.core.formatting import num, pct, signed
from decguard_pipeline.core.guard.extension import headline

VERDICTS = {
    "pass": "PASS: DecGuard's and the pipeline's gates hold on every dataset",
    "warn": "WARN: requirements hold; some warning gates or run flags do not",
    "fail": "FAIL: at least one requirement does not hold",
}
# headline metric -> column title, in the order of the suite and split tables
TABLE_COLUMNS = {
    "accuracy": "accuracy",
    "ece_equal_mass": "ECE-em",
    "confidence_gap": "gap",
    "auroc": "AUROC",
    "fnr": "FNR",
    "fpr": "FPR",
    "aurc": "AURC",
}


def render_guard(doc: dict[str, Any]) -> str:
    """All extension sections of a sidecar document."""
    contract = doc["contract"]
    evaluations = doc["evaluations"]
    lines = [f"Pipeline · {contract['name']} ({contract['type']}) · {doc['status'].upper()}"]
    for index, entry in enumerate(evaluations):
        if len(evaluations) > 1 or entry["suite"] is not None:
            name = entry["suite"] or "main dataset"
            lines += [
                "",
                f"  Suite {name} · {entry['dataset']['path']} · {entry['status'].upper()}",
            ]
        lines += evaluation_lines(entry["metrics"], full=index == 0)
    if doc["summary"] is not None:
        lines += suite_table(doc)
    lines += ["", "  Pipeline checks"]
    several = len(evaluations) > 1
    for entry in evaluations:
        prefix = f"{entry['suite'] or 'main'}: " if several else ""
        checks = entry["checks"]
        if entry is not evaluations[0]:
            # the main dataset's DecGuard checks are printed above; other suites' failures here
            checks = [c for c in entry["decguard"]["checks"] if c["status"] != "pass"] + checks
        for check in checks:
            tag = "" if check["level"] == "requirement" else " (warning)"
            lines.append(
                f"    {check['status'].upper():<4}  {prefix + check['gate']:<38} "
                f"{check['message']}{tag}"
            )
    lines += ["", VERDICTS[doc["status"]]]
    return "\n".join(lines)


def evaluation_lines(block: dict[str, Any], *, full: bool) -> list[str]:
    """Run, guard, calibration and risk-coverage; with ``full`` also the reliability tables,
    the threshold sweep and the metadata splits."""
    run, guard, cal, rc = block["run"], block["guard"], block["calibration"], block["risk_coverage"]
    errors = ", ".join(f"{kind} {n}" for kind, n in run["errors_by_kind"].items())
    lines = [
        "",
        f"  Run          {run['total']} cases · {run['decided']} decided · {run['errored']} errored"
        + (f" ({errors})" if errors else "")
        + f" · drop rate {pct(run['drop_rate'])} · {run['state']}",
    ]
    lines += guard_lines(guard)
    if "thresholds" in block:  # sidecars written before the table have none
        lines += threshold_lines(block["thresholds"])
    lines += [
        f"  Calibration  mean confidence {num(cal['mean_confidence'])} · accuracy "
        f"{num(cal['accuracy'])} · gap {signed(cal['confidence_gap'])}"
        f" ({cal['direction'] or 'n/a'}, tolerance {cal['gap_tolerance']:g})",
        f"               ECE equal-width {num(cal['ece_equal_width'])} · equal-mass "
        f"{num(cal['ece_equal_mass'])} ({cal['bins']} bins)",
    ]
    if full:
        lines += reliability_lines(
            "equal-width, empty bins left out", cal["reliability_equal_width"]
        )
        lines += reliability_lines("equal-mass", cal["reliability_equal_mass"])
    cheapest = rc["cheapest"]
    lines.append(
        f"  Risk-coverage AURC {num(rc['aurc'])} · optimal {num(rc['optimal_aurc'])} · excess "
        f"{num(rc['excess_aurc'])}"
        + (
            f" · cheapest at {cheapest['threshold']:g}: {cheapest['cost_per_1000']:.2f} per 1,000"
            if cheapest
            else ""
        )
    )
    if full:
        lines += sweep_lines(rc["sweep"])
        for key, groups in block.get("splits", {}).items():
            lines += ["", f"  By {key}"]
            lines += headline_table(
                "value", [(g["value"], g["run"]["total"], headline(g), None) for g in groups]
            )
    return lines


def guard_lines(guard: dict[str, Any]) -> list[str]:
    lines = [
        f"  Guard        threshold {guard['threshold']:g} · {guard['n']} labeled cases",
        f"    {'label':<14} {'TP':>6} {'FP':>6} {'TN':>6} {'FN':>6}  {'prec.':>6} {'recall':>6}"
        f" {'F1':>6} {'FPR':>6} {'FNR':>6} {'AUROC':>6} {'AUPRC':>6}",
    ]
    for label, m in guard["labels"].items():
        ratios = " ".join(
            f"{num(m[k]):>6}" for k in ("recall", "f1", "fpr", "fnr", "auroc", "auprc")
        )
        lines.append(
            f"    {label:<14} {m['tp']:>6} {m['fp']:>6} {m['tn']:>6} {m['fn']:>6}  "
            f"{num(m['precision']):>6} {ratios}"
        )
        for metric, reason in m["undefined"].items():
            lines.append(f"    {'':<14} {metric} undefined: {reason}")
    return lines


def threshold_lines(section: dict[str, Any]) -> list[str]:
    """Per guarded label: the threshold table, then the point meeting each target."""
    lines = []
    for label, table in section["labels"].items():
        lines += [
            f"  Thresholds   {label}",
            f"    {'threshold':>9} {'TP':>6} {'FP':>6} {'TN':>6} {'FN':>6}  {'prec.':>6}"
            f" {'recall':>6} {'F1':>6} {'FPR':>6} {'FNR':>6}",
        ]
        for row in table["grid"]:
            lines.append(f"    {row['threshold']!r:>9} {_row_cells(row)}")
        for key, name in (("target_recall", "recall ≥"), ("target_fpr", "FPR ≤")):
            point = table[key]
            if point is None:
                continue
            target = f"target {name} {point['target']:g}"
            if point["threshold"] is None:
                lines.append(f"    {'none':>9}  {target}: {point['reason']}")
            else:
                # the threshold whole: a rounded one may not meet the target
                lines.append(f"    {point['threshold']!r:>9} {_row_cells(point)}  {target}")
    return lines


def _row_cells(row: dict[str, Any]) -> str:
    rates = " ".join(f"{num(row[k]):>6}" for k in ("recall", "f1", "fpr", "fnr"))
    return (
        f"{row['tp']:>6} {row['fp']:>6} {row['tn']:>6} {row['fn']:>6}  "
        f"{num(row['precision']):>6} {rates}"
    )


def reliability_lines(title: str, bins: list[dict[str, Any]]) -> list[str]:
    lines = [
        f"  Reliability  {title}",
        f"    {'confidence':<16} {'n':>6}  {'mean conf':>9}  {'accuracy':>8}",
    ]
    for b in bins:
        if not b["count"]:
            continue
        lines.append(
            f"    {num(b['lower'])}–{num(b['upper']):<10} {b['count']:>6}  "
            f"{num(b['mean_confidence']):>9}  {num(b['accuracy']):>8}"
        )
    return lines


def sweep_lines(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        f"    {'threshold':>9}  {'coverage':>8}  {'sel. acc':>8}  {'handed off':>10}"
        f"  {'cost/1000':>10}"
    ]
    for r in rows:
        cost = "n/a" if r["cost_per_1000"] is None else f"{r['cost_per_1000']:.2f}"
        lines.append(
            f"    {r['threshold']:>9.2f}  {num(r['coverage']):>8}  "
            f"{num(r['selective_accuracy']):>8}  {r['handed_off']:>10}  {cost:>10}"
        )
    return lines


def headline_table(
    first: str, rows: list[tuple[str, int | None, dict[str, float | None], str | None]]
) -> list[str]:
    """One line per row: name, cases, drop rate and the table metrics (worst guarded label for
    guard metrics); a status column when given."""
    titles = "".join(f" {t:>8}" for t in TABLE_COLUMNS.values())
    lines = [f"    {first:<14} {'cases':>6} {'drop':>6}{titles}"]
    for name, cases, values, status in rows:
        cells = "".join(
            f" {(signed if m == 'confidence_gap' else num)(values[m]):>8}" for m in TABLE_COLUMNS
        )
        count = "" if cases is None else str(cases)
        lines.append(
            f"    {name:<14} {count:>6} {pct(values['drop_rate']):>6}{cells}"
            + (f"  {status.upper()}" if status else "")
        )
    return lines


def suite_table(doc: dict[str, Any]) -> list[str]:
    summary = doc["summary"]
    rows = [
        (e["suite"] or "main", e["metrics"]["run"]["total"], headline(e["metrics"]), e["status"])
        for e in doc["evaluations"]
    ]
    rows.append(("pooled", summary["cases"], summary["pooled"], None))
    rows.append(("mean of suites", None, summary["mean"], None))
    return ["", "  Suites (guard columns: worst guarded label)", *headline_table("suite", rows)]
