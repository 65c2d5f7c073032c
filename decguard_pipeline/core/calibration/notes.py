"""The ``calibration`` object a calibrator puts into a calibrated result's metadata
(``applying.py``), and the way back to the answer the backend gave (what ``--retry-errors``
replays from a calibrated report: the model's answer, not the calibrator's)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

KEY = "calibration"  # the result metadata key
BACKEND_NOTE = "backend"  # under it: a backend's own ``calibration`` metadata, kept


def raw_answer(
    probabilities: Sequence[float], metadata: Mapping[str, Any] | None, labels: Sequence[str]
) -> tuple[list[float], dict[str, Any]]:
    """``(probabilities in label order, metadata)`` as the backend answered: the calibrated
    values are replaced by the raw ones the note kept; a result without a note is returned
    as it is."""
    meta = dict(metadata or {})
    note = meta.get(KEY)
    raw = note.get("raw_probabilities") if isinstance(note, Mapping) else None
    if not isinstance(raw, Mapping) or set(raw) != set(labels):
        return list(probabilities), meta
    del meta[KEY]
    if BACKEND_NOTE in note:
        meta[KEY] = note[BACKEND_NOTE]
    return [float(raw[label]) for label in labels], meta
