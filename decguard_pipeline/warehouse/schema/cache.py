"""The response cache's table (documented column by column in docs/warehouse.md and
docs/cache.md): one row per answer a model gave, keyed by everything that determined it."""

from __future__ import annotations

import pyarrow as pa

from decguard_pipeline.warehouse.columns import DOUBLE, INT, STRING, TIMESTAMP, keyed

RESPONSES = pa.schema(
    keyed(
        [
            ("key", pa.binary(16)),
            ("case_id", STRING),
            ("backend", STRING),
            ("provider", STRING),
            ("keyed_version", STRING),
            ("labels", pa.list_(STRING)),
            ("probabilities", pa.list_(DOUBLE)),
            ("model", STRING),
            ("model_version", STRING),
            ("latency_ms", DOUBLE),
            ("prompt_tokens", INT),
            ("completion_tokens", INT),
            ("metadata_json", STRING),
            ("answered_at", TIMESTAMP),
        ]
    )
)

TABLES: dict[str, pa.Schema] = {"responses": RESPONSES}
