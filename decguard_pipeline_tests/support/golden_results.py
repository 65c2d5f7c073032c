"""Case results as a backend run leaves them (argmax, ties to the first label), for the statistics
and diff tests."""

from __future__ import annotations

from typing import Any

import numpy as np

from decguard_pipeline.core.contract import DecisionSpec
from decguard_pipeline.core.results import CaseResults


def make_results(
    probs: np.ndarray,
    expected: list[int | None],
    *,
    errored: np.ndarray | None = None,
    labels: tuple[str, ...] = ("a", "b", "c"),
    metadata: list[dict[str, Any]] | None = None,
    ids: list[str] | None = None,
    latency: np.ndarray | None = None,
    kind: str = "choice",
    name: str = "gen",
) -> CaseResults:
    """Case results as a backend run would leave them (argmax with ties to the first label)."""
    n = len(expected)
    probs = np.array(probs, dtype=np.float64)
    errored = np.zeros(n, dtype=bool) if errored is None else np.asarray(errored, dtype=bool)
    selected = np.where(errored, -1, probs.argmax(axis=1))
    probs[errored] = np.nan
    confidence = np.where(errored, np.nan, probs[np.arange(n), np.maximum(selected, 0)])
    lat = np.full(n, 1.0) if latency is None else np.asarray(latency, dtype=np.float64)
    return CaseResults(
        spec=DecisionSpec(name, kind, labels),
        backend="default",
        provider="mock",
        case_ids=ids or [f"c{i}" for i in range(n)],
        inputs=[f"input {i}" for i in range(n)],
        expected=[None if e is None else labels[e] for e in expected],
        metadata=metadata or [{} for _ in range(n)],
        probs=probs,
        selected=selected.astype(np.int64),
        confidence=confidence,
        latency_ms=np.where(errored, np.nan, lat),
        model=[None] * n,
        model_version=[None] * n,
        result_metadata=[{} for _ in range(n)],
        error_kind=["timeout" if e else None for e in errored],
        error_message=["took too long" if e else None for e in errored],
    )
