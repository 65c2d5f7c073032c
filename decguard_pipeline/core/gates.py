"""Gates become checks: PASS, WARN (a warning gate fails) or FAIL (a requirement fails).

A gate holds inclusively; a metric that could not be computed never holds, since the
property was not demonstrated.
"""

from __future__ import annotations

from typing import Any, Literal

Comparison = Literal[">=", "<="]
Check = dict[str, Any]

PASS, WARN, FAIL = "pass", "warn", "fail"
EXIT_CODES = {PASS: 0, WARN: 0, FAIL: 1}


def make_check(
    gate: str,
    metric: str,
    comparison: Comparison,
    threshold: float,
    value: float | None,
    *,
    level: str,
    missing: str = "no eligible cases",
    detail: str = "",
) -> Check:
    """A check that ``value comparison threshold`` holds; a None value fails."""
    if value is None:
        holds = False
        message = f"{metric} could not be computed ({missing})"
    else:
        holds = value >= threshold if comparison == ">=" else value <= threshold
        verb = "" if holds else "violates "
        message = f"{metric} {value:.4g} {verb}{comparison} {threshold:g}"
    if detail:
        message += f" ({detail})"
    status = PASS if holds else (FAIL if level == "requirement" else WARN)
    return {
        "gate": gate,
        "level": level,
        "metric": metric,
        "comparison": comparison,
        "threshold": threshold,
        "value": value,
        "status": status,
        "message": message,
    }


def overall_status(checks: list[Check]) -> str:
    statuses = {c["status"] for c in checks}
    if FAIL in statuses:
        return FAIL
    if WARN in statuses:
        return WARN
    return PASS


def exit_code(status: str, *, fail_on_warn: bool = False) -> int:
    """0 for pass (and warn unless ``fail_on_warn``), 1 for fail."""
    return 1 if status == FAIL or (fail_on_warn and status == WARN) else 0
