"""Dagster assets and checks of the properties feature (the interface: features.py).

For a contract that enables at least one metamorphic property, its group gains
``property_results``, partitioned by target like ``case_results``: the enabled properties run
with the contract's ``fuzz`` settings through the target's backend, the golden results of the
same partition serving as the originals (no second call for them). One multi-asset check on it
has a check per property gate in DecGuard's order, named as the CLI names the gate
(``<property>.max_error_rate``, ``.max_violation_rate``, ``.max_flip_rate``): requirements
are ERROR checks (a failing one blocks the target's approval), warnings WARN. The DecGuard
``report`` waits for ``property_results`` and becomes the mode
``all`` report (golden gates, the ``properties`` section and the property checks), as
``decguard-pipeline test --all`` writes it. Contracts without properties get nothing here.

(No ``from __future__ import annotations``: Dagster reads the context annotations.)
"""

from collections.abc import Mapping
from typing import Any

import dagster as dg

from decguard_pipeline.defs.assets.base import asset_key, target_asset
from decguard_pipeline.defs.gate_checks import Gate, gate_checks
from decguard_pipeline.defs.gate_checks import check_result as gate_result
from decguard_pipeline.defs.metadata.properties import materialisation_metadata
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.steps.properties import check_rows, gate_list, has_properties, run_target

NAME = "property_results"


def enabled(entry: ContractEntry) -> bool:
    return entry.ok and has_properties(entry.require())


def assets(entry: ContractEntry) -> list[dg.AssetsDefinition]:
    return [_property_results(entry)] if enabled(entry) else []


def checks(entry: ContractEntry) -> list[dg.AssetChecksDefinition]:
    if not enabled(entry):
        return []
    return [_property_checks(entry, gate_list(entry.require()))]


def report_inputs(entry: ContractEntry) -> list[dg.AssetKey]:
    """The report waits for the properties: it carries their section and checks (a failing
    property requirement blocks the target's approval, not the report)."""
    return [asset_key(entry, NAME)] if enabled(entry) else []


def extras(entries: list[ContractEntry], jobs: dict[str, Any]) -> dict[str, list[Any]]:
    return {}  # the contract's evaluate job selects its whole group, properties included


def _property_results(entry: ContractEntry) -> dg.AssetsDefinition:
    names = list(entry.require().contract.properties.enabled())
    return target_asset(
        entry,
        NAME,
        run=run_target,
        metadata=materialisation_metadata,
        description=(
            f"Metamorphic properties ({', '.join(names)}) through the target's backend; the "
            "originals are the newest case_results of the partition (not sent again)."
        ),
    )


def check_name(gate: str) -> str:
    """The Dagster check name of a property gate: the CLI's name, ``option_order.max_error_rate``
    (Dagster allows the dot in a check name: it makes the check's output name from it with
    the dot replaced)."""
    return gate


def check_result(row: Mapping[str, Any], asset: dg.AssetKey, name: str) -> dg.AssetCheckResult:
    """A stored property check, with the property it belongs to."""
    return gate_result(row, asset, name, {"property": row["property"]})


def _property_checks(
    entry: ContractEntry, gates: list[tuple[str, str]]
) -> dg.AssetChecksDefinition:
    specs = [Gate(check_name(gate), level, gate, f"{level} {gate}") for gate, level in gates]
    return gate_checks(
        entry,
        asset_key(entry, NAME),
        specs,
        name=f"{entry.key}_property_gates",
        description="DecGuard's property checks: a failing requirement (ERROR) blocks the "
        "target's approval, warnings warn.",
        load=check_rows,
        result=check_result,
    )
