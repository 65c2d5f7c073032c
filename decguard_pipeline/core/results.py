"""Case results, column-wise: one row per dataset case holding a decision or a typed error.

Every case ends as exactly one of the two; nothing is dropped. Probabilities live in an
``(n, k)`` float matrix in canonical label order (NaN rows for errored cases), so metrics
are column operations and a million results stay small.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from decguard_pipeline.core.contract.spec import DecisionSpec
from decguard_pipeline.core.decision import DecisionInput


@dataclass
class CaseResults:
    spec: DecisionSpec
    backend: str  # contract backend name
    provider: str
    case_ids: list[str]
    inputs: list[DecisionInput]
    expected: list[str | None]
    metadata: list[dict[str, Any]]
    probs: np.ndarray  # (n, k) float64, NaN rows where errored
    selected: np.ndarray  # (n,) int64 label index, -1 where errored
    confidence: np.ndarray  # (n,) float64, NaN where errored
    latency_ms: np.ndarray  # (n,) float64, NaN where errored
    model: list[str | None]
    model_version: list[str | None]
    result_metadata: list[dict[str, Any]]
    error_kind: list[str | None]
    error_message: list[str | None]
    # The case id each result carries; differs from case_ids only for transformed cases.
    result_ids: list[str] | None = None
    # Tokens each case cost (NaN where the backend did not say); None when no case reported
    # usage. Extension data: never part of DecGuard's report.
    prompt_tokens: np.ndarray | None = None
    completion_tokens: np.ndarray | None = None
    _cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.case_ids)

    @property
    def labels(self) -> tuple[str, ...]:
        return self.spec.labels

    @property
    def ok(self) -> np.ndarray:
        """Rows holding a decision."""
        if "ok" not in self._cache:
            self._cache["ok"] = self.selected >= 0
        return self._cache["ok"]

    @property
    def expected_index(self) -> np.ndarray:
        """Label index of ``expected``; -1 where unlabeled."""
        if "expected_index" not in self._cache:
            index: dict[str | None, int] = {label: i for i, label in enumerate(self.labels)}
            index[None] = -1
            self._cache["expected_index"] = np.fromiter(
                map(index.__getitem__, self.expected), dtype=np.int64, count=len(self.expected)
            )
        return self._cache["expected_index"]

    def errors_by_kind(self) -> dict[str, int]:
        counts = Counter(kind for kind in self.error_kind if kind is not None)
        return dict(sorted(counts.items()))

    def take(self, rows: np.ndarray | list[int]) -> CaseResults:
        """The results of ``rows``, in that order."""
        rows = np.asarray(rows, dtype=np.int64)
        pick = rows.tolist()

        def lst(values: list[Any]) -> list[Any]:
            return [values[i] for i in pick]

        return CaseResults(
            spec=self.spec,
            backend=self.backend,
            provider=self.provider,
            case_ids=lst(self.case_ids),
            inputs=lst(self.inputs),
            expected=lst(self.expected),
            metadata=lst(self.metadata),
            probs=self.probs[rows],
            selected=self.selected[rows],
            confidence=self.confidence[rows],
            latency_ms=self.latency_ms[rows],
            model=lst(self.model),
            model_version=lst(self.model_version),
            result_metadata=lst(self.result_metadata),
            error_kind=lst(self.error_kind),
            error_message=lst(self.error_message),
            result_ids=None if self.result_ids is None else lst(self.result_ids),
            prompt_tokens=None if self.prompt_tokens is None else self.prompt_tokens[rows],
            completion_tokens=(
                None if self.completion_tokens is None else self.completion_tokens[rows]
            ),
        )

    def row_probabilities(self, i: int) -> dict[str, float] | None:
        if self.selected[i] < 0:
            return None
        return dict(zip(self.labels, self.probs[i].tolist(), strict=True))


def served_version(meta: dict[str, Any], results: CaseResults) -> str | None:
    """The model version of a run: the backend's (its metadata), else the one every answer
    reports."""
    versions = {v for v in results.model_version if v is not None}
    return meta["model_version"] or (versions.pop() if len(versions) == 1 else None)
