"""Warehouse tables of a golden evaluation: contract, dataset, cases, target, run, results,
metrics, gates and the report (documented column by column in docs/warehouse.md)."""

from __future__ import annotations

import pyarrow as pa

from decguard_pipeline.warehouse.columns import BOOL, DOUBLE, INT, STRING, TIMESTAMP, WHO, keyed

# A golden case as loaded, in ``cases`` and again in every ``case_results`` row.
CASE = [
    ("position", INT),
    ("case_id", STRING),
    ("input_text", STRING),
    ("input_json", STRING),
    ("expected", STRING),
    ("metadata_json", STRING),
]
# One bin of a reliability diagram (core.golden.metrics.reliability).
RELIABILITY_BIN = [
    ("bin", INT),
    ("lower", DOUBLE),
    ("upper", DOUBLE),
    ("count", INT),
    ("mean_confidence", DOUBLE),
    ("accuracy", DOUBLE),
]

TABLES: dict[str, pa.Schema] = {
    "contracts": pa.schema(
        keyed(
            [
                ("contract_hash", STRING),
                ("path", STRING),
                ("decision", STRING),
                ("decision_type", STRING),
                ("labels", pa.list_(STRING)),
                ("schema_version", STRING),
                ("backends", pa.list_(STRING)),
                ("providers", pa.list_(STRING)),
                ("dataset", STRING),
                ("contract_json", STRING),
            ]
        )
    ),
    "datasets": pa.schema(
        keyed([("dataset_hash", STRING), ("path", STRING), ("n_cases", INT), ("n_labeled", INT)])
    ),
    "cases": pa.schema(
        keyed(
            [
                ("dataset_hash", STRING),
                *CASE,
            ]
        )
    ),
    "targets": pa.schema(
        keyed(
            [
                ("backend", STRING),
                ("provider", STRING),
                ("model", STRING),
                ("model_version", STRING),
                ("version_source", STRING),
            ]
        )
    ),
    "runs": pa.schema(
        keyed(
            [
                ("dagster_run_id", STRING),
                ("backend", STRING),
                ("provider", STRING),
                ("model", STRING),
                ("model_version", STRING),
                ("contract_hash", STRING),
                ("dataset_hash", STRING),
                ("dataset_path", STRING),
                ("n_cases", INT),
                ("n_labeled", INT),
                ("n_errored", INT),
                ("health_status", STRING),
                ("health_detail", STRING),
                ("backend_details_json", STRING),
                ("started_at", TIMESTAMP),
                ("wall_s", DOUBLE),
                # usage and cost (core/usage.py): tokens of the cases that reported them,
                # cost with the backend's pricing (null without), the whole usage section
                ("prompt_tokens", INT),
                ("completion_tokens", INT),
                ("cost_per_run", DOUBLE),
                ("cost_per_1000", DOUBLE),
                ("usage_json", STRING),
                # pipeline.repeats: the sidecar's consistency section (null without)
                ("consistency_json", STRING),
                # the response cache (pipeline.cache): its section, answers replayed and
                # asked, whether the backend answered (null with the cache off)
                ("cache_json", STRING),
            ]
        )
    ),
    "case_results": pa.schema(
        keyed(
            [
                *WHO,
                *CASE,
                ("labels", pa.list_(STRING)),
                ("probs", pa.list_(DOUBLE)),
                ("probabilities", pa.map_(STRING, DOUBLE)),
                ("selected", STRING),
                ("confidence", DOUBLE),
                ("correct", BOOL),
                ("latency_ms", DOUBLE),
                ("result_model", STRING),
                ("result_model_version", STRING),
                ("result_metadata_json", STRING),
                ("error_kind", STRING),
                ("error_message", STRING),
                ("prompt_tokens", INT),  # null where the backend reported no usage
                ("completion_tokens", INT),
            ]
        )
    ),
    "metrics": pa.schema(keyed([*WHO, ("metric", STRING), ("value", DOUBLE)])),
    "per_label_metrics": pa.schema(
        keyed(
            [
                *WHO,
                ("label", STRING),
                ("precision", DOUBLE),
                ("recall", DOUBLE),
                ("f1", DOUBLE),
                ("support", INT),
            ]
        )
    ),
    "reliability_bins": pa.schema(
        keyed(
            [
                *WHO,
                *RELIABILITY_BIN,
            ]
        )
    ),
    # pipeline.statistics: intervals of the golden metrics (docs/statistics.md)
    "metric_intervals": pa.schema(
        keyed(
            [
                *WHO,
                ("metric", STRING),
                ("value", DOUBLE),
                ("low", DOUBLE),
                ("high", DOUBLE),
                ("method", STRING),
                ("confidence", DOUBLE),
                ("bootstrap_resamples", INT),
                ("seed", INT),
            ]
        )
    ),
    "gate_results": pa.schema(
        keyed(
            [
                *WHO,
                ("source", STRING),
                ("gate", STRING),
                ("level", STRING),
                ("metric", STRING),
                ("comparison", STRING),
                ("threshold", DOUBLE),
                ("value", DOUBLE),
                ("status", STRING),
                ("message", STRING),
            ]
        )
    ),
    "reports": pa.schema(
        keyed(
            [
                ("mode", STRING),
                ("status", STRING),
                ("exit_code", INT),
                ("path", STRING),
                ("report_sha256", STRING),
            ]
        )
    ),
}
