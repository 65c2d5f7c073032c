"""Decide many requests on one asyncio event loop with bounded concurrency.

* Native async backends (http, systemone, openai, openjev): ``max_concurrency`` workers share one
  pooled session, so exactly that many requests are in flight and connections are reused.
* Synchronous plugins: the same workers hand ``predict`` to a pool of ``max_concurrency``
  threads.
* Inline backends (the mock): a plain loop; a thread hand-off would cost more than the call.

Latency is measured around the request itself: retries included; queueing excluded, and so
is the time a backend waited for its own rate limit (``Prediction.queued_ms``). Every
request ends as a prediction or a typed error, stored by index so results keep dataset
order. A configuration error (say, an unset credential variable) aborts the whole run.

This is where answers leave the backend: metadata too large or too deep to store becomes an
``invalid_response`` (after the probability checks, whose error wins), and metadata, model
names and error messages are scrubbed of registered secrets (``core.secrets``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import numpy as np

from decguard_pipeline.backends.base import Backend
from decguard_pipeline.core.contract import DecisionSpec
from decguard_pipeline.core.dataset import gc_paused
from decguard_pipeline.core.decision import (
    DEFAULT_MAX_METADATA_BYTES,
    DecisionRequest,
    Prediction,
    metadata_problem,
    select_many,
    validate_many,
)
from decguard_pipeline.core.errors import BackendError, DecGuardError, InvalidResponse
from decguard_pipeline.core.results import CaseResults
from decguard_pipeline.core.secrets import scrub_optional, scrub_text
from decguard_pipeline.core.validation import redact

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
        if len(self._rows) >= FLUSH_EVERY:
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

    def spent(self, i: int, usage: tuple[int, int]) -> None:
        """Tokens case ``i`` cost; kept even when its answer then fails validation (the
        tokens were paid for)."""
        if self.prompt_tokens is None or self.completion_tokens is None:
            n = len(self.latency)
            self.prompt_tokens, self.completion_tokens = np.full(n, np.nan), np.full(n, np.nan)
        self.prompt_tokens[i], self.completion_tokens[i] = usage

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
        rows, raws = self._rows, self._raws
        if not rows:
            return
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
                i = group_rows[p]
                self.fail(i, batch.kinds[p] or "invalid_response", batch.errors[p])  # type: ignore[arg-type]
                self.probs[i] = np.nan
                self.latency[i] = np.nan
                self.model[i] = self.model_version[i] = None
                self.metadata[i] = _EMPTY


def _run_inline(backend: Backend, requests: Sequence[DecisionRequest], out: Collector) -> None:
    clock = time.perf_counter
    predict = backend.predict
    model = backend.model
    rows: list[int] = []
    answers: list[Prediction] = []
    latencies: list[float] = []
    for i, request in enumerate(requests):
        start = clock()
        try:
            prediction = predict(request)
        except Exception as exc:
            out.failed(i, exc)
            continue
        latencies.append((clock() - start) * 1000.0)
        rows.append(i)
        answers.append(prediction)
        if len(rows) >= FLUSH_EVERY:
            out.answer_many(rows, answers, latencies, model)
            rows, answers, latencies = [], [], []
    out.answer_many(rows, answers, latencies, model)


async def _run_async(
    backend: Backend, requests: Sequence[DecisionRequest], out: Collector, concurrency: int
) -> None:
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    clock = time.perf_counter
    model = backend.model
    native = backend.has_native_async
    pool = None if native else ThreadPoolExecutor(max_workers=concurrency)
    loop = asyncio.get_running_loop()
    next_index = iter(range(len(requests)))

    def timed_predict(request: DecisionRequest) -> tuple[Prediction, float]:
        start = clock()
        prediction = backend.predict(request)
        return prediction, (clock() - start) * 1000.0 - prediction.queued_ms

    async def worker() -> None:
        for i in next_index:
            request = requests[i]
            try:
                if native:
                    start = clock()
                    prediction = await backend.apredict(request)
                    latency = (clock() - start) * 1000.0 - prediction.queued_ms
                else:
                    prediction, latency = await loop.run_in_executor(pool, timed_predict, request)
            except Exception as exc:
                out.failed(i, exc)
                continue
            out.answer(i, prediction, latency, model)

    try:
        open_session = getattr(backend, "open_session", None)
        if open_session is not None:
            open_session(concurrency)
        workers = [asyncio.ensure_future(worker()) for _ in range(min(concurrency, len(requests)))]
        try:
            await asyncio.gather(*workers)
        except BaseException:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            raise
    finally:
        await backend.aclose()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def decide_all(
    backend: Backend,
    requests: Sequence[DecisionRequest],
    *,
    k: int,
    max_concurrency: int,
    tolerance: float,
    label_slots: tuple[np.ndarray, list[tuple[str, ...]]] | None = None,
) -> Collector:
    """Decide every request; returns the collected, validated outcomes by index.
    ``label_slots``: the presented labels of every request, as an index into a list of
    label orders (when the caller knows them: validation then groups column-wise)."""
    out = Collector(
        len(requests),
        lambda i: requests[i].decision.labels,
        k,
        tolerance,
        getattr(backend, "max_metadata_bytes", DEFAULT_MAX_METADATA_BYTES),
    )
    if label_slots is not None:
        out.label_slots, out.label_sets = label_slots
    elif requests and all(r.decision is requests[0].decision for r in requests):
        out.same_labels = requests[0].decision.labels
    if backend.inline or not requests:
        _run_inline(backend, requests, out)
    else:
        import asyncio  # imported here: in-process runs never need an event loop

        asyncio.run(_run_async(backend, requests, out, max_concurrency))
    out.flush()
    return out


@dataclass
class Cases:
    """The dataset columns a run needs."""

    ids: list[str]
    inputs: list[Any]
    expected: list[str | None]
    metadata: list[dict[str, Any]]


def run_cases(
    backend: Backend,
    spec: DecisionSpec,
    cases: Cases | Any,
    *,
    max_concurrency: int,
    tolerance: float,
) -> CaseResults:
    """Decide every case of a dataset in canonical label order; results in dataset order."""
    # in-process backends only: a network run may hold reference cycles (exceptions,
    # client internals) for the collector to clear while it waits on the network anyway
    with gc_paused(settle=True) if backend.inline else nullcontext():
        return _run_cases(backend, spec, cases, max_concurrency, tolerance)


def _run_cases(
    backend: Backend, spec: DecisionSpec, cases: Any, max_concurrency: int, tolerance: float
) -> CaseResults:
    requests = [
        DecisionRequest(case_id, spec, value)
        for case_id, value in zip(cases.ids, cases.inputs, strict=True)
    ]
    out = decide_all(
        backend, requests, k=len(spec.labels), max_concurrency=max_concurrency, tolerance=tolerance
    )
    del requests
    return CaseResults(
        spec=spec,
        case_ids=cases.ids,
        inputs=cases.inputs,
        expected=cases.expected,
        metadata=cases.metadata,
        result_metadata=out.metadata,
        prompt_tokens=out.prompt_tokens,
        completion_tokens=out.completion_tokens,
        **out.decided(backend, out.probs),
    )
