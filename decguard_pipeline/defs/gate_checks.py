"""Gates as asset checks, for every feature: every gate of an asset is its own partitioned
check (requirements ERROR, warnings WARN), evaluated in the step that materialises the asset
(a check spec of the evaluation step, ``defs/assets/evaluation.py``; a multi-asset check for
an asset with a step of its own, the daily production check), named as the CLI names
the gate where Dagster allows it (``option_order.max_violation_rate``; a warning gate gets
``_warning``, since requirement and warning of one gate need two names).

The checks record; they do not block. A Dagster-blocking check that fails fails its step, and
so the run, and skips every asset after it: a model failing its gates would look like a
crash and leave no report. Promotion is blocked instead by the ``verdict`` asset
(``defs/assets/verdict.py``), per target, from the same stored check rows.

A step per gate would multiply Dagster's per-step bookkeeping for no benefit; the stored check
rows (written by the asset) are read once and each becomes a check result carrying the value
and the threshold as numbers, and DecGuard's message."""

import re
from collections.abc import Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import dagster as dg

from decguard_pipeline.defs.metadata.base import numbers as numbers_metadata
from decguard_pipeline.defs.partitions import targets_partitions
from decguard_pipeline.defs.resources import WarehouseResource
from decguard_pipeline.steps.contracts import ContractEntry
from decguard_pipeline.warehouse import Warehouse


@dataclass(frozen=True)
class Gate:
    name: str  # the check's name (an identifier)
    level: str  # requirement | warning
    key: Hashable  # how its stored row is found
    description: str


def check_name(gate: str, level: str) -> str:
    """``min_accuracy`` for a requirement, ``min_accuracy_warning`` for the same warning gate."""
    return gate if level == "requirement" else f"{gate}_warning"


# a zero printed with its sign (``accuracy_drop -0 <= 0.02``, DecGuard's message for a drop of
# -0.0): the UI shows it unsigned, the stored message keeps DecGuard's bytes
SIGNED_ZERO = re.compile(r"(?<![\w.])-0(?![\w.])")


def shown(message: str) -> str:
    """A check's message as the UI shows it: no ``-0``."""
    return SIGNED_ZERO.sub("0", message)


def check_result(
    row: Mapping[str, Any], asset: dg.AssetKey, name: str, extra: dict[str, Any] | None = None
) -> dg.AssetCheckResult:
    """A stored check (gate_results columns) as Dagster's check result."""
    requirement = row["level"] == "requirement"
    value, threshold = row["value"], row["threshold"]
    numbers = {"value": value, "threshold": threshold}
    message = shown(row["message"])
    return dg.AssetCheckResult(
        asset_key=asset,
        check_name=name,
        passed=row["status"] == "pass",
        severity=dg.AssetCheckSeverity.ERROR if requirement else dg.AssetCheckSeverity.WARN,
        description=message,
        metadata={
            # numbers rounded as every single number the UI shows (a value that could not be
            # computed is left out: the message says why)
            **numbers_metadata(numbers),
            "comparison": row["comparison"],
            "metric": row["metric"],
            "message": message,
            "level": row["level"],
            **(extra or {}),
        },
    )


# (entry, partition key, warehouse, run id) -> stored rows by Gate.key; the rows the asset
# wrote in the same run when there are any (two runs of one partition may overlap)
RowLoader = Callable[[ContractEntry, str, Warehouse, str], Mapping[Hashable, Mapping[str, Any]]]
# (row, asset, check name) -> result, for features that add metadata of their own
ResultBuilder = Callable[[Mapping[str, Any], dg.AssetKey, str], dg.AssetCheckResult]


@dataclass(frozen=True)
class PartGates:
    """The gates of one asset as asset checks: how their stored rows are found (``load``)
    and turned into results (``result``)."""

    gates: list[Gate]
    load: RowLoader
    result: ResultBuilder = check_result


def check_specs(
    asset: dg.AssetKey, gates: list[Gate], partitions_def: dg.PartitionsDefinition
) -> list[dg.AssetCheckSpec]:
    return [
        dg.AssetCheckSpec(
            gate.name,
            asset=asset,
            blocking=False,  # see the module's docstring
            partitions_def=partitions_def,
            description=gate.description,
        )
        for gate in gates
    ]


def check_results(
    entry: ContractEntry,
    asset: dg.AssetKey,
    gates: list[Gate],
    rows: Mapping[Hashable, Mapping[str, Any]],
    log: Any,
    *,
    result: ResultBuilder = check_result,
    selected: Callable[[str], bool] = lambda name: True,
) -> Iterator[dg.AssetCheckResult]:
    """A result per (selected) gate from its row in ``rows`` (by ``Gate.key``); a gate
    without a row is one the contract no longer has (logged, no result)."""
    for gate in gates:
        if not selected(gate.name):
            continue
        row = rows.get(gate.key)
        if row is None:  # the contract changed since the definitions were loaded
            log.warning(f"{gate.name}: no longer in {entry.path}")
            continue
        yield result(row, asset, gate.name)


def gate_checks(
    entry: ContractEntry,
    asset: dg.AssetKey,
    gates: list[Gate],
    *,
    name: str,
    description: str,
    load: RowLoader,
    result: ResultBuilder = check_result,
    partitions_def: dg.PartitionsDefinition | None = None,
) -> dg.AssetChecksDefinition:
    """The gates of an asset with a step of its own (the daily production check) as one
    multi-asset check; the per-target assets carry theirs (defs/assets/evaluation.py)."""
    # the asset's partitions: targets unless the feature partitions otherwise (daily checks)
    parts = targets_partitions(entry.key) if partitions_def is None else partitions_def

    @dg.multi_asset_check(
        specs=check_specs(asset, gates, parts), name=name, description=description
    )
    def _gate_checks(
        context: dg.AssetCheckExecutionContext, warehouse: WarehouseResource
    ) -> Iterator[dg.AssetCheckResult]:
        rows = load(entry, context.partition_key, warehouse.get(), context.run.run_id)
        yield from check_results(entry, asset, gates, rows, context.log, result=result)

    return _gate_checks
