"""Warehouse table of a target's verdict: one row per evaluation that reached its verdict
(the ``verdict`` asset), with what the scoreboard shows and whether the target may be a
baseline (documented column by column in docs/warehouse.md)."""

from __future__ import annotations

import pyarrow as pa

from decguard_pipeline.warehouse.columns import BOOL, DOUBLE, STRING, TIMESTAMP, WHO, keyed

# The headline numbers of the scoreboard (NULL when undefined or unknown).
NUMBERS = (
    "accuracy",
    "macro_f1",
    "ece",
    "ece_equal_mass",
    "brier",
    "nll",
    "coverage",
    "error_rate",
    "latency_p95_ms",
    "cost_per_1000",
)

# One gate that does not hold (core.verdict.Gate): ``name`` is ``<suite>.<gate>``.
GATE = pa.struct(
    [
        ("name", STRING),
        ("kind", STRING),
        ("suite", STRING),
        ("gate", STRING),
        ("level", STRING),
        ("status", STRING),
        ("value", DOUBLE),
        ("threshold", DOUBLE),
        ("comparison", STRING),
        ("message", STRING),
    ]
)

TABLES: dict[str, pa.Schema] = {
    "verdicts": pa.schema(
        keyed(
            [
                *WHO,
                ("evaluation_run_id", STRING),
                ("evaluated_at", TIMESTAMP),
                ("status", STRING),
                ("headline", STRING),
                ("approved", BOOL),
                ("failing", pa.list_(STRING)),
                ("warned", pa.list_(STRING)),
                ("gates", pa.list_(GATE)),
                ("golden_status", STRING),
                ("properties_status", STRING),
                ("guard_status", STRING),
                ("regression_status", STRING),
                ("baseline_target", STRING),
                *((name, DOUBLE) for name in NUMBERS),
                ("report_path", STRING),
                ("report_html", STRING),
                ("diff_html", STRING),
            ]
        )
    ),
}
