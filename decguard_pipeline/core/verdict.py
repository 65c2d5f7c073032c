"""A target's verdict over every check of its evaluation, and whether it may be a baseline.

The checks come in kinds: DecGuard's golden gates, the property gates, the guard extension's
gates (per suite) and the regression gates against the target's baseline. The verdict is the
worst status of them all (FAIL when a requirement fails, WARN when only warnings do, else
PASS); the target is *approved* (may replace the baseline of later versions) when no
requirement of any kind fails. Warnings never block approval.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from decguard_pipeline.core.gates import FAIL, PASS, WARN, overall_status

GOLDEN, PROPERTIES, GUARD, REGRESSION = "golden", "properties", "guard", "regression"
KINDS = (GOLDEN, PROPERTIES, GUARD, REGRESSION)


@dataclass(frozen=True)
class Verdict:
    status: str  # pass | warn | fail
    approved: bool
    failing: list[str] = field(default_factory=list)  # check names, in KINDS order
    warned: list[str] = field(default_factory=list)
    statuses: dict[str, str] = field(default_factory=dict)  # per kind that has checks


def check_label(kind: str, check: Mapping[str, Any]) -> str:
    """How a check is named in a verdict: DecGuard's gate name for golden and property gates
    (``max_ece``, ``option_order.max_violation_rate``), the kind first for the others
    (``regression max_accuracy_drop``, ``guard min_auroc (adversarial)``)."""
    gate = str(check["gate"])
    if kind in (GOLDEN, PROPERTIES):
        return gate
    suite = check.get("suite")
    return f"{kind} {gate}" + (f" ({suite})" if suite else "")


def _labels(kind: str, checks: Sequence[Mapping[str, Any]], status: str) -> list[str]:
    out: list[str] = []
    for check in checks:
        label = check_label(kind, check)
        if check["status"] == status and label not in out:
            out.append(label)
    return out


def decide(checks: Mapping[str, Sequence[Mapping[str, Any]]]) -> Verdict:
    """The verdict over the checks of each kind (kinds without checks are left out)."""
    failing: list[str] = []
    warned: list[str] = []
    statuses: dict[str, str] = {}
    for kind in [*KINDS, *(k for k in checks if k not in KINDS)]:
        rows = checks.get(kind)
        if not rows:
            continue
        statuses[kind] = overall_status([dict(r) for r in rows])
        failing += _labels(kind, rows, FAIL)
        warned += _labels(kind, rows, WARN)
    status = FAIL if failing else (WARN if warned else PASS)
    return Verdict(status, not failing, failing, warned, statuses)
