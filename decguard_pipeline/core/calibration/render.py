"""The ``Calibration measures`` text block, printed after DecGuard's layout (and after the
guard extension's): rendered from the sidecar section ``calibration`` alone
(``core/calibration/extension.py``), so a stored sidecar prints the same."""

from __future__ import annotations

from typing import Any

from decguard_pipeline.core.formatting import num

VERDICTS = {
    "pass": "PASS: the calibration gates hold",
    "warn": "WARN: some calibration warning gates do not hold",
    "fail": "FAIL: at least one calibration requirement does not hold",
}
# what temperature scaling rescaled (core/calibration/logits.SOURCES), in a few words
LOGITS_SHORT = {"backend_logprobs": "the backend's log-probabilities", "log_probabilities": "log p"}
DECOMPOSED = (
    ("brier", "Brier"),
    ("brier_top_label", "Brier top-label"),
    ("log_loss_top_label", "log loss top-label"),
)


def _smooth_line(section: dict[str, Any]) -> str:
    s = section["smooth"]
    if s is None:
        return f"    {'smooth ECE':<19}n/a"
    interval = ""
    if s["low"] is not None:
        interval = (
            f"  [{num(s['low'])}, {num(s['high'])}] {s['level']:.0%} bootstrap,"
            f" {s['n_bootstrap']} resamples"
        )
    return f"    {'smooth ECE':<19}{num(s['value'])}{interval} · bandwidth {num(s['bandwidth'])}"


def _decomposition_lines(section: dict[str, Any]) -> list[str]:
    lines = []
    for key, title in DECOMPOSED:
        d = section["decomposition"][key]
        if d is None:
            lines.append(f"    {title:<19}n/a")
            continue
        lines.append(
            f"    {title:<19}{num(d['score'])} = miscalibration {num(d['miscalibration'])}"
            f" − discrimination {num(d['discrimination'])} + uncertainty {num(d['uncertainty'])}"
        )
    return lines


def _recalibration_lines(section: dict[str, Any]) -> list[str]:
    r = section["recalibration"]
    if r is None:
        return [f"    {'temperature':<19}n/a (fewer than two cases)"]
    t = r["temperature"]
    side = "over-confident" if t > 1 else "under-confident" if t < 1 else "neutral"
    bound = ", at its bound" if r["at_bound"] else ""
    before, after = r["before"], r["after"]
    on = LOGITS_SHORT.get(r.get("logits"), "log p")
    return [
        f"    {'temperature':<19}{t:.3g} ({side}{bound}, on {on}); scaled out of fold"
        f" ({r['folds']} folds):",
        f"    {'':<19}ECE {num(before['ece'])} → {num(after['ece'])}"
        f" · NLL {num(before['nll'])} → {num(after['nll'])}"
        f" · Brier {num(before['brier'])} → {num(after['brier'])}",
    ]


def _abstention_line(section: dict[str, Any]) -> str:
    a = section["abstention"]
    target = f"risk <= {a['alpha']:g} with probability >= {1 - a['delta']:g}"
    if a["threshold"] is None:
        return f"    {'abstention':<19}no confidence threshold guarantees {target}"
    return (
        f"    {'abstention':<19}keep confidence >= {a['threshold']:g}: coverage"
        f" {num(a['coverage'])}, selective risk {num(a['selective_risk'])} ({target})"
    )


def render_calibration(section: dict[str, Any]) -> str:
    """The block: the measures, then the calibration checks and their verdict when there are
    any."""
    settings = section["settings"]
    status = section["status"]
    lines = [
        f"  Calibration measures · {section['n']} labeled, decided cases · accuracy"
        f" {num(section['accuracy'])} · mean confidence {num(section['mean_confidence'])}"
        + (f" · {status.upper()}" if section["checks"] else ""),
        _smooth_line(section),
        f"    {'ECE top-label':<19}{num(section['ece_top_label'])} · class-wise"
        f" {num(section['ece_classwise'])} · ℓ2 {num(section['ece_l2'])} · ℓ2 debiased"
        f" {num(section['ece_l2_debiased'])} ({settings['bins']} bins)",
        *_decomposition_lines(section),
        *_recalibration_lines(section),
        _abstention_line(section),
    ]
    if section["checks"]:
        lines += ["", "  Calibration checks"]
        for check in section["checks"]:
            tag = "" if check["level"] == "requirement" else " (warning)"
            lines.append(
                f"    {check['status'].upper():<4}  {check['gate']:<38} {check['message']}{tag}"
            )
        lines += ["", VERDICTS[status]]
    return "\n".join(lines)
