"""Gates as asset checks on ``golden_metrics``, partitioned like it: requirements are ERROR
checks, warnings WARN checks; a failing requirement blocks the target's approval
(``defs/assets/verdict.py``), not its report. DecGuard's golden gates and the calibration
measures' gates (``pipeline.requirements`` / ``pipeline.warnings``, checked on every golden
run: stored in ``gate_results`` with source ``calibration``)."""

from decguard_pipeline.core.contract import Contract
from decguard_pipeline.core.contract.extension_gates import CalibrationGates
from decguard_pipeline.core.golden.gates import configured_gates
from decguard_pipeline.defs.gate_checks import Gate, PartGates, check_name
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.steps.golden import COST_SOURCE, gate_results


def calibration_gates(contract: Contract) -> list[Gate]:
    """The contract's calibration gates (none without pipeline.calibration_measures' gates)."""
    p = contract.pipeline
    if p is None:
        return []
    levels = (("requirement", p.requirements), ("warning", p.warnings))
    return [
        Gate(check_name(gate, level), level, ("calibration", gate, level), f"{level} {gate}")
        for level, gates in levels
        for gate in gates.owned(CalibrationGates)
    ]


def golden_gates(entry: ContractEntry) -> PartGates:
    """The checks of ``golden_metrics``: DecGuard's golden gates, the calibration gates and the
    pipeline's cost gates (a failing requirement, ERROR, blocks the target's approval;
    warnings warn)."""
    contract = entry.require().contract
    gates = [
        Gate(check_name(gate, level), level, ("golden", gate, level), f"{level} {gate}")
        for gate, level, _ in configured_gates(contract.requirements, contract.warnings)
    ] + calibration_gates(contract)
    gates += cost_gates(entry)
    return PartGates(gates, load=gate_results)


def cost_gates(entry: ContractEntry) -> list[Gate]:
    """``max_cost_per_1000`` of ``pipeline.requirements`` / ``pipeline.warnings``: checked on
    every target's golden run, stored with the golden gates (source ``cost``)."""
    pipeline = entry.require().contract.pipeline
    if pipeline is None:
        return []
    levels = (("requirement", pipeline.requirements), ("warning", pipeline.warnings))
    return [
        Gate(check_name(gate, level), level, (COST_SOURCE, gate, level), f"{level} {gate} (cost)")
        for level, gates in levels
        for gate in gates.cost()
    ]
