"""Gates as asset checks on ``golden_metrics``, partitioned like it: requirements are
blocking ERROR checks (a failure stops the report), warnings are WARN checks."""

from collections.abc import Iterator

import dagster as dg

from decguard_pipeline.defs.assets import asset_key
from decguard_pipeline.defs.partitions import targets_partitions
from decguard_pipeline.defs.resources import WarehouseResource
from decguard_pipeline.pipeline import steps
from decguard_pipeline.pipeline.contracts import ContractEntry


def golden_gates(entry: ContractEntry) -> list[tuple[str, str]]:
    """(gate, level) of every golden check, in DecGuard's order (implicit max_error_rate)."""
    contract = entry.require().contract
    required = list(contract.requirements.configured())
    if "max_error_rate" not in required:
        required.append("max_error_rate")
    return [(g, "requirement") for g in required] + [
        (g, "warning") for g in contract.warnings.configured()
    ]


def check_name(gate: str, level: str) -> str:
    return gate if level == "requirement" else f"{gate}_warning"


def result_of(row: dict, asset: dg.AssetKey) -> dg.AssetCheckResult:  # type: ignore[type-arg]
    """A stored gate check as Dagster's check result: value, threshold and DecGuard's message."""
    requirement = row["level"] == "requirement"
    return dg.AssetCheckResult(
        asset_key=asset,
        check_name=check_name(row["gate"], row["level"]),
        passed=row["status"] == "pass",
        severity=dg.AssetCheckSeverity.ERROR if requirement else dg.AssetCheckSeverity.WARN,
        description=row["message"],
        metadata={
            "value": dg.MetadataValue.float(row["value"]) if row["value"] is not None else "n/a",
            "threshold": row["threshold"],
            "comparison": row["comparison"],
            "metric": row["metric"],
            "message": row["message"],
            "level": row["level"],
        },
    )


def gate_specs(entry: ContractEntry) -> list[dg.AssetCheckSpec]:
    parts = targets_partitions(entry.key)
    return [
        dg.AssetCheckSpec(
            check_name(gate, level),
            asset=asset_key(entry, "golden_metrics"),
            blocking=level == "requirement",
            partitions_def=parts,
            description=f"{level} {gate}",
        )
        for gate, level in golden_gates(entry)
    ]


def contract_checks(entry: ContractEntry) -> list[dg.AssetChecksDefinition]:
    """One multi-check per contract: every gate is its own asset check, evaluated in one step
    (a step per gate would multiply Dagster's per-step bookkeeping for no benefit)."""
    if not entry.ok:
        return []
    gates = golden_gates(entry)

    @dg.multi_asset_check(
        specs=gate_specs(entry),
        name=f"{entry.key}_golden_gates",
        description="DecGuard's golden gates: requirements block the report, warnings warn.",
    )
    def golden_gate_checks(
        context: dg.AssetCheckExecutionContext, warehouse: WarehouseResource
    ) -> Iterator[dg.AssetCheckResult]:
        rows = steps.gate_results(entry, context.partition_key, warehouse.get())
        for gate, level in gates:
            yield result_of(rows[("golden", gate, level)], asset_key(entry, "golden_metrics"))

    return [golden_gate_checks]
