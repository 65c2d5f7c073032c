"""The logits a calibrator is fitted on and applied to: the backend's own log-probabilities
when every decision carries them, else the log of the reported probabilities.

A backend may put the log-probability (or any score whose softmax is its distribution) of
each label into a result's metadata as ``logprobs``: a list in the order of the result's
``labels``, ``null`` for a label it gave no number (probability 0). The ``openai`` provider
does (the option letters' first-token log-probabilities, or each option's completion
log-likelihood); any other backend may. Those are the numbers the model computed; the
probabilities DecGuard stores are their softmax, rounded, and a probability below 1e-308
is 0 where its logprob was still a number. Without them the logits are ``log p`` of the
reported probabilities, unfloored: a label given probability 0 has logit −inf (it keeps
probability 0 under temperature and vector scaling) rather than log(1e-15), which would
make the fitted temperature depend on that constant.

Which of the two a calibrator was fitted on is recorded (:data:`SOURCES`) and applied the
same way at decision time.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

BACKEND = "backend_logprobs"  # metadata.logprobs of every decision
LOG_P = "log_probabilities"  # log of the reported probabilities
SOURCES = {
    BACKEND: "the backend's log-probabilities (result metadata.logprobs)",
    LOG_P: "log of the reported probabilities (the backend returned no log-probabilities)",
}
KEY = "logprobs"  # the result metadata key a backend puts them under


def log_probabilities(probs: np.ndarray) -> np.ndarray:
    """``log p`` elementwise, −inf where p is 0 (no floor)."""
    p = np.asarray(probs, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.log(p)


def metadata_logprobs(
    metadata: Mapping[str, Any] | None, shown: Sequence[str], labels: Sequence[str]
) -> np.ndarray | None:
    """The ``logprobs`` of one result's metadata in the order of ``labels`` (the contract's),
    given as a list in the order ``shown`` (the result's ``labels``); None when absent or not
    one number (or null) per label. Null is −inf; +inf and NaN are not log-probabilities."""
    raw = metadata.get(KEY) if isinstance(metadata, Mapping) else None
    if not isinstance(raw, list) or len(raw) != len(shown):
        return None
    by_label: dict[str, float] = {}
    for label, value in zip(shown, raw, strict=True):
        if value is None:
            by_label[label] = -math.inf
        elif isinstance(value, int | float) and not isinstance(value, bool) and value < math.inf:
            if math.isnan(value):
                return None
            by_label[label] = float(value)
        else:
            return None
    if set(by_label) != set(labels) or all(v == -math.inf for v in by_label.values()):
        return None
    return np.array([by_label[label] for label in labels], dtype=np.float64)


def results_logits(
    probs: np.ndarray,
    metadata: Sequence[Mapping[str, Any] | None],
    labels: Sequence[str],
    *,
    shown: Sequence[Sequence[str]] | None = None,
) -> tuple[np.ndarray, str]:
    """``(logits (n, k), source)`` of decided cases: the backend's log-probabilities when every
    case carries them (``shown``: each case's presented label order, default the contract's),
    else ``log p`` of ``probs``. Mixed sets (some cases without) use ``log p`` for all: the
    two differ by a shift per row, which vector scaling does not ignore."""
    n = len(metadata)
    if n:
        rows = []
        for i, meta in enumerate(metadata):
            row = metadata_logprobs(meta, labels if shown is None else shown[i], labels)
            if row is None:
                break
            rows.append(row)
        else:
            return np.vstack(rows), BACKEND
    return log_probabilities(probs), LOG_P


def decision_logits(
    result: Mapping[str, Any], labels: Sequence[str], source: str
) -> np.ndarray | None:
    """The logits of one DecisionResult dict as a calibrator fitted on ``source`` reads them:
    None when it was fitted on the backend's log-probabilities and this answer has none."""
    if source == BACKEND:
        return metadata_logprobs(result.get("metadata"), result["labels"], labels)
    probabilities = result["probabilities"]
    return log_probabilities(np.array([probabilities[label] for label in labels]))
