"""The properties feature's part of the evaluation step and its checks (the interface:
features.py).

For a contract that enables at least one metamorphic property, its group gains
``property_results``, partitioned by target like ``case_results`` (a part of the evaluation
step, ``defs/assets/evaluation.py``): the enabled properties run with the contract's ``fuzz``
settings through the target's backend, the golden results of the same partition serving as the
originals (no second call for them). It has a check per property gate in DecGuard's order, named
as the CLI names the gate (``<property>.max_error_rate``, ``.max_violation_rate``,
``.max_flip_rate``): requirements are ERROR checks (a failing one blocks the target's approval),
warnings WARN. The DecGuard ``report`` waits for ``property_results`` and becomes the mode
``all`` report (golden gates, the ``properties`` section and the property checks), as
``decguard-pipeline test --all`` writes it. Contracts without properties get nothing here.

(No ``from __future__ import annotations``: Dagster reads the context annotations.)
"""

from collections.abc import Mapping
from typing import Any

import dagster as dg

from decguard_pipeline.defs.assets.base import TargetPart, asset_key
from decguard_pipeline.defs.gate_checks import Gate, PartGates
from decguard_pipeline.defs.gate_checks import check_result as gate_result
from decguard_pipeline.defs.metadata.properties import materialisation_metadata
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.steps.properties import check_rows, gate_list, has_properties, run_target

NAME = "property_results"


def enabled(entry: ContractEntry) -> bool:
    return entry.ok and has_properties(entry.require())


def parts(entry: ContractEntry) -> list[TargetPart]:
    return [_property_results(entry)] if enabled(entry) else []


def report_inputs(entry: ContractEntry) -> list[dg.AssetKey]:
    """The report waits for the properties: it carries their section and checks (a failing
    property requirement blocks the target's approval, not the report)."""
    return [asset_key(entry, NAME)] if enabled(entry) else []


def extras(entries: list[ContractEntry], jobs: dict[str, Any]) -> dict[str, list[Any]]:
    return {}  # the contract's evaluate job selects its whole group, properties included


def _property_results(entry: ContractEntry) -> TargetPart:
    names = list(entry.require().contract.properties.enabled())
    gates = [
        Gate(check_name(g), level, g, f"{level} {g}") for g, level in gate_list(entry.require())
    ]
    return TargetPart(
        NAME,
        run=run_target,
        metadata=materialisation_metadata,
        description=(
            f"Metamorphic properties ({', '.join(names)}) through the target's backend; the "
            "originals are the newest case_results of the partition (not sent again)."
        ),
        gates=PartGates(gates, load=check_rows, result=check_result),
    )


def check_name(gate: str) -> str:
    """The Dagster check name of a property gate: the CLI's name, ``option_order.max_error_rate``
    (Dagster allows the dot in a check name: it makes the check's output name from it with
    the dot replaced)."""
    return gate


def check_result(row: Mapping[str, Any], asset: dg.AssetKey, name: str) -> dg.AssetCheckResult:
    """A stored property check, with the property it belongs to."""
    return gate_result(row, asset, name, {"property": row["property"]})
