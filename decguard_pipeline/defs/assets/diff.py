"""The diff feature's part of the evaluation step and its checks (the interface: features.py).

Every contract's group gains ``regression_diff``, partitioned by target like ``case_results``
and downstream of it only: a candidate whose golden requirements fail is exactly the one whose
diff matters, so the diff never waits for the golden checks (a part of the evaluation step,
``defs/assets/evaluation.py``). The baseline is chosen by the
contract's ``pipeline.baseline`` rule (``core.diff.choose_baseline``) from what the warehouse
knows and recorded with the diff. It has a check per regression gate
in DecGuard's order (requirements, the implicit ``max_error_rate_increase``, warnings):
requirements are ERROR checks (a failing one blocks the target's approval), warnings WARN.
A candidate without a baseline
materialises with status ``no_baseline`` and its checks pass, saying so.

(No ``from __future__ import annotations``: Dagster reads the context annotations.)
"""

from collections.abc import Mapping
from typing import Any

import dagster as dg

from decguard_pipeline.defs.assets.base import TargetPart
from decguard_pipeline.defs.gate_checks import Gate, PartGates, check_name
from decguard_pipeline.defs.gate_checks import check_result as gate_result
from decguard_pipeline.defs.metadata.diff import check_metadata, materialisation_metadata
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.steps.diff import check_rows, diff_target, regression_gates

NAME = "regression_diff"


def parts(entry: ContractEntry) -> list[TargetPart]:
    return [_regression_diff(entry)] if entry.ok else []


def report_inputs(entry: ContractEntry) -> list[dg.AssetKey]:
    return []  # the DecGuard report of a target does not depend on any other target


def extras(entries: list[ContractEntry], jobs: dict[str, Any]) -> dict[str, list[Any]]:
    return {}  # the contract's evaluate job selects its whole group, the diff included


def _regression_diff(entry: ContractEntry) -> TargetPart:
    return TargetPart(
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
        gates=PartGates(_regression_gates(entry), load=check_rows, result=check_result),
    )


def _regression_gates(entry: ContractEntry) -> list[Gate]:
    return [
        Gate(
            check_name(gate, level),
            level,
            (gate, level),
            f"regression {level} {gate} (against the chosen baseline)",
        )
        for gate, level in regression_gates(entry.require())
    ]


def check_result(row: Mapping[str, Any], asset: dg.AssetKey, name: str) -> dg.AssetCheckResult:
    """A stored regression check: value, threshold, DecGuard's message, the baseline and how
    the gate was judged."""
    return gate_result(row, asset, name, check_metadata(row))
