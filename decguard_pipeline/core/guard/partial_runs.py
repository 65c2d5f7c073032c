"""Partial runs: how much of the dataset the metrics are really about.

Errored cases have no decision, so every metric is computed without them; a run that lost a
fifth of its cases says little about the model. The drop rate (errored / all cases) puts the
run in one of three states: ``normal`` below ``warn_from`` (5%), ``warning`` from there up to
and including ``partial_above`` (20%), ``partial`` beyond. See docs/contracts.md.
"""

from __future__ import annotations

from typing import Any

from decguard_pipeline.core.gates import FAIL, PASS, WARN, Check
from decguard_pipeline.core.results import CaseResults

NORMAL, WARNING, PARTIAL = "normal", "warning", "partial"
WARN_FROM = 0.05
PARTIAL_ABOVE = 0.20


def drop_rate(n_total: int, n_errored: int) -> float:
    """Errored / total; 0 for an empty run (nothing was dropped)."""
    return n_errored / n_total if n_total else 0.0


def run_state(
    rate: float, *, warn_from: float = WARN_FROM, partial_above: float = PARTIAL_ABOVE
) -> str:
    """``normal``, ``warning`` or ``partial`` for a drop rate."""
    if rate > partial_above:
        return PARTIAL
    if rate >= warn_from and rate > 0.0:
        return WARNING
    return NORMAL


def run_summary(
    results: CaseResults, *, warn_from: float = WARN_FROM, partial_above: float = PARTIAL_ABOVE
) -> dict[str, Any]:
    """The run section: counts, drop rate, state and the limits used."""
    total = len(results)
    errored = total - int(results.ok.sum())
    rate = drop_rate(total, errored)
    return {
        "total": total,
        "decided": total - errored,
        "errored": errored,
        "errors_by_kind": results.errors_by_kind(),
        "drop_rate": rate,
        "state": run_state(rate, warn_from=warn_from, partial_above=partial_above),
        "warn_from": warn_from,
        "partial_above": partial_above,
    }


def partial_run_check(run: dict[str, Any], *, fail_partial: bool = False) -> Check:
    """The run state as a check (same keys as gate checks): a warning run warns, a partial
    run warns too, or fails when ``fail_partial``."""
    state, rate = run["state"], run["drop_rate"]
    failing = fail_partial and state == PARTIAL
    status = {NORMAL: PASS, WARNING: WARN, PARTIAL: FAIL if failing else WARN}[state]
    limit = run["partial_above"] if state == PARTIAL else run["warn_from"]
    if state == NORMAL:
        message = f"drop_rate {rate:.4g} < {run['warn_from']:g}: normal run"
    elif state == WARNING:
        message = f"drop_rate {rate:.4g} >= {limit:g}: run flagged (warning)"
    else:
        message = f"drop_rate {rate:.4g} > {limit:g}: partial run"
    message += f" ({run['errored']} of {run['total']} cases errored)"
    return {
        "gate": "partial_runs",
        # a flagged (warning) run is never more than a warning
        "level": "requirement" if fail_partial and state != WARNING else "warning",
        "metric": "drop_rate",
        "comparison": "<",
        "threshold": run["warn_from"],
        "value": rate,
        "status": status,
        "message": message,
    }
