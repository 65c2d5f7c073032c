"""Rows for the warehouse tests: case_results tables of any size, built column-wise (the crash and
concurrency tests also build them in child processes), and the verdict that ends an
evaluation."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pyarrow as pa

from decguard_pipeline.warehouse.schema import TABLES

if TYPE_CHECKING:
    from decguard_pipeline.warehouse import Warehouse


def write_verdict(
    wh: Warehouse, contract: str, target: str, run_id: str, recorded_at: datetime | None = None
) -> None:
    """The ``verdicts`` row an evaluation writes last: from then on its rows are the target's
    newest (``latest_*``, ``read_latest``)."""
    row = {"evaluation_run_id": run_id, "status": "pass", "approved": True}
    wh.write(
        "verdicts", [row], contract=contract, target=target, run_id=run_id, recorded_at=recorded_at
    )


def case_rows(n: int, *, contract: str, target: str, run_id: str, prefix: str) -> pa.Table:
    """``n`` rows of ``case_results`` with unique case ids ``<prefix>-<i>`` (built column-wise:
    a few million rows take a second)."""
    import numpy as np

    schema = TABLES["case_results"]
    labels = ["refund", "reject", "review"]
    probs = np.tile(np.array([0.5, 0.3, 0.2]), n)
    offsets = np.arange(0, 3 * n + 1, 3, dtype=np.int32)
    columns = {
        "contract": pa.array([contract] * n),
        "target": pa.array([target] * n),
        "run_id": pa.array([run_id] * n),
        "recorded_at": pa.array([datetime(2026, 1, 1, tzinfo=UTC)] * n, pa.timestamp("us", "UTC")),
        "position": pa.array(np.arange(n)),
        "case_id": pa.array([f"{prefix}-{i}" for i in range(n)]),
        "labels": pa.ListArray.from_arrays(offsets, pa.array(labels * n)),
        "probs": pa.ListArray.from_arrays(offsets, pa.array(probs)),
        "probabilities": pa.MapArray.from_arrays(offsets, pa.array(labels * n), pa.array(probs)),
        "confidence": pa.array(np.full(n, 0.5)),
        "latency_ms": pa.array(np.random.default_rng(0).random(n)),
        "input_text": pa.array([f"case text number {i} " * 3 for i in range(n)]),
    }
    arrays = [
        columns[f.name].cast(f.type) if f.name in columns else pa.nulls(n, f.type) for f in schema
    ]
    return pa.Table.from_arrays(arrays, schema=schema)
