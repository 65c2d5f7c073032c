"""Gates as asset checks on ``golden_metrics``, partitioned like it: requirements are ERROR
checks, warnings WARN checks; a failing requirement blocks the target's approval
(``defs/assets/verdict.py``), not its report."""

import dagster as dg

from decguard_pipeline.core.golden.gates import configured_gates
from decguard_pipeline.defs.assets.base import asset_key
from decguard_pipeline.defs.gate_checks import Gate, check_name, gate_checks
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.steps.golden import gate_results


def contract_checks(entry: ContractEntry) -> list[dg.AssetChecksDefinition]:
    if not entry.ok:
        return []
    contract = entry.require().contract
    gates = [
        Gate(check_name(gate, level), level, ("golden", gate, level), f"{level} {gate}")
        for gate, level, _ in configured_gates(contract.requirements, contract.warnings)
    ]
    return [
        gate_checks(
            entry,
            asset_key(entry, "golden_metrics"),
            gates,
            name=f"{entry.key}_golden_gates",
            description="DecGuard's golden gates: a failing requirement (ERROR) blocks the "
            "target's approval, warnings warn.",
            load=gate_results,
        )
    ]
