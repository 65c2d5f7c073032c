"""Warehouse tables of the guard feature (documented in docs/warehouse.md).

Written by the ``guard_metrics`` asset (``steps/guard.py``; rows built by ``rows/guard.py``)
for contracts that enable the guard extension. Every table is keyed by contract, target, run
and time; ``suite`` names the evaluated dataset (``main`` when the contract's own dataset is
not one of its suites).
"""

import pyarrow as pa

from decguard_pipeline.warehouse.columns import BOOL, DOUBLE, INT, STRING, keyed
from decguard_pipeline.warehouse.schema.golden import RELIABILITY_BIN
from decguard_pipeline.warehouse.schema.golden import TABLES as _GOLDEN

_WHO = [("backend", STRING), ("model_version", STRING)]
_SPLIT = [("suite", STRING), ("split_key", STRING), ("split_value", STRING)]


def _suite_case_results() -> pa.Schema:
    """``case_results`` with a ``suite`` column after the key columns."""
    golden = _GOLDEN["case_results"]
    fields = list(golden)
    return pa.schema([*fields[:4], pa.field("suite", STRING), *fields[4:]])


def _guard_checks() -> pa.Schema:
    """``gate_results`` plus ``suite`` (the catalog's ``latest_all_checks`` unions by name)."""
    return pa.schema([*_GOLDEN["gate_results"], pa.field("suite", STRING)])


TABLES: dict[str, pa.Schema] = {
    "guard_suites": pa.schema(
        keyed(
            [
                *_WHO,
                ("suite", STRING),
                ("position", INT),
                ("is_main", BOOL),
                ("dataset_path", STRING),
                ("dataset_hash", STRING),
                ("n_cases", INT),
                ("n_labeled", INT),
                ("n_decided", INT),
                ("n_errored", INT),
                ("errors_by_kind_json", STRING),
                ("drop_rate", DOUBLE),
                ("run_state", STRING),
                ("decguard_status", STRING),
                ("guard_status", STRING),
                ("status", STRING),
                ("reliability_png", STRING),
                ("risk_coverage_png", STRING),
                ("sidecar_path", STRING),
            ]
        )
    ),
    "guard_metrics": pa.schema(
        keyed([*_WHO, *_SPLIT, ("label", STRING), ("metric", STRING), ("value", DOUBLE)])
    ),
    "guard_summary": pa.schema(
        keyed(
            [*_WHO, ("aggregate", STRING), ("metric", STRING), ("value", DOUBLE), ("suite", STRING)]
        )
    ),
    "guard_reliability": pa.schema(
        keyed(
            [
                *_WHO,
                *_SPLIT,
                ("binning", STRING),
                *RELIABILITY_BIN,
            ]
        )
    ),
    "guard_risk_coverage": pa.schema(
        keyed(
            [
                *_WHO,
                *_SPLIT,
                ("threshold", DOUBLE),
                ("kept", INT),
                ("handed_off", INT),
                ("coverage", DOUBLE),
                ("selective_accuracy", DOUBLE),
                ("selective_risk", DOUBLE),
                ("cost_per_1000", DOUBLE),
            ]
        )
    ),
    "guard_thresholds": pa.schema(
        keyed(
            [
                *_WHO,
                *_SPLIT,
                ("label", STRING),
                ("kind", STRING),
                ("target_value", DOUBLE),  # ``target`` is the partition's target key
                ("threshold", DOUBLE),
                ("tp", INT),
                ("fp", INT),
                ("tn", INT),
                ("fn", INT),
                ("precision", DOUBLE),
                ("recall", DOUBLE),
                ("f1", DOUBLE),
                ("fpr", DOUBLE),
                ("fnr", DOUBLE),
                ("reason", STRING),
            ]
        )
    ),
    "suite_case_results": _suite_case_results(),
    "guard_checks": _guard_checks(),
}
