"""Gates as asset checks on ``golden_metrics``, partitioned like it: requirements are
blocking ERROR checks (a failure stops the report), warnings are WARN checks."""

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


def result_of(row: dict) -> dg.AssetCheckResult:  # type: ignore[type-arg]
    """A stored gate check as Dagster's check result: value, threshold and DecGuard's message."""
    requirement = row["level"] == "requirement"
    return dg.AssetCheckResult(
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


def gate_check(entry: ContractEntry, gate: str, level: str) -> dg.AssetChecksDefinition:
    parts = targets_partitions(entry.key)

    @dg.asset_check(
        asset=asset_key(entry, "golden_metrics"),
        name=check_name(gate, level),
        blocking=level == "requirement",
        partitions_def=parts,
        description=f"{level} {gate}",
    )
    def _check(
        context: dg.AssetCheckExecutionContext, warehouse: WarehouseResource
    ) -> dg.AssetCheckResult:
        return result_of(
            steps.gate_result(entry, context.partition_key, warehouse.get(), gate, level)
        )

    return _check


def contract_checks(entry: ContractEntry) -> list[dg.AssetChecksDefinition]:
    if not entry.ok:
        return []
    return [gate_check(entry, gate, level) for gate, level in golden_gates(entry)]
