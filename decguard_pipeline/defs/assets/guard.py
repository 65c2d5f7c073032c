"""The guard feature's part of the evaluation step and its checks (the interface: features.py).

For a contract that enables the guard extension (``pipeline.guard``, ``calibration``,
``risk_coverage``, ``suites``, ``partial_runs`` or extension gates), its group gains
``guard_metrics``, partitioned by target like ``case_results`` (a part of the evaluation step,
``defs/assets/evaluation.py``), with a check per extension gate, ``partial_runs`` and (with
suites) ``suite_gates``. A failing extension requirement blocks the target's approval
(``defs/assets/verdict.py``) as a failing golden requirement does; the DecGuard ``report`` is
not built from the guard and does not wait for it. Contracts without the extension get nothing
here.

(No ``from __future__ import annotations``: Dagster reads the context annotations.)
"""

from collections.abc import Mapping
from typing import Any

import dagster as dg

from decguard_pipeline.core.errors import DecGuardError
from decguard_pipeline.core.guard.extension import GuardConfig, guard_enabled
from decguard_pipeline.defs.assets.base import TargetPart, broken_part
from decguard_pipeline.defs.gate_checks import Gate, PartGates, check_name
from decguard_pipeline.defs.gate_checks import check_result as gate_result
from decguard_pipeline.defs.metadata.guard import check_metadata, materialisation_metadata
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.steps.guard import (
    PARTIAL_RUNS,
    SUITE_GATES,
    check_outcomes,
    config_of,
    gate_list,
    measure_target,
    planned_suites,
)

NAME = "guard_metrics"


def enabled(entry: ContractEntry) -> bool:
    return entry.ok and guard_enabled(entry.require().contract)


def parts(entry: ContractEntry) -> list[TargetPart]:
    if not enabled(entry):
        return []
    try:
        config = config_of(entry)
    except DecGuardError as exc:
        return [broken_part(NAME, "BROKEN GUARD SETTINGS", str(exc))]
    return [_guard_metrics(entry, gates(entry, config))]


def gates(entry: ContractEntry, config: GuardConfig) -> list[Gate]:
    """One check per guard gate (:func:`steps.guard.gate_list`): its name, level, the key of
    its aggregated outcome in ``check_outcomes`` and its description."""
    return [
        Gate(_name(gate, level), level, (gate, level), _describe(gate, level))
        for gate, level in gate_list(entry.require(), config)
    ]


def report_inputs(entry: ContractEntry) -> list[dg.AssetKey]:
    """None: DecGuard's report is not built from the guard (the verdict waits for it)."""
    return []


def extras(entries: list[ContractEntry], jobs: dict[str, Any]) -> dict[str, list[Any]]:
    return {}  # the contract's evaluate job selects its whole group, guard included


def _guard_metrics(entry: ContractEntry, gates: list[Gate]) -> TargetPart:
    suites = planned_suites(entry.require())
    return TargetPart(
        NAME,
        run=measure_target,
        metadata=materialisation_metadata,
        description=(
            "Guard metrics, honest calibration and risk-coverage for every suite "
            f"({', '.join(suites)}); the main dataset from the newest case_results, the other "
            "suites through the target's backend. Pictures next to the report."
        ),
        gates=PartGates(gates, load=check_outcomes, result=check_result),
    )


def _name(gate: str, level: str) -> str:
    if gate in (PARTIAL_RUNS, SUITE_GATES):
        return gate
    return check_name(gate, level)


def _describe(gate: str, level: str) -> str:
    if gate == PARTIAL_RUNS:
        return "drop rate of every suite: warning from warn_from, partial above partial_above"
    if gate == SUITE_GATES:
        return "DecGuard's own gates on every suite besides the main dataset"
    return f"{level} {gate} (every suite)"


def check_result(outcome: Mapping[str, Any], asset: dg.AssetKey, name: str) -> dg.AssetCheckResult:
    """An aggregated guard check: value, threshold and message of the worst suite, and every
    suite's outcome. A failing requirement is an ERROR (it blocks the approval), anything
    else a WARN."""
    return gate_result(outcome, asset, name, check_metadata(outcome))
