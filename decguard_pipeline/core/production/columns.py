"""Production records, column-wise.

A record set is a handful of NumPy columns (codes for labels, actions and flags, floats for
confidence, latency, cost and the per-record Brier/NLL terms) plus the ids as an Arrow
string array: ten million records take a few hundred megabytes, never ten million Python
objects. Probabilities are only needed while a record is checked (and when the report's
``records`` are written, from the source again), so they are not kept.

Metadata values that segment the records, and ``model_version``, are kept as integer codes
into a :class:`Codebook` of distinct values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from decguard_pipeline.core.contract.spec import DecisionSpec
from decguard_pipeline.core.exact import row_fsum

NLL_FLOOR = 1e-15
UNKNOWN = -1  # code of an absent outcome, correctness, action or fallback
ACTION_CODES = {"accept": 0, "abstain": 1, "fallback": 2, "human_review": 3}
ABSTAIN, FALLBACK, HUMAN_REVIEW = 1, 2, 3

Identity = tuple[str, str]


def identity(value: Any) -> Identity:
    """How DecGuard tells segment values apart and orders them: type name, then repr."""
    return (type(value).__name__, repr(value))


@dataclass
class Codebook:
    """Distinct values in order of first appearance; records hold their index."""

    values: list[Any] = field(default_factory=list)
    index: dict[Identity, int] = field(default_factory=dict)
    # the first record whose value cannot segment: (position, record id, problem)
    invalid: tuple[int, str, str] | None = None

    def code(self, value: Any) -> int:
        key = identity(value)
        found = self.index.get(key)
        if found is None:
            found = self.index[key] = len(self.values)
            self.values.append(value)
        return found

    def codes(self, values: list[Any]) -> np.ndarray:
        return np.fromiter((self.code(v) for v in values), dtype=np.int32, count=len(values))

    def note_invalid(self, position: int, record_id: str, problem: str) -> None:
        if self.invalid is None or position < self.invalid[0]:
            self.invalid = (position, record_id, problem)


def segment_problem(value: Any) -> str | None:
    """Why a metadata value cannot segment records (DecGuard's wording), or None."""
    if isinstance(value, float) and not math.isfinite(value):
        return "must be finite"
    if value is None or isinstance(value, str | int | float | bool):
        return None
    return "must be a string, number, boolean or null when used as a segment"


@dataclass
class Columns:
    """Validated records: one row each, in dataset order."""

    ids: pa.ChunkedArray
    selected: np.ndarray  # int16 label index
    confidence: np.ndarray  # float64, the selected label's probability
    outcome: np.ndarray  # int16 label index, -1 unknown
    correct: np.ndarray  # int8 1/0, -1 unknown
    action: np.ndarray  # int8 ACTION_CODES, -1 unknown
    fallback: np.ndarray  # int8 1/0, -1 unknown
    latency_ms: np.ndarray  # float64, NaN unknown
    cost: np.ndarray  # float64, NaN unknown
    brier: np.ndarray  # float64 per-record Brier term, NaN without outcome
    nll: np.ndarray  # float64 per-record -ln p(outcome), NaN without outcome
    model_version: np.ndarray  # int32 codes into ``versions``
    versions: Codebook
    segments: dict[str, np.ndarray]  # key -> int32 codes into ``segment_values[key]``
    segment_values: dict[str, Codebook]

    def __len__(self) -> int:
        return len(self.selected)

    # values derived once and shared by every grouping (exact-sum decompositions, bins)
    derived: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)


