"""Warehouse tables of the production feature (documented in docs/warehouse.md).

Written by the daily ``production_records`` and ``production_check`` assets
(``steps/production/``); ``production_inbox`` is written by producers. Every table
is keyed by contract, target, run and time, where ``target`` is the **day** (``YYYY-MM-DD``,
the daily partition key): production records are not tied to one backend or model version
(``backend`` and ``model_version`` are record columns).
"""

import pyarrow as pa

from decguard_pipeline.warehouse.columns import BOOL, DOUBLE, INT, STRING, keyed
from decguard_pipeline.warehouse.schema.golden import TABLES as _GOLDEN

_SEGMENT = [("segment_key", STRING), ("segment_value", STRING)]
_PROBABILITIES = pa.map_(STRING, DOUBLE)

# A record's fields as a producer writes them (DecGuard's record fields, spec §11.1); NULL
# means absent. ``input`` is a text input, ``input_json`` an object input as JSON (used when
# ``input`` is NULL); ``metadata_json`` a JSON object.
INBOX_FIELDS = [
    ("id", STRING),
    ("timestamp", STRING),
    ("decision", STRING),
    ("input", STRING),
    ("input_json", STRING),
    ("probabilities", _PROBABILITIES),
    ("selected", STRING),
    ("confidence", DOUBLE),
    ("backend", STRING),
    ("model", STRING),
    ("model_version", STRING),
    ("outcome", STRING),
    ("outcome_correct", BOOL),
    ("latency_ms", DOUBLE),
    ("cost", DOUBLE),
    ("action", STRING),
    ("fallback", BOOL),
    ("metadata_json", STRING),
]


def _production_checks() -> pa.Schema:
    """``gate_results`` plus the segment a segment gate was measured on (the catalog's
    ``latest_all_checks`` unions by name)."""
    extra = [*_SEGMENT, ("baseline", STRING)]
    return pa.schema([*_GOLDEN["gate_results"], *(pa.field(n, t) for n, t in extra)])


TABLES: dict[str, pa.Schema] = {
    "production_inbox": pa.schema(keyed([("position", INT), *INBOX_FIELDS])),
    "production_records": pa.schema(
        keyed(
            [
                ("source", STRING),
                ("source_path", STRING),
                ("dataset_hash", STRING),
                ("position", INT),
                ("id", STRING),
                ("timestamp", STRING),
                ("decision", STRING),
                ("input_text", STRING),
                ("input_json", STRING),
                ("labels", pa.list_(STRING)),
                ("probs", pa.list_(DOUBLE)),
                ("probabilities", _PROBABILITIES),
                ("selected", STRING),
                ("confidence", DOUBLE),
                ("outcome", STRING),
                ("outcome_correct", BOOL),
                ("action", STRING),
                ("fallback", BOOL),
                ("latency_ms", DOUBLE),
                ("cost", DOUBLE),
                ("backend", STRING),
                ("model", STRING),
                ("model_version", STRING),
                ("metadata_json", STRING),
                ("record_json", STRING),
            ]
        )
    ),
    "production_runs": pa.schema(
        keyed(
            [
                ("status", STRING),
                ("exit_code", INT),
                ("source", STRING),
                ("dataset_path", STRING),
                ("dataset_hash", STRING),
                ("records_run_id", STRING),
                ("n_records", INT),
                ("n_outcomes", INT),
                ("n_correctness", INT),
                ("pending", INT),
                ("pending_label", INT),
                ("baseline", STRING),
                ("baseline_rule", STRING),
                ("baseline_reason", STRING),
                ("baseline_source", STRING),
                ("baseline_path", STRING),
                ("baseline_hash", STRING),
                ("baseline_n_records", INT),
                ("contract_hash", STRING),
                ("report_path", STRING),
                ("report_sha256", STRING),
                ("sidecar_path", STRING),
            ]
        )
    ),
    "production_metrics": pa.schema(keyed([*_SEGMENT, ("metric", STRING), ("value", DOUBLE)])),
    "production_drift": pa.schema(
        keyed(
            [
                ("baseline", STRING),
                ("baseline_rule", STRING),
                ("baseline_source", STRING),
                ("baseline_n_records", INT),
                ("confidence_mean_delta", DOUBLE),
                ("confidence_tv_distance", DOUBLE),
                ("accuracy_drop", DOUBLE),
                ("ece_increase", DOUBLE),
                ("label_tv_distance", DOUBLE),
                ("label_psi", DOUBLE),
                ("psi_epsilon", DOUBLE),
            ]
        )
    ),
    "production_segments": pa.schema(
        keyed(
            [
                ("position", INT),
                *_SEGMENT,
                ("segment_value_json", STRING),
                ("status", STRING),
                ("n_records", INT),
                ("n_correctness", INT),
                ("accuracy", DOUBLE),
                ("error_rate", DOUBLE),
                ("ece", DOUBLE),
                ("brier", DOUBLE),
                ("nll", DOUBLE),
                ("confidence_mean", DOUBLE),
                ("threshold_coverage", DOUBLE),
                ("abstention_rate", DOUBLE),
                ("fallback_rate", DOUBLE),
                ("pending", INT),
                ("accuracy_low", DOUBLE),
                ("accuracy_high", DOUBLE),
            ]
        )
    ),
    "production_extensions": pa.schema(
        keyed(
            [
                ("section", STRING),
                *_SEGMENT,
                ("model_version", STRING),
                ("label", STRING),
                ("metric", STRING),
                ("value", DOUBLE),
            ]
        )
    ),
    "production_checks": _production_checks(),
}
