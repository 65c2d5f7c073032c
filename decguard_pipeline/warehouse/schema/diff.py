"""Warehouse tables of the diff feature (documented in docs/warehouse.md).

Written by the ``regression_diff`` asset (``steps/diff.py``): the candidate is the
partition's target, the baseline the target the contract's baseline rule chose. Every table is
keyed by contract, target (the candidate), run and time, then ``backend`` and
``model_version`` of the candidate (as in ``runs``) and ``baseline_target``. The ``diff_*``
statistics tables are written only for contracts with ``pipeline.statistics``.
"""

import pyarrow as pa

from decguard_pipeline.warehouse.columns import _B, _D, _I, _S, _TS, keyed
from decguard_pipeline.warehouse.schema.golden import TABLES as _GOLDEN

_WHO = [("backend", _S), ("model_version", _S), ("baseline_target", _S)]

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
_SEGMENT = [("segment_key", _S), ("segment_value", _S)]


def _regression_checks() -> pa.Schema:
    """``gate_results`` plus the baseline and, with statistics, how the gate was judged (the
    catalog's ``latest_all_checks`` unions by name)."""
    extra = [
        ("baseline_target", _S),
        ("mode", _S),
        ("p_value", _D),
        ("alpha", _D),
        ("ci_low", _D),
        ("ci_high", _D),
        ("confidence", _D),
        ("test", _S),
        *_SEGMENT,
    ]
    return pa.schema([*_GOLDEN["gate_results"], *(pa.field(n, t) for n, t in extra)])


TABLES: dict[str, pa.Schema] = {
    "diffs": pa.schema(
        keyed(
            [
                *_WHO,
                ("candidate_run_id", _S),
                ("baseline_backend", _S),
                ("baseline_model_version", _S),
                ("baseline_run_id", _S),
                ("baseline_rule", _S),
                ("baseline_reason", _S),
                ("baseline_created_at", _TS),
                ("candidate_created_at", _TS),
                ("status", _S),
                ("exit_code", _I),
                ("same_dataset", _B),
                ("baseline_dataset_hash", _S),
                ("candidate_dataset_hash", _S),
                ("segment_by", pa.list_(_S)),
                *((name, _I) for name in COUNTS),
                *((name, _D) for name in SHIFT),
                *(
                    (f"{metric}_{side}", _D)
                    for metric in DIFF_METRICS
                    for side in ("baseline", "candidate", "delta")
                ),
                ("worst_segment_key", _S),
                ("worst_segment_value", _S),
                ("worst_segment_accuracy_drop", _D),
                ("n_changes", _I),
                ("has_statistics", _B),
                ("diff_path", _S),
                ("sidecar_path", _S),
            ]
        )
    ),
    "diff_changes": pa.schema(
        keyed(
            [
                *_WHO,
                ("position", _I),
                ("case_id", _S),
                ("kind", _S),
                ("input_preview", _S),
                ("input_json", _S),
                ("expected", _S),
                ("baseline_selected", _S),
                ("candidate_selected", _S),
                ("baseline_confidence", _D),
                ("candidate_confidence", _D),
                ("tv_distance", _D),
                ("error", _S),
            ]
        )
    ),
    "diff_segments": pa.schema(
        keyed(
            [
                *_WHO,
                ("position", _I),
                *_SEGMENT,
                ("matched", _I),
                ("compared", _I),
                ("baseline_accuracy", _D),
                ("candidate_accuracy", _D),
                ("accuracy_drop", _D),
                ("answer_flip_rate", _D),
                ("gated", _B),
                ("is_worst", _B),
            ]
        )
    ),
    "regression_checks": _regression_checks(),
    "diff_intervals": pa.schema(
        keyed(
            [
                *_WHO,
                *_SEGMENT,
                ("gated", _B),
                ("matched", _I),
                ("metric", _S),
                ("side", _S),
                ("value", _D),
                ("low", _D),
                ("high", _D),
                ("confidence", _D),
                ("method", _S),
                ("p_value_candidate_worse", _D),
                ("test", _S),
            ]
        )
    ),
    "diff_tests": pa.schema(
        keyed(
            [
                *_WHO,
                *_SEGMENT,
                ("gated", _B),
                ("matched", _I),
                ("compared", _I),
                ("test", _S),
                ("n_pairs", _I),
                ("baseline_only", _I),
                ("candidate_only", _I),
                ("p_value", _D),
                ("p_value_candidate_worse", _D),
            ]
        )
    ),
}
