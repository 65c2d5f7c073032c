"""Warehouse tables of the production feature (documented in docs/warehouse.md).

Written by the daily ``production_records`` and ``production_check`` assets
(``steps/production.py``); ``production_inbox`` is written by producers. Every table
is keyed by contract, target, run and time, where ``target`` is the **day** (``YYYY-MM-DD``,
the daily partition key): production records are not tied to one backend or model version
(``backend`` and ``model_version`` are record columns).
"""

import pyarrow as pa

from decguard_pipeline.warehouse.columns import _B, _D, _I, _S, keyed
from decguard_pipeline.warehouse.schema.golden import TABLES as _GOLDEN

_SEGMENT = [("segment_key", _S), ("segment_value", _S)]
_PROBABILITIES = pa.map_(_S, _D)

# A record's fields as a producer writes them (DecGuard's record fields, spec §11.1); NULL
# means absent. ``input`` is a text input, ``input_json`` an object input as JSON (used when
# ``input`` is NULL); ``metadata_json`` a JSON object.
INBOX_FIELDS = [
    ("id", _S),
    ("timestamp", _S),
    ("decision", _S),
    ("input", _S),
    ("input_json", _S),
    ("probabilities", _PROBABILITIES),
    ("selected", _S),
    ("confidence", _D),
    ("backend", _S),
    ("model", _S),
    ("model_version", _S),
    ("outcome", _S),
    ("outcome_correct", _B),
    ("latency_ms", _D),
    ("cost", _D),
    ("action", _S),
    ("fallback", _B),
    ("metadata_json", _S),
]


def _production_checks() -> pa.Schema:
    """``gate_results`` plus the segment a segment gate was measured on (the catalog's
    ``latest_all_checks`` unions by name)."""
    extra = [*_SEGMENT, ("baseline", _S)]
    return pa.schema([*_GOLDEN["gate_results"], *(pa.field(n, t) for n, t in extra)])


TABLES: dict[str, pa.Schema] = {
    "production_inbox": pa.schema(keyed([("position", _I), *INBOX_FIELDS])),
    "production_records": pa.schema(
        keyed(
            [
                ("source", _S),
                ("source_path", _S),
                ("dataset_hash", _S),
                ("position", _I),
                ("id", _S),
                ("timestamp", _S),
                ("decision", _S),
                ("input_text", _S),
                ("input_json", _S),
                ("labels", pa.list_(_S)),
                ("probs", pa.list_(_D)),
                ("probabilities", _PROBABILITIES),
                ("selected", _S),
                ("confidence", _D),
                ("outcome", _S),
                ("outcome_correct", _B),
                ("action", _S),
                ("fallback", _B),
                ("latency_ms", _D),
                ("cost", _D),
                ("backend", _S),
                ("model", _S),
                ("model_version", _S),
                ("metadata_json", _S),
                ("record_json", _S),
            ]
        )
    ),
    "production_runs": pa.schema(
        keyed(
            [
                ("status", _S),
                ("exit_code", _I),
                ("source", _S),
                ("dataset_path", _S),
                ("dataset_hash", _S),
                ("records_run_id", _S),
                ("n_records", _I),
                ("n_outcomes", _I),
                ("n_correctness", _I),
                ("pending", _I),
                ("pending_label", _I),
                ("baseline", _S),
                ("baseline_rule", _S),
                ("baseline_reason", _S),
                ("baseline_source", _S),
                ("baseline_path", _S),
                ("baseline_hash", _S),
                ("baseline_n_records", _I),
                ("contract_hash", _S),
                ("report_path", _S),
                ("report_sha256", _S),
                ("sidecar_path", _S),
            ]
        )
    ),
    "production_metrics": pa.schema(keyed([*_SEGMENT, ("metric", _S), ("value", _D)])),
    "production_drift": pa.schema(
        keyed(
            [
                ("baseline", _S),
                ("baseline_rule", _S),
                ("baseline_source", _S),
                ("baseline_n_records", _I),
                ("confidence_mean_delta", _D),
                ("confidence_tv_distance", _D),
                ("accuracy_drop", _D),
                ("ece_increase", _D),
                ("label_tv_distance", _D),
                ("label_psi", _D),
                ("psi_epsilon", _D),
            ]
        )
    ),
    "production_segments": pa.schema(
        keyed(
            [
                ("position", _I),
                *_SEGMENT,
                ("segment_value_json", _S),
                ("status", _S),
                ("n_records", _I),
                ("n_correctness", _I),
                ("accuracy", _D),
                ("error_rate", _D),
                ("ece", _D),
                ("brier", _D),
                ("nll", _D),
                ("confidence_mean", _D),
                ("threshold_coverage", _D),
                ("abstention_rate", _D),
                ("fallback_rate", _D),
                ("pending", _I),
                ("accuracy_low", _D),
                ("accuracy_high", _D),
            ]
        )
    ),
    "production_extensions": pa.schema(
        keyed(
            [
                ("section", _S),
                *_SEGMENT,
                ("model_version", _S),
                ("label", _S),
                ("metric", _S),
                ("value", _D),
            ]
        )
    ),
    "production_checks": _production_checks(),
}
