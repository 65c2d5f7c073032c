"""Answers as columns: what a run records in the cache and what a lookup replays.

Probabilities are kept as validated, in the order the labels were *shown* (the key names that
order), so replaying an answer is putting its row back where the runner would have put the
model's answer; nothing is converted on the way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Answers:
    """Successful answers: one row per request."""

    keys: list[bytes]  # core.cache.key digests
    case_ids: list[str]
    labels: list[tuple[str, ...]]  # shown, per row
    probs: np.ndarray  # (n, k) in shown order
    model: list[str | None]
    model_version: list[str | None]
    latency_ms: np.ndarray
    prompt_tokens: np.ndarray  # NaN where the backend did not say
    completion_tokens: np.ndarray
    metadata: list[dict[str, Any]]
    answered_at: float | np.ndarray  # epoch seconds: one per batch, or one per row

    def __len__(self) -> int:
        return len(self.keys)

    @classmethod
    def concat(cls, parts: list[Answers]) -> Answers:
        if len(parts) == 1:
            return parts[0]
        return cls(
            keys=[key for part in parts for key in part.keys],
            case_ids=[case_id for part in parts for case_id in part.case_ids],
            labels=[shown for part in parts for shown in part.labels],
            probs=np.concatenate([part.probs for part in parts]),
            model=[model for part in parts for model in part.model],
            model_version=[version for part in parts for version in part.model_version],
            latency_ms=np.concatenate([part.latency_ms for part in parts]),
            prompt_tokens=np.concatenate([part.prompt_tokens for part in parts]),
            completion_tokens=np.concatenate([part.completion_tokens for part in parts]),
            metadata=[meta for part in parts for meta in part.metadata],
            answered_at=np.concatenate(
                [np.broadcast_to(np.asarray(part.answered_at, float), len(part)) for part in parts]
            ),
        )


@dataclass
class Hits:
    """Answers found for some requests of a run: ``rows`` are the requests' indices."""

    rows: np.ndarray  # (h,) intp
    probs: np.ndarray  # (h, k) shown order
    latency_ms: np.ndarray
    model: list[str | None]
    model_version: list[str | None]
    metadata: list[dict[str, Any]]
    prompt_tokens: np.ndarray  # NaN where unknown
    completion_tokens: np.ndarray
    source: str = "cache"  # or "report" (--retry-errors)
    extra: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.rows.shape[0])

    @classmethod
    def empty(cls, k: int, source: str = "cache") -> Hits:
        nothing = np.zeros(0)
        return cls(
            np.zeros(0, dtype=np.intp), np.zeros((0, k)), nothing, [], [], [], nothing,
            nothing, source,
        )  # fmt: skip

    def take(self, positions: np.ndarray) -> Hits:
        pick = positions.tolist()
        return Hits(
            self.rows[positions],
            self.probs[positions],
            self.latency_ms[positions],
            [self.model[p] for p in pick],
            [self.model_version[p] for p in pick],
            [self.metadata[p] for p in pick],
            self.prompt_tokens[positions],
            self.completion_tokens[positions],
            self.source,
        )
