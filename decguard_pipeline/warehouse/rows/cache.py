"""Rows of the ``responses`` table: answers (``core.cache.answers``) to Arrow and back.

Built column-wise (a 100,000-answer run is one table of a few arrays, not 100,000 dicts);
metadata is stored as JSON text, ``{}`` for the usual empty metadata.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from decguard_pipeline.core.cache.answers import Answers, Hits
from decguard_pipeline.warehouse.schema.cache import RESPONSES

EMPTY_JSON = "{}"
# the columns a lookup reads (``labels`` is not needed: the key names the labels shown)
LOOKUP_COLUMNS = [
    "key",
    "probabilities",
    "model",
    "model_version",
    "latency_ms",
    "prompt_tokens",
    "completion_tokens",
    "metadata_json",
    "answered_at",
]


def metadata_json(metadata: dict[str, Any]) -> str | None:
    """Result metadata as JSON text; None when JSON cannot hold it (the answer is then not
    cached, since replaying it would not give back the same metadata)."""
    if not metadata:
        return EMPTY_JSON
    try:
        return json.dumps(metadata, ensure_ascii=False, separators=(",", ":"), allow_nan=True)
    except (TypeError, ValueError):
        return None


def _tokens(values: np.ndarray) -> pa.Array:
    known = ~np.isnan(values)
    return pa.array(np.where(known, values, 0).astype(np.int64), mask=~known)


def _label_lists(labels: Sequence[tuple[str, ...]]) -> pa.Array:
    """``list<string>`` per row from a few distinct label tuples, by index (``take``)."""
    slot_of: dict[tuple[str, ...], int] = {}
    slots = [slot_of.setdefault(shown, len(slot_of)) for shown in labels]
    distinct = pa.array([list(shown) for shown in slot_of], type=pa.list_(pa.string()))
    return distinct.take(pa.array(slots, type=pa.int32()))


def answers_table(
    answers: Answers, *, backend: str, provider: str, keyed_version: str
) -> tuple[pa.Table, int]:
    """The rows of ``answers`` that can be stored, and how many that is."""
    texts = [metadata_json(m) for m in answers.metadata]
    keep = [i for i, text in enumerate(texts) if text is not None]
    if len(keep) != len(answers):
        answers = _subset(answers, keep)
        texts = [texts[i] for i in keep]
    n, k = len(answers), answers.probs.shape[1] if answers.probs.ndim == 2 else 0
    offsets = pa.array(np.arange(n + 1, dtype=np.int32) * k)
    probabilities = pa.ListArray.from_arrays(offsets, pa.array(answers.probs.reshape(-1)))
    at = datetime.fromtimestamp(answers.answered_at, UTC)
    nothing = pa.nulls(n, pa.string())
    columns = {
        "contract": nothing,
        "target": nothing,
        "run_id": nothing,
        "recorded_at": pa.nulls(n, pa.timestamp("us", "UTC")),
        "key": pa.array(answers.keys, pa.string()),
        "case_id": pa.array(answers.case_ids, pa.string()),
        "backend": pa.array([backend] * n, pa.string()),
        "provider": pa.array([provider] * n, pa.string()),
        "keyed_version": pa.array([keyed_version] * n, pa.string()),
        "labels": _label_lists(answers.labels),
        "probabilities": probabilities,
        "model": pa.array(answers.model, pa.string()),
        "model_version": pa.array(answers.model_version, pa.string()),
        "latency_ms": pa.array(answers.latency_ms, pa.float64()),
        "prompt_tokens": _tokens(answers.prompt_tokens),
        "completion_tokens": _tokens(answers.completion_tokens),
        "metadata_json": pa.array(texts, pa.string()),
        "answered_at": pa.array([at] * n, pa.timestamp("us", "UTC")),
    }
    return pa.table(columns, schema=RESPONSES), n


def _subset(answers: Answers, keep: list[int]) -> Answers:
    index = np.asarray(keep, dtype=np.intp)
    return Answers(
        keys=[answers.keys[i] for i in keep],
        case_ids=[answers.case_ids[i] for i in keep],
        labels=[answers.labels[i] for i in keep],
        probs=answers.probs[index],
        model=[answers.model[i] for i in keep],
        model_version=[answers.model_version[i] for i in keep],
        latency_ms=answers.latency_ms[index],
        prompt_tokens=answers.prompt_tokens[index],
        completion_tokens=answers.completion_tokens[index],
        metadata=[answers.metadata[i] for i in keep],
        answered_at=answers.answered_at,
    )


def journal_table(
    rows: list[dict[str, Any]], *, backend: str, provider: str, keyed_version: str
) -> pa.Table:
    """Rows of a journal (``warehouse/responses.py``) as ``responses`` rows."""
    texts = [metadata_json(r.get("metadata") or {}) for r in rows]
    records = [
        {
            "key": r["key"],
            "case_id": r["case_id"],
            "backend": backend,
            "provider": provider,
            "keyed_version": keyed_version,
            "labels": r["labels"],
            "probabilities": [float(v) for v in r["probabilities"]],
            "model": r["model"],
            "model_version": r["model_version"],
            "latency_ms": r["latency_ms"],
            "prompt_tokens": r["prompt_tokens"],
            "completion_tokens": r["completion_tokens"],
            "metadata_json": text,
            "answered_at": datetime.fromtimestamp(r["answered_at"], UTC),
        }
        for r, text in zip(rows, texts, strict=True)
        if text is not None
    ]
    return pa.Table.from_pylist(records, schema=RESPONSES)


def _floats(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A numeric column as float64 with NaN for nulls."""
    return np.asarray(pc.cast(column, pa.float64()).to_numpy(zero_copy_only=False), dtype=float)


def hits_from(table: pa.Table, positions: np.ndarray, rows: np.ndarray, k: int) -> Hits:
    """The answers at ``positions`` of ``table`` (LOOKUP_COLUMNS) for the requests ``rows``;
    a stored answer with another number of labels than ``k`` is left out (it cannot be one
    of these requests' answers)."""
    picked = table.take(pa.array(positions, type=pa.int64()))
    lists = picked.column("probabilities").combine_chunks()
    lengths = pc.list_value_length(lists).to_numpy(zero_copy_only=False)
    fits = lengths == k
    if not fits.all():
        keep = np.flatnonzero(fits)
        picked, rows = picked.take(pa.array(keep)), rows[keep]
        lists = picked.column("probabilities").combine_chunks()
    values = pc.list_flatten(lists).to_numpy(zero_copy_only=False)
    probs = np.asarray(values, dtype=float).reshape(len(rows), k)
    texts = picked.column("metadata_json").to_pylist()
    return Hits(
        rows=np.asarray(rows, dtype=np.intp),
        probs=probs,
        latency_ms=_floats(picked.column("latency_ms")),
        model=picked.column("model").to_pylist(),
        model_version=picked.column("model_version").to_pylist(),
        metadata=[{} if t == EMPTY_JSON or t is None else json.loads(t) for t in texts],
        prompt_tokens=_floats(picked.column("prompt_tokens")),
        completion_tokens=_floats(picked.column("completion_tokens")),
    )
