"""Warehouse tables of the properties feature (documented in docs/warehouse.md).

Written by the ``property_results`` asset (``steps/properties.py``) for contracts that
enable at least one metamorphic property. Every table is keyed by contract, target, run and
time, then ``backend`` and ``model_version`` of the evaluated target (as in ``runs``).
"""

import pyarrow as pa

from decguard_pipeline.warehouse.columns import _B, _D, _I, _S, _TS, keyed
from decguard_pipeline.warehouse.schema.golden import TABLES as _GOLDEN

_WHO = [("backend", _S), ("model_version", _S)]


def _property_checks() -> pa.Schema:
    """``gate_results`` plus ``property`` (the catalog's ``latest_all_checks`` unions by name)."""
    return pa.schema([*_GOLDEN["gate_results"], pa.field("property", _S)])


TABLES: dict[str, pa.Schema] = {
    "property_runs": pa.schema(
        keyed(
            [
                *_WHO,
                ("golden_run_id", _S),
                ("contract_hash", _S),
                ("seed", _I),
                ("minimize", _B),
                ("max_minimize_calls", _I),
                ("text_field", _S),
                ("properties", pa.list_(_S)),
                ("n_cases", _I),
                ("n_pairs", _I),
                ("n_skipped", _I),
                ("n_errors", _I),
                ("n_violations", _I),
                ("backend_calls", _I),
                ("status", _S),
                ("health_status", _S),
                ("health_detail", _S),
                ("started_at", _TS),
                ("wall_s", _D),
                ("section_path", _S),
                ("section_sha256", _S),
            ]
        )
    ),
    "property_pairs": pa.schema(
        keyed(
            [
                *_WHO,
                ("position", _I),
                ("pair_id", _S),
                ("property", _S),
                ("case_id", _S),
                ("sample", _I),
                ("steps_json", _S),
                ("provenance_json", _S),
                ("input_text", _S),
                ("input_json", _S),
                ("presentation_json", _S),
                ("shown_labels", pa.list_(_S)),
                ("labels", pa.list_(_S)),
                ("probs_after", pa.list_(_D)),
                ("probabilities_after", pa.map_(_S, _D)),
                ("selected_before", _S),
                ("selected_after", _S),
                ("confidence_after", _D),
                ("latency_ms", _D),
                ("result_model", _S),
                ("result_model_version", _S),
                ("result_metadata_json", _S),
                ("tv_distance", _D),
                ("js_divergence", _D),
                ("max_abs_delta", _D),
                ("confidence_delta", _D),
                ("flipped", _B),
                ("rank_changed", _B),
                ("level_delta", _D),
                ("violations", pa.list_(_S)),
                ("violated", _B),
                ("failed", _B),
                ("error_kind", _S),
                ("error_message", _S),
                ("reduced_json", _S),
                ("reduced_input_text", _S),
                ("reduced_backend_calls", _I),
            ]
        )
    ),
    "property_skips": pa.schema(
        keyed([*_WHO, ("position", _I), ("property", _S), ("case_id", _S), ("reason", _S)])
    ),
    "property_summaries": pa.schema(
        keyed(
            [
                *_WHO,
                ("position", _I),
                ("property", _S),
                ("level", _S),
                ("relation", _S),
                ("n_cases", _I),
                ("n_transformed", _I),
                ("n_skipped", _I),
                ("n_errors", _I),
                ("errors_by_kind_json", _S),
                ("n_evaluated", _I),
                ("n_violations", _I),
                ("violation_rate", _D),
                ("n_flips", _I),
                ("flip_rate", _D),
                ("mean_tv_distance", _D),
                ("max_tv_distance", _D),
                ("max_js_divergence", _D),
                ("max_abs_delta", _D),
                ("max_abs_confidence_delta", _D),
                ("max_level_decrease", _D),
                ("n_reduced", _I),
                ("confidence", _D),
                ("violation_rate_low", _D),
                ("violation_rate_high", _D),
                ("flip_rate_low", _D),
                ("flip_rate_high", _D),
                ("calls_transformed", _I),
                ("calls_minimize", _I),
                ("calls_total", _I),
                ("status", _S),
            ]
        )
    ),
    "property_checks": _property_checks(),
}
