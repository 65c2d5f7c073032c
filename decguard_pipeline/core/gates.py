"""Gates become checks: PASS, WARN (a warning gate fails) or FAIL (a requirement fails).

A gate holds inclusively; a metric that could not be computed never holds, since the
property was not demonstrated.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
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


def levelled(
    requirements: Mapping[str, float], warnings: Mapping[str, float]
) -> Iterator[tuple[str, str, float]]:
    """(level, gate, threshold) of the requirements, then of the warnings, each in its order."""
    for level, gates in (("requirement", requirements), ("warning", warnings)):
        for gate, threshold in gates.items():
            yield level, gate, threshold


def table_check(
    table: Mapping[str, tuple[str, Comparison]],
    gate: str,
    threshold: float,
    value: float | None,
    *,
    level: str,
    missing: str,
    detail: str = "",
) -> Check:
    """``make_check`` of a gate of a gate table (gate -> (metric, comparison))."""
    metric, comparison = table[gate]
    return make_check(
        gate, metric, comparison, threshold, value, level=level, missing=missing, detail=detail
    )


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


STATUS_RANK = {PASS: 0, WARN: 1, FAIL: 2}


def badness(check: Check) -> float:
    """How far a check's value is from holding, to rank checks of one gate (a value that
    could not be computed is the worst)."""
    value = check["value"]
    if value is None:
        return float("inf")
    return -value if check["comparison"] == ">=" else value


def combine_checks(
    checks: list[Check],
    gate: str,
    *,
    parts: str,
    fields: tuple[str, ...],
    message: Callable[[Check], str] = lambda check: str(check["message"]),
) -> Check:
    """One check standing for the checks of one gate measured on several parts (suites,
    segments): the worst check's fields (value, threshold, metric…) with the worst status,
    ``level`` requirement when any part failed, the ``message`` of every part that does not
    pass (else the worst one's), and each part's ``fields`` under ``parts``."""
    worst = max(checks, key=lambda c: (STATUS_RANK[c["status"]], badness(c)))
    failing = [c for c in checks if c["status"] != PASS] or [worst]
    return {
        **worst,
        "gate": gate,
        "level": "requirement" if any(c["status"] == FAIL for c in checks) else worst["level"],
        "status": overall_status(checks),
        "message": "; ".join(map(message, failing)),
        parts: [{k: c[k] for k in fields} for c in checks],
    }
