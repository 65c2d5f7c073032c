"""Send transformed examples through the concurrent runner and map the answers back.

A request shows the labels of its presentation in that order; the model answers in shown
labels, which are mapped back to contract labels (``p[label] = answer[shown]``) and put in
canonical order before the selected label and confidence are recomputed (DecGuard §9.2).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any

import numpy as np

from decguard_pipeline.backends.base import Backend
from decguard_pipeline.backends.runner import decide_all
from decguard_pipeline.core.contract import DecisionSpec
from decguard_pipeline.core.decision import DecisionInput, DecisionRequest
from decguard_pipeline.core.errors import ReportError
from decguard_pipeline.core.properties.transform import Presentation


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
        return self.results([i])[0]

    def results(self, indices: Sequence[int]) -> list[dict[str, Any]]:
        """``result(i)`` for each of ``indices`` (all decided), built column-wise: each
        column is gathered and read as Python values once, then every result is one dict
        display. (Results of one run share their ``labels`` list, as they share metadata.)"""
        rows = np.asarray(indices, dtype=np.intp)
        labels = self.spec.labels
        label_list = list(labels)
        probabilities = map(dict, map(zip, repeat(labels), self.probs[rows].tolist()))
        selected = map(labels.__getitem__, self.selected[rows].tolist())
        picks = [self.request_ids, self.model, self.model_version, self.metadata]
        if not np.array_equal(rows, np.arange(len(self))):  # else every row, in order
            picks = [list(map(column.__getitem__, indices)) for column in picks]
        ids, model, version, metadata = picks
        name, kind, backend, provider = self.spec.name, self.spec.type, self.backend, self.provider
        return [
            {
                "case_id": case_id,
                "decision": name,
                "decision_type": kind,
                "labels": label_list,
                "probabilities": probs,
                "selected": chosen,
                "confidence": confidence,
                "backend": backend,
                "provider": provider,
                "model": model_name,
                "model_version": model_version,
                "latency_ms": latency,
                "metadata": meta,
            }
            for case_id, probs, chosen, confidence, model_name, model_version, latency, meta in zip(
                ids, probabilities, selected, self.confidence[rows].tolist(), model, version,
                self.latency_ms[rows].tolist(), metadata, strict=True,
            )
        ]  # fmt: skip


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
    return decide_columns(
        backend,
        spec,
        [e.request_id for e in examples],
        [e.input for e in examples],
        [e.presentation for e in examples],
        tolerance=tolerance,
        max_concurrency=max_concurrency,
    )


def decide_columns(
    backend: Backend,
    spec: DecisionSpec,
    request_ids: list[str],
    inputs: Sequence[DecisionInput],
    presentations: Sequence[Presentation | None],
    *,
    tolerance: float,
    max_concurrency: int,
) -> Decided:
    """``decide_examples`` on columns (request ids, inputs, presentations). A run shows a
    few presentations many times: each one's shown decision and label positions are worked
    out once."""
    labels = spec.labels
    # per distinct presentation (by identity, then by value): its request decision and row
    # of label positions
    seen: dict[int, tuple[Presentation | None, int]] = {}
    by_value: dict[Presentation | None, int] = {}
    shown_specs: list[DecisionSpec] = []
    rows: list[list[int]] = []
    which: list[int] = []
    for presentation in presentations:
        found = seen.get(id(presentation))
        if found is None or found[0] is not presentation:
            slot = by_value.get(presentation)
            if slot is None:
                slot = by_value[presentation] = len(rows)
                shown = spec
                if presentation is not None:
                    shown = spec.with_labels(tuple(s for s, _ in presentation))
                shown_specs.append(shown)
                rows.append(_positions(presentation, labels))
            found = seen[id(presentation)] = (presentation, slot)
        which.append(found[1])
    requests = list(map(DecisionRequest, request_ids, map(shown_specs.__getitem__, which), inputs))
    slots = np.asarray(which, dtype=np.intp)
    out = decide_all(
        backend, requests, k=len(labels), max_concurrency=max_concurrency, tolerance=tolerance,
        label_slots=(slots, [shown.labels for shown in shown_specs]),
    )  # fmt: skip
    del requests
    probs = out.probs
    if len(request_ids):
        positions = np.asarray(rows, dtype=np.int64)[slots]
        probs = np.take_along_axis(probs, positions, axis=1)
    return Decided(
        spec=spec, request_ids=request_ids, metadata=out.metadata, **out.decided(backend, probs)
    )
