"""Send transformed examples through the concurrent runner and map the answers back.

A request shows the labels of its presentation in that order; the model answers in shown
labels, which are mapped back to contract labels (``p[label] = answer[shown]``) and put in
canonical order before the selected label and confidence are recomputed (DecGuard §9.2).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from decguard_pipeline.backends.base import Backend
from decguard_pipeline.backends.runner import decide_all
from decguard_pipeline.core.contract import DecisionSpec
from decguard_pipeline.core.decision import DecisionInput, DecisionRequest, select_many
from decguard_pipeline.core.errors import ReportError
from decguard_pipeline.core.properties.transforms import Presentation


@dataclass(frozen=True, slots=True)
class Example:
    """One request to make: its id, the input and how the options are shown."""

    request_id: str
    input: DecisionInput
    presentation: Presentation | None = None


@dataclass
class Decided:
    """Outcomes of examples, by index: canonical probabilities or a typed error."""

    spec: DecisionSpec
    backend: str
    provider: str
    request_ids: list[str]
    probs: np.ndarray  # (m, k) canonical order, NaN rows where errored
    selected: np.ndarray  # -1 where errored
    confidence: np.ndarray
    latency_ms: np.ndarray
    model: list[str | None]
    model_version: list[str | None]
    metadata: list[dict[str, Any]]
    error_kind: list[str | None]
    error_message: list[str | None]
    _columns: tuple[list[Any], ...] | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.request_ids)

    def ok(self, i: int) -> bool:
        return bool(self.selected[i] >= 0)

    def error(self, i: int) -> dict[str, str] | None:
        if self.ok(i):
            return None
        return {"kind": str(self.error_kind[i]), "message": str(self.error_message[i])}

    def result(self, i: int) -> dict[str, Any] | None:
        """DecGuard's DecisionResult (over contract labels) for example ``i``."""
        if not self.ok(i):
            return None
        if self._columns is None:  # Python values once, not one NumPy conversion per field
            self._columns = (
                self.probs.tolist(),
                self.selected.tolist(),
                self.confidence.tolist(),
                self.latency_ms.tolist(),
            )
        probs, selected, confidence, latency = self._columns
        labels = list(self.spec.labels)
        return {
            "case_id": self.request_ids[i],
            "decision": self.spec.name,
            "decision_type": self.spec.type,
            "labels": labels,
            "probabilities": dict(zip(labels, probs[i], strict=True)),
            "selected": labels[selected[i]],
            "confidence": confidence[i],
            "backend": self.backend,
            "provider": self.provider,
            "model": self.model[i],
            "model_version": self.model_version[i],
            "latency_ms": latency[i],
            "metadata": self.metadata[i],
        }


def _positions(presentation: Presentation | None, labels: tuple[str, ...]) -> list[int]:
    """For each contract label (canonical order), its position among the shown labels."""
    if presentation is None:
        return list(range(len(labels)))
    where = {label: j for j, (_, label) in enumerate(presentation)}
    if len(presentation) != len(labels) or set(where) != set(labels):
        raise ReportError(
            f"presentation {[list(p) for p in presentation]} does not show each contract label "
            f"{list(labels)} exactly once"
        )
    return [where[label] for label in labels]


def decide_examples(
    backend: Backend,
    spec: DecisionSpec,
    examples: Sequence[Example],
    *,
    tolerance: float,
    max_concurrency: int,
) -> Decided:
    """Decide every example (request ``case_id`` = its id); outcomes in example order."""
    labels = spec.labels
    requests = []
    positions = np.empty((len(examples), len(labels)), dtype=np.int64)
    for i, example in enumerate(examples):
        shown = spec
        if example.presentation is not None:
            shown = spec.with_labels(tuple(s for s, _ in example.presentation))
        requests.append(DecisionRequest(example.request_id, shown, example.input))
        positions[i] = _positions(example.presentation, labels)
    out = decide_all(
        backend, requests, k=len(labels), max_concurrency=max_concurrency, tolerance=tolerance
    )
    probs = np.take_along_axis(out.probs, positions, axis=1) if len(examples) else out.probs
    selected, confidence = select_many(probs)
    return Decided(
        spec=spec,
        backend=backend.name,
        provider=backend.provider,
        request_ids=[e.request_id for e in examples],
        probs=probs,
        selected=selected,
        confidence=confidence,
        latency_ms=out.latency,
        model=out.model,
        model_version=out.model_version,
        metadata=out.metadata,
        error_kind=out.error_kind,
        error_message=out.error_message,
    )
