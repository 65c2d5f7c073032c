"""Where a batch's answers are gathered, in dataset order: every request ends as a
prediction or a typed per-case error, stored by its index. This is where answers leave the
backend (see ``backends/runner.py``): metadata too large or too deep to store becomes an
``invalid_response``, and metadata, model names and error messages are scrubbed of registered
secrets; answers the response cache knows are replayed and new ones recorded as they arrive."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from decguard_pipeline.backends.base import Backend
from decguard_pipeline.core.cache.answers import Hits
from decguard_pipeline.core.decision import (
    DEFAULT_MAX_METADATA_BYTES,
    Prediction,
    metadata_problem,
    select_many,
    sum_message,
    validate_many,
)
from decguard_pipeline.core.errors import BackendError, DecGuardError, InvalidResponse
from decguard_pipeline.core.exact import row_fsum
from decguard_pipeline.core.secrets import redact, scrub_optional, scrub_text
from decguard_pipeline.core.usage import known_tokens, known_usage

FLUSH_EVERY = 4096
_EMPTY: dict[str, Any] = {}


def _describe(exc: Exception) -> tuple[str, str]:
    """(kind, message) of a per-request failure; configuration errors propagate."""
    if isinstance(exc, BackendError):
        return exc.kind, str(exc)
    if isinstance(exc, DecGuardError):
        raise exc
    return "exception", f"{type(exc).__name__}: {exc}"


class Collector:
    """Validated results by request index; raw answers are validated in vectorised batches,
    one per presented label order."""

    def __init__(
        self,
        n: int,
        labels_of: Callable[[int], tuple[str, ...]],
        k: int,
        tolerance: float,
        max_metadata_bytes: int = DEFAULT_MAX_METADATA_BYTES,
    ) -> None:
        self.labels_of = labels_of
        self.k = k
        self.tolerance = tolerance
        self.max_metadata_bytes = max_metadata_bytes
        # metadata that cannot be stored, by row: the error unless the probabilities fail
        self.unstorable: dict[int, str] = {}
        self.probs = np.full((n, k), np.nan)
        self.latency = np.full(n, np.nan)
        self.model: list[str | None] = [None] * n
        self.model_version: list[str | None] = [None] * n
        self.metadata: list[dict[str, Any]] = [_EMPTY] * n
        self.error_kind: list[str | None] = [None] * n
        self.error_message: list[str | None] = [None] * n
        self._rows: list[int] = []  # answered, not yet validated: request index and raw answer
        self._raws: list[Any] = []
        # tokens per case, allocated when a backend first reports usage
        self.prompt_tokens: np.ndarray | None = None
        self.completion_tokens: np.ndarray | None = None
        # set when every request presents the same labels (a golden run)
        self.same_labels: tuple[str, ...] | None = None
        # or: the presented label order of every request as an index into ``label_sets``
        # (a property run shows a few orders many times)
        self.label_slots: np.ndarray | None = None
        self.label_sets: list[tuple[str, ...]] = []
        # the response cache's recorder of this batch (``backends.cache.Recorder``): every
        # answer that passes validation
        self.sink: Any = None

    def answer(
        self, i: int, prediction: Prediction, latency_ms: float, default_model: str | None
    ) -> None:
        self.latency[i] = latency_ms
        self.model[i] = scrub_optional(prediction.model) or default_model
        self.model_version[i] = scrub_optional(prediction.model_version)
        if prediction.metadata:
            self._keep_metadata(i, prediction.metadata)
        if prediction.usage is not None:
            self.spent(i, prediction.usage)
        self._rows.append(i)
        self._raws.append(prediction.probabilities)
        sink = self.sink
        if sink is not None and sink.journaling:  # a paid answer is kept the moment it arrives
            sink.journal(self, i, prediction.probabilities)
        if len(self._rows) >= FLUSH_EVERY or (sink is not None and sink.store.due()):
            self.flush()

    def answer_many(
        self,
        rows: list[int],
        predictions: list[Prediction],
        latencies: list[float],
        default_model: str | None,
    ) -> None:
        """``answer`` for a batch (the inline loop): column writes instead of n."""
        if not rows:
            return
        self.latency[rows] = latencies
        models = [scrub_optional(p.model) or default_model for p in predictions]
        versions = [scrub_optional(p.model_version) for p in predictions]
        first, last = rows[0], rows[-1]
        if last - first == len(rows) - 1:  # consecutive rows: slice writes
            self.model[first : last + 1] = models
            self.model_version[first : last + 1] = versions
        else:
            for i, model, version in zip(rows, models, versions, strict=True):
                self.model[i], self.model_version[i] = model, version
        for i, prediction in zip(rows, predictions, strict=True):
            if prediction.metadata:
                self._keep_metadata(i, prediction.metadata)
            if prediction.usage is not None:
                self.spent(i, prediction.usage)
        self._rows.extend(rows)
        self._raws.extend([p.probabilities for p in predictions])
        self.flush()

    def replay(self, hits: Hits, default_model: str | None) -> None:
        """Answers known without asking (the response cache, a stored report), as the model
        gave them: validated as answers are (the stored values are finite and non-negative;
        the sum is checked against this run's tolerance, metadata against its limits)."""
        rows = hits.rows
        if not len(rows):
            return
        # counts stored before they were checked (a cache or report may hold 2^63, or the
        # int64 it overflowed to) are unknown: for this run and for the cache's own counters
        hits.prompt_tokens, hits.completion_tokens = known_tokens(
            hits.prompt_tokens, hits.completion_tokens
        )
        probs = hits.probs
        totals = row_fsum(probs)
        outside = np.abs(totals - 1.0) > self.tolerance
        outside |= ~np.isfinite(probs).all(axis=1) | (probs < 0.0).any(axis=1)
        self.probs[rows] = probs
        self.latency[rows] = hits.latency_ms
        pick = rows.tolist()
        models = [model or default_model for model in hits.model]
        first, last = pick[0], pick[-1]
        if last - first == len(pick) - 1:  # consecutive rows: slice writes
            self.model[first : last + 1] = models
            self.model_version[first : last + 1] = hits.model_version
        else:
            for i, model, version in zip(pick, models, hits.model_version, strict=True):
                self.model[i], self.model_version[i] = model, version
        for p in (p for p, meta in enumerate(hits.metadata) if meta):
            i = pick[p]
            self._keep_metadata(i, hits.metadata[p])
            problem = self.unstorable.pop(i, None)
            if problem is not None and not outside[p]:
                self._void(i, InvalidResponse.kind, problem)
        known = ~(np.isnan(hits.prompt_tokens) | np.isnan(hits.completion_tokens))
        if known.any():
            for p in np.flatnonzero(known).tolist():
                self.spent(pick[p], (hits.prompt_tokens[p], hits.completion_tokens[p]))
        for p in np.flatnonzero(outside).tolist():
            self._void(pick[p], InvalidResponse.kind, sum_message(float(totals[p]), self.tolerance))

    def _void(self, i: int, kind: str, message: str) -> None:
        """Row ``i`` ends in an error after all: no decision, no latency, no model."""
        self.fail(i, kind, message)
        self.probs[i] = np.nan
        self.latency[i] = np.nan
        self.model[i] = self.model_version[i] = None
        self.metadata[i] = _EMPTY

    def tokens(self, i: int) -> tuple[int | None, int | None]:
        """The tokens case ``i`` cost, when known."""
        if self.prompt_tokens is None or self.completion_tokens is None:
            return None, None
        prompt, completion = self.prompt_tokens[i], self.completion_tokens[i]
        if np.isnan(prompt) or np.isnan(completion):
            return None, None
        return int(prompt), int(completion)

    def spent(self, i: int, usage: Any) -> None:
        """Tokens case ``i`` cost; kept even when its answer then fails validation (the
        tokens were paid for). A usage that cannot be real (``core.usage.known_usage``: a
        plugin's, or a server's figure beyond int64) is unknown."""
        counts = known_usage(usage)
        if counts is None:
            return
        if self.prompt_tokens is None or self.completion_tokens is None:
            n = len(self.latency)
            self.prompt_tokens, self.completion_tokens = np.full(n, np.nan), np.full(n, np.nan)
        self.prompt_tokens[i], self.completion_tokens[i] = counts

    def failed(self, i: int, exc: Exception) -> None:
        """Request ``i`` raised ``exc``: a typed error, plus the tokens it had already cost
        when the backend says (``exc.usage``). Configuration errors propagate."""
        self.fail(i, *_describe(exc))
        usage = getattr(exc, "usage", None)
        if usage is not None:
            self.spent(i, usage)

    def _keep_metadata(self, i: int, metadata: Any) -> None:
        problem = metadata_problem(metadata, self.max_metadata_bytes)
        if problem is None:
            self.metadata[i] = redact(dict(metadata))
        else:
            self.unstorable[i] = problem

    def fail(self, i: int, kind: str, message: str) -> None:
        self.error_kind[i] = kind
        self.error_message[i] = scrub_text(message)

    def decided(self, backend: Backend, probs: np.ndarray) -> dict[str, Any]:
        """The decided columns every result type holds, as its keyword arguments: DecGuard's
        selection over ``probs`` (these probabilities, or the caller's reordering of them)
        with the latencies, models and errors collected here."""
        selected, confidence = select_many(probs)
        return {
            "backend": backend.name,
            "provider": backend.provider,
            "probs": probs,
            "selected": selected,
            "confidence": confidence,
            "latency_ms": self.latency,
            "model": self.model,
            "model_version": self.model_version,
            "error_kind": self.error_kind,
            "error_message": self.error_message,
        }

    def _groups(self, rows: list[int]) -> list[tuple[tuple[str, ...], list[int]]]:
        """Positions in ``rows`` by presented label order, in order of first appearance."""
        if self.same_labels is not None:  # golden runs: one group, known without looking
            return [(self.same_labels, list(range(len(rows))))]
        if self.label_slots is not None:
            slots = self.label_slots[np.asarray(rows, dtype=np.intp)]
            found, first = np.unique(slots, return_index=True)
            return [
                (self.label_sets[slot], np.flatnonzero(slots == slot).tolist())
                for slot in found[np.argsort(first)].tolist()
            ]
        groups: dict[tuple[str, ...], list[int]] = {}
        for position, i in enumerate(rows):
            groups.setdefault(self.labels_of(i), []).append(position)
        return list(groups.items())

    def flush(self) -> None:
        """Validate the answers held; the response cache then keeps the valid ones (and
        stores what it kept when its interval has passed)."""
        if self._rows:
            self._validate()
        if self.sink is not None:
            self.sink.flushed()

    def _validate(self) -> None:
        rows, raws = self._rows, self._raws
        self._rows, self._raws = [], []
        for labels, positions in self._groups(rows):
            if len(positions) == len(rows):
                group_rows, group_raws = rows, raws
            else:
                group_rows = [rows[p] for p in positions]
                group_raws = [raws[p] for p in positions]
            batch = validate_many(labels, group_raws, tolerance=self.tolerance)
            self.probs[group_rows] = batch.probs
            bad = ~batch.ok
            if self.unstorable:  # rare: metadata too large/deep, unless the probabilities fail
                where = {i: p for p, i in enumerate(group_rows) if i in self.unstorable}
                for i, p in where.items():
                    problem = self.unstorable.pop(i)
                    if not bad[p]:
                        batch.errors[p], batch.kinds[p] = problem, InvalidResponse.kind
                        bad[p] = True
            for p in np.flatnonzero(bad).tolist():
                self._void(group_rows[p], batch.kinds[p] or "invalid_response", batch.errors[p])  # type: ignore[arg-type]
            if self.sink is not None:
                self.sink.keep(self, [group_rows[p] for p in np.flatnonzero(~bad).tolist()])
