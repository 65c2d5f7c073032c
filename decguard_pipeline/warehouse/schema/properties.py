"""Warehouse tables of the properties feature (documented in docs/warehouse.md).

Written by the ``property_results`` asset (``steps/properties.py``) for contracts that
enable at least one metamorphic property. Every table is keyed by contract, target, run and
time, then ``backend`` and ``model_version`` of the evaluated target (as in ``runs``).
"""

import pyarrow as pa

from decguard_pipeline.warehouse.columns import BOOL, DOUBLE, INT, STRING, TIMESTAMP, keyed
from decguard_pipeline.warehouse.schema.golden import TABLES as _GOLDEN

_WHO = [("backend", STRING), ("model_version", STRING)]


def _property_checks() -> pa.Schema:
    """``gate_results`` plus ``property`` (the catalog's ``latest_all_checks`` unions by name)."""
    return pa.schema([*_GOLDEN["gate_results"], pa.field("property", STRING)])


TABLES: dict[str, pa.Schema] = {
    "property_runs": pa.schema(
        keyed(
            [
                *_WHO,
                ("golden_run_id", STRING),
                ("contract_hash", STRING),
                ("seed", INT),
                ("minimize", BOOL),
                ("max_minimize_calls", INT),
                ("text_field", STRING),
                ("properties", pa.list_(STRING)),
                ("n_cases", INT),
                ("n_pairs", INT),
                ("n_skipped", INT),
                ("n_errors", INT),
                ("n_violations", INT),
                ("backend_calls", INT),
                ("status", STRING),
                ("health_status", STRING),
                ("health_detail", STRING),
                ("started_at", TIMESTAMP),
                ("wall_s", DOUBLE),
                ("section_path", STRING),
                ("section_sha256", STRING),
            ]
        )
    ),
    "property_pairs": pa.schema(
        keyed(
            [
                *_WHO,
                ("position", INT),
                ("pair_id", STRING),
                ("property", STRING),
                ("case_id", STRING),
                ("sample", INT),
                ("steps_json", STRING),
                ("provenance_json", STRING),
                ("input_text", STRING),
                ("input_json", STRING),
                ("presentation_json", STRING),
                ("shown_labels", pa.list_(STRING)),
                ("labels", pa.list_(STRING)),
                ("probs_after", pa.list_(DOUBLE)),
                ("probabilities_after", pa.map_(STRING, DOUBLE)),
                ("selected_before", STRING),
                ("selected_after", STRING),
                ("confidence_after", DOUBLE),
                ("latency_ms", DOUBLE),
                ("result_model", STRING),
                ("result_model_version", STRING),
                ("result_metadata_json", STRING),
                ("tv_distance", DOUBLE),
                ("js_divergence", DOUBLE),
                ("max_abs_delta", DOUBLE),
                ("confidence_delta", DOUBLE),
                ("flipped", BOOL),
                ("rank_changed", BOOL),
                ("level_delta", DOUBLE),
                ("violations", pa.list_(STRING)),
                ("violated", BOOL),
                ("failed", BOOL),
                ("error_kind", STRING),
                ("error_message", STRING),
                ("reduced_json", STRING),
                ("reduced_input_text", STRING),
                ("reduced_backend_calls", INT),
            ]
        )
    ),
    "property_skips": pa.schema(
        keyed(
            [
                *_WHO,
                ("position", INT),
                ("property", STRING),
                ("case_id", STRING),
                ("reason", STRING),
            ]
        )
    ),
    "property_summaries": pa.schema(
        keyed(
            [
                *_WHO,
                ("position", INT),
                ("property", STRING),
                ("level", STRING),
                ("relation", STRING),
                ("n_cases", INT),
                ("n_transformed", INT),
                ("n_skipped", INT),
                ("n_errors", INT),
                ("errors_by_kind_json", STRING),
                ("n_evaluated", INT),
                ("n_violations", INT),
                ("violation_rate", DOUBLE),
                ("n_flips", INT),
                ("flip_rate", DOUBLE),
                ("mean_tv_distance", DOUBLE),
                ("max_tv_distance", DOUBLE),
                ("max_js_divergence", DOUBLE),
                ("max_abs_delta", DOUBLE),
                ("max_abs_confidence_delta", DOUBLE),
                ("max_level_decrease", DOUBLE),
                ("n_reduced", INT),
                ("confidence", DOUBLE),
                ("violation_rate_low", DOUBLE),
                ("violation_rate_high", DOUBLE),
                ("flip_rate_low", DOUBLE),
                ("flip_rate_high", DOUBLE),
                ("calls_transformed", INT),
                ("calls_minimize", INT),
                ("calls_total", INT),
                ("status", STRING),
            ]
        )
    ),
    "property_checks": _property_checks(),
}
