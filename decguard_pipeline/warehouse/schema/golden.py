"""Warehouse tables of a golden evaluation: contract, dataset, cases, target, run, results,
metrics, gates and the report (documented column by column in docs/warehouse.md)."""

from __future__ import annotations

import pyarrow as pa

from decguard_pipeline.warehouse.columns import _B, _D, _I, _S, _TS, keyed

TABLES: dict[str, pa.Schema] = {
    "contracts": pa.schema(
        keyed(
            [
                ("contract_hash", _S),
                ("path", _S),
                ("decision", _S),
                ("decision_type", _S),
                ("labels", pa.list_(_S)),
                ("schema_version", _S),
                ("backends", pa.list_(_S)),
                ("providers", pa.list_(_S)),
                ("dataset", _S),
                ("contract_json", _S),
            ]
        )
    ),
    "datasets": pa.schema(
        keyed([("dataset_hash", _S), ("path", _S), ("n_cases", _I), ("n_labeled", _I)])
    ),
    "cases": pa.schema(
        keyed(
            [
                ("dataset_hash", _S),
                ("position", _I),
                ("case_id", _S),
                ("input_text", _S),
                ("input_json", _S),
                ("expected", _S),
                ("metadata_json", _S),
            ]
        )
    ),
    "targets": pa.schema(
        keyed(
            [
                ("backend", _S),
                ("provider", _S),
                ("model", _S),
                ("model_version", _S),
                ("version_source", _S),
            ]
        )
    ),
    "runs": pa.schema(
        keyed(
            [
                ("dagster_run_id", _S),
                ("backend", _S),
                ("provider", _S),
                ("model", _S),
                ("model_version", _S),
                ("contract_hash", _S),
                ("dataset_hash", _S),
                ("dataset_path", _S),
                ("n_cases", _I),
                ("n_labeled", _I),
                ("n_errored", _I),
                ("health_status", _S),
                ("health_detail", _S),
                ("backend_details_json", _S),
                ("started_at", _TS),
                ("wall_s", _D),
            ]
        )
    ),
    "case_results": pa.schema(
        keyed(
            [
                ("backend", _S),
                ("model_version", _S),
                ("position", _I),
                ("case_id", _S),
                ("input_text", _S),
                ("input_json", _S),
                ("expected", _S),
                ("metadata_json", _S),
                ("labels", pa.list_(_S)),
                ("probs", pa.list_(_D)),
                ("probabilities", pa.map_(_S, _D)),
                ("selected", _S),
                ("confidence", _D),
                ("correct", _B),
                ("latency_ms", _D),
                ("result_model", _S),
                ("result_model_version", _S),
                ("result_metadata_json", _S),
                ("error_kind", _S),
                ("error_message", _S),
            ]
        )
    ),
    "metrics": pa.schema(
        keyed([("backend", _S), ("model_version", _S), ("metric", _S), ("value", _D)])
    ),
    "per_label_metrics": pa.schema(
        keyed(
            [
                ("backend", _S),
                ("model_version", _S),
                ("label", _S),
                ("precision", _D),
                ("recall", _D),
                ("f1", _D),
                ("support", _I),
            ]
        )
    ),
    "reliability_bins": pa.schema(
        keyed(
            [
                ("backend", _S),
                ("model_version", _S),
                ("bin", _I),
                ("lower", _D),
                ("upper", _D),
                ("count", _I),
                ("mean_confidence", _D),
                ("accuracy", _D),
            ]
        )
    ),
    # pipeline.statistics: intervals of the golden metrics (docs/statistics.md)
    "metric_intervals": pa.schema(
        keyed(
            [
                ("backend", _S),
                ("model_version", _S),
                ("metric", _S),
                ("value", _D),
                ("low", _D),
                ("high", _D),
                ("method", _S),
                ("confidence", _D),
                ("bootstrap_resamples", _I),
                ("seed", _I),
            ]
        )
    ),
    "gate_results": pa.schema(
        keyed(
            [
                ("backend", _S),
                ("model_version", _S),
                ("source", _S),
                ("gate", _S),
                ("level", _S),
                ("metric", _S),
                ("comparison", _S),
                ("threshold", _D),
                ("value", _D),
                ("status", _S),
                ("message", _S),
            ]
        )
    ),
    "reports": pa.schema(
        keyed(
            [("mode", _S), ("status", _S), ("exit_code", _I), ("path", _S), ("report_sha256", _S)]
        )
    ),
}