def outcome_terms(probs: np.ndarray, outcome: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-record Brier term (exact row sum of squared errors) and -ln max(p, 1e-15) of the
    outcome label; NaN where the outcome is unknown."""
    n = len(outcome)
    brier = np.full(n, np.nan)
    nll = np.full(n, np.nan)
    rows = np.flatnonzero(outcome >= 0)
    if len(rows):
        sub = probs[rows]
        onehot = np.zeros_like(sub)
        onehot[np.arange(len(rows)), outcome[rows]] = 1.0
        brier[rows] = row_fsum((sub - onehot) ** 2)
        p = np.maximum(sub[np.arange(len(rows)), outcome[rows]], NLL_FLOOR).tolist()
        nll[rows] = [-v for v in map(math.log, p)]
    return brier, nll


_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)


def id_hashes(ids: pa.Array) -> np.ndarray:
    """A 64-bit hash of each id, read eight bytes at a time from the Arrow buffers; equal ids
    hash alike, and a collision only costs an exact comparison (:func:`first_repeat`)."""
    ids = ids.cast(pa.large_string()) if ids.type != pa.large_string() else ids
    n = len(ids)
    offsets = np.frombuffer(ids.buffers()[1], dtype=np.int64)[ids.offset : ids.offset + n + 1]
    raw = ids.buffers()[2]
    data = np.zeros((0 if raw is None else raw.size) + 8, dtype=np.uint8)
    if raw is not None:
        data[: raw.size] = np.frombuffer(raw, dtype=np.uint8)
    # every 8-byte window of the data, as one unsigned word (an overlapping strided view)
    words = np.ndarray((len(data) - 7,), dtype="<u8", buffer=data, strides=(1,))
    starts, lengths = offsets[:-1], np.diff(offsets)
    hashes = lengths.astype(np.uint64) * _MULTIPLIER
    longest = int(lengths.max()) if n else 0
    with np.errstate(over="ignore"):
        for step in range(0, longest, 8):
            left = np.clip(lengths - step, 0, 8).astype(np.uint64)
            mask = np.where(left == 8, np.uint64(0xFFFFFFFFFFFFFFFF),
                            (np.uint64(1) << (left * np.uint64(8))) - np.uint64(1))  # fmt: skip
            word = words[np.minimum(starts + step, len(words) - 1)] & mask
            hashes = (hashes ^ word) * _MULTIPLIER
            hashes ^= hashes >> np.uint64(29)
    return hashes


def first_repeat(hashes: np.ndarray, ids: pa.ChunkedArray) -> tuple[int, int] | None:
    """(first position, repeated position), 1-based, of the earliest record whose id was
    already used, or None when all ids are distinct. (Sorted values first: the positions,
    an argsort as large again, are needed only when some hash repeats; at ten million ids
    that keeps ~150 MB off the load's peak.)"""
    ranked = np.sort(hashes)
    if not (ranked[1:] == ranked[:-1]).any():
        return None
    del ranked
    order = np.argsort(hashes, kind="stable")
    ranked = hashes[order]
    same = np.flatnonzero(ranked[1:] == ranked[:-1])
    rows = np.unique(np.concatenate((order[same], order[same + 1])))
    texts = ids.take(pa.array(rows)).to_pylist()
    first: dict[str, int] = {}
    for row, text in zip(rows.tolist(), texts, strict=True):
        if text in first:
            return first[text] + 1, row + 1
        first[text] = row
    return None


@dataclass
class Batch:
    """The validated columns of one stretch of records, before they are concatenated."""

    ids: pa.Array
    probs: np.ndarray
    selected: np.ndarray
    outcome: np.ndarray
    correct: np.ndarray
    action: np.ndarray
    fallback: np.ndarray
    latency_ms: np.ndarray
    cost: np.ndarray
    model_version: np.ndarray
    segments: dict[str, np.ndarray]


class ColumnsBuilder:
    """Accumulates batches; probabilities become confidence and outcome terms on the way."""

    def __init__(self, spec: DecisionSpec, segment_keys: tuple[str, ...]) -> None:
        self.spec = spec
        self.keys = segment_keys
        self.versions = Codebook()
        self.segment_values = {key: Codebook() for key in segment_keys}
        self.parts: dict[str, list[Any]] = {}
        self.n = 0

    def add(self, batch: Batch) -> None:
        n = len(batch.selected)
        brier, nll = outcome_terms(batch.probs, batch.outcome)
        confidence = batch.probs[np.arange(n), batch.selected]
        # correctness follows from a label outcome when the record does not state it
        correct = np.where(
            (batch.correct < 0) & (batch.outcome >= 0),
            batch.outcome == batch.selected,
            batch.correct,
        )
        fields = {
            "ids": batch.ids,
            "id_hashes": id_hashes(batch.ids),
            "selected": batch.selected.astype(np.int16),
            "confidence": confidence,
            "outcome": batch.outcome.astype(np.int16),
            "correct": correct.astype(np.int8),
            "action": batch.action.astype(np.int8),
            "fallback": batch.fallback.astype(np.int8),
            "latency_ms": batch.latency_ms,
            "cost": batch.cost,
            "brier": brier,
            "nll": nll,
            "model_version": batch.model_version,
        }
        for key in self.keys:
            fields[f"segment:{key}"] = batch.segments[key]
        for name, value in fields.items():
            self.parts.setdefault(name, []).append(value)
        self.n += n

    def _cat(self, name: str, dtype: Any) -> np.ndarray:
        # parts are released as each column is joined: the peak is one column, not all
        parts = self.parts.pop(name, None)
        return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)

    def build(self) -> Columns:
        ids = pa.chunked_array(self.parts.pop("ids", []), type=pa.string())
        self.parts.pop("id_hashes", None)
        return Columns(
            ids=ids,
            selected=self._cat("selected", np.int16),
            confidence=self._cat("confidence", np.float64),
            outcome=self._cat("outcome", np.int16),
            correct=self._cat("correct", np.int8),
            action=self._cat("action", np.int8),
            fallback=self._cat("fallback", np.int8),
            latency_ms=self._cat("latency_ms", np.float64),
            cost=self._cat("cost", np.float64),
            brier=self._cat("brier", np.float64),
            nll=self._cat("nll", np.float64),
            model_version=self._cat("model_version", np.int32),
            versions=self.versions,
            segments={k: self._cat(f"segment:{k}", np.int32) for k in self.keys},
            segment_values=self.segment_values,
        )
