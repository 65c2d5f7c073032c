"""Warehouse tables of the diff feature (documented in docs/warehouse.md).

Written by the ``regression_diff`` asset (``steps/diff.py``): the candidate is the
partition's target, the baseline the target the contract's baseline rule chose. Every table is
keyed by contract, target (the candidate), run and time, then ``backend`` and
``model_version`` of the candidate (as in ``runs``) and ``baseline_target``. The ``diff_*``
statistics tables are written only for contracts with ``pipeline.statistics``.
"""

import pyarrow as pa

from decguard_pipeline.warehouse.columns import BOOL, DOUBLE, INT, STRING, TIMESTAMP, keyed
from decguard_pipeline.warehouse.schema.golden import TABLES as _GOLDEN

_WHO = [("backend", STRING), ("model_version", STRING), ("baseline_target", STRING)]

# the diff document's ``metrics`` section, in DecGuard's order
DIFF_METRICS = (
    "accuracy", "macro_f1", "ordinal_mae", "ece", "brier", "nll", "coverage", "error_rate",
    "latency_p50_ms", "latency_p95_ms",
)  # fmt: skip
COUNTS = (
    "baseline_cases", "candidate_cases", "matched", "only_in_baseline", "only_in_candidate",
    "compared", "answer_flips", "newly_wrong", "newly_correct", "newly_errored", "recovered",
    "still_errored",
)  # fmt: skip
SHIFT = (
    "answer_flip_rate", "mean_tv_distance", "max_tv_distance", "mean_js_divergence",
    "mean_confidence_delta", "mean_abs_confidence_delta", "max_abs_confidence_delta",
)  # fmt: skip
_SEGMENT = [("segment_key", STRING), ("segment_value", STRING)]


def _regression_checks() -> pa.Schema:
    """``gate_results`` plus the baseline and, with statistics, how the gate was judged (the
    catalog's ``latest_all_checks`` unions by name)."""
    extra = [
        ("baseline_target", STRING),
        ("mode", STRING),
        ("p_value", DOUBLE),
        ("alpha", DOUBLE),
        ("ci_low", DOUBLE),
        ("ci_high", DOUBLE),
        ("confidence", DOUBLE),
        ("test", STRING),
        *_SEGMENT,
    ]
    return pa.schema([*_GOLDEN["gate_results"], *(pa.field(n, t) for n, t in extra)])


TABLES: dict[str, pa.Schema] = {
    "diffs": pa.schema(
        keyed(
            [
                *_WHO,
                ("candidate_run_id", STRING),
                ("baseline_backend", STRING),
                ("baseline_model_version", STRING),
                ("baseline_run_id", STRING),
                ("baseline_rule", STRING),
                ("baseline_reason", STRING),
                ("baseline_created_at", TIMESTAMP),
                ("candidate_created_at", TIMESTAMP),
                ("status", STRING),
                ("exit_code", INT),
                ("same_dataset", BOOL),
                ("baseline_dataset_hash", STRING),
                ("candidate_dataset_hash", STRING),
                ("segment_by", pa.list_(STRING)),
                *((name, INT) for name in COUNTS),
                *((name, DOUBLE) for name in SHIFT),
                *(
                    (f"{metric}_{side}", DOUBLE)
                    for metric in DIFF_METRICS
                    for side in ("baseline", "candidate", "delta")
                ),
                ("worst_segment_key", STRING),
                ("worst_segment_value", STRING),
                ("worst_segment_accuracy_drop", DOUBLE),
                ("n_changes", INT),
                ("has_statistics", BOOL),
                ("diff_path", STRING),
                ("sidecar_path", STRING),
            ]
        )
    ),
    "diff_changes": pa.schema(
        keyed(
            [
                *_WHO,
                ("position", INT),
                ("case_id", STRING),
                ("kind", STRING),
                ("input_preview", STRING),
                ("input_json", STRING),
                ("expected", STRING),
                ("baseline_selected", STRING),
                ("candidate_selected", STRING),
                ("baseline_confidence", DOUBLE),
                ("candidate_confidence", DOUBLE),
                ("tv_distance", DOUBLE),
                ("error", STRING),
            ]
        )
    ),
    "diff_segments": pa.schema(
        keyed(
            [
                *_WHO,
                ("position", INT),
                *_SEGMENT,
                ("matched", INT),
                ("compared", INT),
                ("baseline_accuracy", DOUBLE),
                ("candidate_accuracy", DOUBLE),
                ("accuracy_drop", DOUBLE),
                ("answer_flip_rate", DOUBLE),
                ("gated", BOOL),
                ("is_worst", BOOL),
            ]
        )
    ),
    "regression_checks": _regression_checks(),
    "diff_intervals": pa.schema(
        keyed(
            [
                *_WHO,
                *_SEGMENT,
                ("gated", BOOL),
                ("matched", INT),
                ("metric", STRING),
                ("side", STRING),
                ("value", DOUBLE),
                ("low", DOUBLE),
                ("high", DOUBLE),
                ("confidence", DOUBLE),
                ("method", STRING),
                ("p_value_candidate_worse", DOUBLE),
                ("test", STRING),
            ]
        )
    ),
    "diff_tests": pa.schema(
        keyed(
            [
                *_WHO,
                *_SEGMENT,
                ("gated", BOOL),
                ("matched", INT),
                ("compared", INT),
                ("test", STRING),
                ("n_pairs", INT),
                ("baseline_only", INT),
                ("candidate_only", INT),
                ("p_value", DOUBLE),
                ("p_value_candidate_worse", DOUBLE),
            ]
        )
    ),
}
