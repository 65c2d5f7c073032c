"""Warehouse tables of the guard feature (documented in docs/warehouse.md).

Written by the ``guard_metrics`` asset (``steps/guard.py``) for contracts that enable
the guard extension. Every table is keyed by contract, target, run and time; ``suite`` names
the evaluated dataset (``main`` when the contract's own dataset is not one of its suites).
"""

import pyarrow as pa

from decguard_pipeline.warehouse.columns import _B, _D, _I, _S, keyed
from decguard_pipeline.warehouse.schema.golden import TABLES as _GOLDEN

_WHO = [("backend", _S), ("model_version", _S)]
_SPLIT = [("suite", _S), ("split_key", _S), ("split_value", _S)]


def _suite_case_results() -> pa.Schema:
    """``case_results`` with a ``suite`` column after the key columns."""
    golden = _GOLDEN["case_results"]
    fields = list(golden)
    return pa.schema([*fields[:4], pa.field("suite", _S), *fields[4:]])


def _guard_checks() -> pa.Schema:
    """``gate_results`` plus ``suite`` (the catalog's ``latest_all_checks`` unions by name)."""
    return pa.schema([*_GOLDEN["gate_results"], pa.field("suite", _S)])


TABLES: dict[str, pa.Schema] = {
    "guard_suites": pa.schema(
        keyed(
            [
                *_WHO,
                ("suite", _S),
                ("position", _I),
                ("is_main", _B),
                ("dataset_path", _S),
                ("dataset_hash", _S),
                ("n_cases", _I),
                ("n_labeled", _I),
                ("n_decided", _I),
                ("n_errored", _I),
                ("errors_by_kind_json", _S),
                ("drop_rate", _D),
                ("run_state", _S),
                ("decguard_status", _S),
                ("guard_status", _S),
                ("status", _S),
                ("reliability_png", _S),
                ("risk_coverage_png", _S),
                ("sidecar_path", _S),
            ]
        )
    ),
    "guard_metrics": pa.schema(
        keyed([*_WHO, *_SPLIT, ("label", _S), ("metric", _S), ("value", _D)])
    ),
    "guard_summary": pa.schema(
        keyed([*_WHO, ("aggregate", _S), ("metric", _S), ("value", _D), ("suite", _S)])
    ),
    "guard_reliability": pa.schema(
        keyed(
            [
                *_WHO,
                *_SPLIT,
                ("binning", _S),
                ("bin", _I),
                ("lower", _D),
                ("upper", _D),
                ("count", _I),
                ("mean_confidence", _D),
                ("accuracy", _D),
            ]
        )
    ),
    "guard_risk_coverage": pa.schema(
        keyed(
            [
                *_WHO,
                *_SPLIT,
                ("threshold", _D),
                ("kept", _I),
                ("handed_off", _I),
                ("coverage", _D),
                ("selective_accuracy", _D),
                ("selective_risk", _D),
                ("cost_per_1000", _D),
            ]
        )
    ),
    "suite_case_results": _suite_case_results(),
    "guard_checks": _guard_checks(),
}
