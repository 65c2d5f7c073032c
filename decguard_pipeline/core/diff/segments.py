"""Per-segment comparison (spec §8 step 6): matched cases grouped by a metadata value of the
candidate's case, groups sorted by value, counts taken over each group's rows."""

from __future__ import annotations

import json
from dataclasses import dataclass
from itertools import repeat
from typing import Any

import numpy as np

from decguard_pipeline.core.diff.pairs import Comparison, Pairs
from decguard_pipeline.core.results import CaseResults

MISSING = "(missing)"


def segment_value(metadata: dict[str, Any], key: str) -> str:
    """A case's segment for ``key``: strings as they are, other JSON values as sorted-key
    JSON text, ``(missing)`` when the key is absent."""
    if key not in metadata:
        return MISSING
    value = metadata[key]
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


@dataclass
class Segment:
    key: str
    value: str
    rows: np.ndarray  # matched rows (candidate order) in this segment


def segment_values(metadata: list[dict[str, Any]], key: str) -> list[str]:
    """``segment_value(m, key)`` for every case's metadata ``m``: looked up in C, and only
    values that are not strings (rare) turned into JSON text one by one. A string value
    ``(missing)`` and an absent key are the same segment either way."""
    if set(map(type, metadata)) != {dict}:
        return [segment_value(m, key) for m in metadata]
    values = list(map(dict.get, metadata, repeat(key), repeat(MISSING)))
    if set(map(type, values)) == {str}:
        return values
    return [v if isinstance(v, str) else json.dumps(v, sort_keys=True) for v in values]


def group_rows(metadata: list[dict[str, Any]], keys: tuple[str, ...]) -> list[Segment]:
    """Every (key, value) group, keys in the given order, values sorted."""
    segments = []
    for key in keys:
        values = segment_values(metadata, key)
        # each value's code: its place among the distinct values, in order of appearance
        code_of = {value: code for code, value in enumerate(dict.fromkeys(values))}
        codes = np.fromiter(map(code_of.__getitem__, values), dtype=np.int64, count=len(values))
        order = np.argsort(codes, kind="stable")
        bounds = np.concatenate(([0], np.cumsum(np.bincount(codes, minlength=len(code_of)))))
        for value in sorted(code_of):
            code = code_of[value]
            segments.append(Segment(key, value, order[bounds[code] : bounds[code + 1]]))
    return segments


def hits_and_labeled(results: CaseResults) -> tuple[np.ndarray, np.ndarray]:
    """Per row: decided and correct; decided and labeled (a segment's accuracy population)."""
    exp = results.expected_index
    labeled = results.ok & (exp >= 0)
    return labeled & (results.selected == exp), labeled


def _rate(hits: int, n: int) -> float | None:
    return hits / n if n else None


def segments_section(
    pairs: Pairs, c: Comparison, segments: list[Segment], min_size: int
) -> list[dict[str, Any]]:
    b_hit, b_lab = hits_and_labeled(pairs.base)
    c_hit, c_lab = hits_and_labeled(pairs.cand)
    out = []
    for seg in segments:
        r = seg.rows

        def n(mask: np.ndarray, rows: np.ndarray = r) -> int:
            return int(np.count_nonzero(mask[rows]))

        compared = n(c.compared)
        base_acc = _rate(n(b_hit), n(b_lab))
        cand_acc = _rate(n(c_hit), n(c_lab))
        out.append(
            {
                "key": seg.key,
                "value": seg.value,
                "matched": len(r),
                "compared": compared,
                "baseline_accuracy": base_acc,
                "candidate_accuracy": cand_acc,
                "accuracy_drop": None
                if base_acc is None or cand_acc is None
                else base_acc - cand_acc,
                "answer_flip_rate": _rate(n(c.flip), compared),
                "gated": len(r) >= min_size,
            }
        )
    return out


def worst_segment(segments: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The gated segment with the largest accuracy drop (the first of equals)."""
    worst = None
    for seg in segments:
        drop = seg["accuracy_drop"]
        if seg["gated"] and drop is not None and (worst is None or drop > worst["accuracy_drop"]):
            worst = seg
    return worst
