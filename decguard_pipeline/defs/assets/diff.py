"""Dagster assets and checks of the diff feature (the interface: features.py).

Every contract's group gains ``regression_diff``, partitioned by target like ``case_results``
and downstream of it only: a candidate whose golden requirements fail is exactly the one whose
diff matters, so the diff never waits for the golden checks. The baseline is chosen by the
contract's ``pipeline.baseline`` rule (``core.diff.choose_baseline``) from what the warehouse
knows and recorded with the diff. One multi-asset check on it has a check per regression gate
in DecGuard's order (requirements, the implicit ``max_error_rate_increase``, warnings):
requirements are ERROR checks (a failing one blocks the target's approval), warnings WARN.
A candidate without a baseline
materialises with status ``no_baseline`` and its checks pass, saying so.

(No ``from __future__ import annotations``: Dagster reads the context annotations.)
"""

from collections.abc import Mapping
from typing import Any

import dagster as dg

from decguard_pipeline.defs.assets.base import asset_key, target_asset
from decguard_pipeline.defs.gate_checks import Gate, check_name, gate_checks
from decguard_pipeline.defs.gate_checks import check_result as gate_result
from decguard_pipeline.defs.metadata.diff import check_metadata, materialisation_metadata
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.steps.diff import check_rows, diff_target, regression_gates

NAME = "regression_diff"


def assets(entry: ContractEntry) -> list[dg.AssetsDefinition]:
    return [_regression_diff(entry)] if entry.ok else []


def checks(entry: ContractEntry) -> list[dg.AssetChecksDefinition]:
    return [_regression_checks(entry)] if entry.ok else []


def report_inputs(entry: ContractEntry) -> list[dg.AssetKey]:
    return []  # the DecGuard report of a target does not depend on any other target


def extras(entries: list[ContractEntry], jobs: dict[str, Any]) -> dict[str, list[Any]]:
    return {}  # the contract's evaluate job selects its whole group, the diff included


def _regression_diff(entry: ContractEntry) -> dg.AssetsDefinition:
    return target_asset(
        entry,
        NAME,
        run=diff_target,
        metadata=materialisation_metadata,
        kinds=frozenset({"python", "parquet", "json"}),
        description=(
            "DecGuard's regression diff of the target's newest evaluation against its baseline "
            "(pipeline.baseline: pinned target, a backend's newest passing target, or by "
            "default the previous passing version of the same backend, else the default "
            "backend's); the diff JSON next to the report files."
        ),
    )


def _regression_checks(entry: ContractEntry) -> dg.AssetChecksDefinition:
    gates = [
        Gate(
            check_name(gate, level),
            level,
            (gate, level),
            f"regression {level} {gate} (against the chosen baseline)",
        )
        for gate, level in regression_gates(entry.require())
    ]
    return gate_checks(
        entry,
        asset_key(entry, NAME),
        gates,
        name=f"{entry.key}_regression_gates",
        description="DecGuard's regression gates: a failing requirement (ERROR) blocks the "
        "target's approval, warnings warn.",
        load=check_rows,
        result=check_result,
    )


def check_result(row: Mapping[str, Any], asset: dg.AssetKey, name: str) -> dg.AssetCheckResult:
    """A stored regression check: value, threshold, DecGuard's message, the baseline and how
    the gate was judged."""
    return gate_result(row, asset, name, check_metadata(row))
