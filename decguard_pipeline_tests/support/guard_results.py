"""Columnar case results for the guard and calibration tests: generated probabilities on two labels
by default, errored rows as timeouts."""

from __future__ import annotations

from typing import Any

import numpy as np

from decguard_pipeline.core.contract import DecisionSpec
from decguard_pipeline.core.decision import select_many
from decguard_pipeline.core.results import CaseResults


def make_results(
    probs: np.ndarray,
    expected: list[int | None],
    *,
    labels: tuple[str, ...] = ("yes", "no"),
    kind: str = "noul",
    errored: tuple[int, ...] = (),
    metadata: list[dict[str, Any]] | None = None,
) -> CaseResults:
    """Columnar results as the runner builds them; ``errored`` rows become timeouts."""
    probs = np.array(probs, dtype=np.float64)
    n = len(probs)
    probs[list(errored)] = np.nan
    selected, confidence = select_many(probs)
    failed = set(errored)
    return CaseResults(
        spec=DecisionSpec("d", kind, labels),
        backend="default",
        provider="mock",
        case_ids=[f"c{i}" for i in range(n)],
        inputs=[f"input {i}" for i in range(n)],
        expected=[None if e is None else labels[e] for e in expected],
        metadata=metadata or [{} for _ in range(n)],
        probs=probs,
        selected=selected,
        confidence=confidence,
        latency_ms=np.where(np.isnan(confidence), np.nan, 1.0),
        model=[None] * n,
        model_version=[None] * n,
        result_metadata=[{} for _ in range(n)],
        error_kind=["timeout" if i in failed else None for i in range(n)],
        error_message=["took too long" if i in failed else None for i in range(n)],
    )
