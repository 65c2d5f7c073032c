"""Decide many requests on one asyncio event loop with bounded concurrency.

* Native async backends (http, systemone, openai, openjev): ``max_concurrency`` workers share one
  pooled session, so exactly that many requests are in flight and connections are reused.
* Synchronous plugins: the same workers hand ``predict`` to a pool of ``max_concurrency``
  threads.
* Inline backends (the mock): a plain loop; a thread hand-off would cost more than the call.

Latency is measured around the request itself: retries included; queueing excluded, and so
is the time a backend waited for its own rate limit (``Prediction.queued_ms``). The clock
starts as the request is encoded, in the same step of the event loop that writes it, and
stops when the answer has been read whole where the client says when that was
(``ANSWERED_AT``, the lean HTTP client): the wait for the loop to run the case's task again,
and the parsing after it, are the measuring process's, not the model's. Every
request ends as a prediction or a typed error, stored by index so results keep dataset
order. A configuration error (say, an unset credential variable) aborts the whole run.

This is where answers leave the backend: metadata too large or too deep to store becomes an
``invalid_response`` (after the probability checks, whose error wins), and metadata, model
names and error messages are scrubbed of registered secrets (``core.secrets``). So it is also
where the response cache (``backend.response_cache``, ``backends/cache.py``) replays known
answers before a batch is sent and records the new ones as they arrive.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import nullcontext, suppress
from dataclasses import dataclass
from typing import Any

import numpy as np

from decguard_pipeline.backends.base import ANSWERED_AT, Backend
from decguard_pipeline.backends.collector import FLUSH_EVERY, Collector
from decguard_pipeline.core.collector import gc_paused
from decguard_pipeline.core.contract import DecisionSpec
from decguard_pipeline.core.decision import (
    DEFAULT_MAX_METADATA_BYTES,
    DecisionRequest,
    Prediction,
)
from decguard_pipeline.core.results import CaseResults

# the shortest wait between two looks at the response cache's interval
MIN_WAIT_S = 0.05


def _run_inline(
    backend: Backend, requests: Sequence[DecisionRequest], out: Collector, ask: Sequence[int]
) -> None:
    clock = time.perf_counter
    predict = backend.predict
    model = backend.model
    rows: list[int] = []
    answers: list[Prediction] = []
    latencies: list[float] = []
    for i in ask:
        request = requests[i]
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
    backend: Backend,
    requests: Sequence[DecisionRequest],
    out: Collector,
    concurrency: int,
    ask: Sequence[int],
) -> None:
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    clock = time.perf_counter
    model = backend.model
    native = backend.has_native_async
    pool = None if native else ThreadPoolExecutor(max_workers=concurrency)
    loop = asyncio.get_running_loop()
    next_index = iter(ask)
    answered_at = ANSWERED_AT.get

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
                    end = clock()
                    answered = answered_at()  # an earlier case's moment is before start
                    if answered > start:
                        end = answered
                    latency = (end - start) * 1000.0 - prediction.queued_ms
                else:
                    prediction, latency = await loop.run_in_executor(pool, timed_predict, request)
            except Exception as exc:
                out.failed(i, exc)
                continue
            out.answer(i, prediction, latency, model)

    ticker = None if out.sink is None else asyncio.ensure_future(_store_on_time(out))
    try:
        open_session = getattr(backend, "open_session", None)
        if open_session is not None:
            open_session(concurrency)
        workers = [asyncio.ensure_future(worker()) for _ in range(min(concurrency, len(ask)))]
        try:
            await asyncio.gather(*workers)
        except BaseException:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            raise
    finally:
        if ticker is not None:
            ticker.cancel()
            await asyncio.gather(ticker, return_exceptions=True)
        await backend.aclose()
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


async def _store_on_time(out: Collector) -> None:
    """Hand the answers received to the response cache whenever its interval has passed, also
    while none arrives (a slow or stalled server): where no journal keeps each answer (an
    object store), a run killed then loses at most that interval's answers."""
    import asyncio

    store = out.sink.store
    while True:
        await asyncio.sleep(max(store.due_in(), MIN_WAIT_S))
        if store.due():
            out.flush()  # validated, kept and published
        elif store.due_in() <= 0:  # due but refused: the store writes no more in this run
            return


def ask_one(backend: Backend, request: DecisionRequest) -> tuple[Prediction, float]:
    """One request on its own, the way a batch would send it (the native async client for
    network backends, so no second HTTP stack is loaded); (prediction, latency in ms).
    Raises what the backend raises."""
    clock = time.perf_counter
    if backend.inline or not backend.has_native_async:
        start = clock()
        prediction = backend.predict(request)
        return prediction, (clock() - start) * 1000.0 - prediction.queued_ms
    import asyncio

    async def one() -> tuple[Prediction, float]:
        try:
            start = clock()
            prediction = await backend.apredict(request)
            return prediction, (clock() - start) * 1000.0 - prediction.queued_ms
        finally:
            await backend.aclose()

    return asyncio.run(one())


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
    cache = backend.response_cache
    ask: Sequence[int] = range(len(requests))
    try:
        if cache is not None and requests:
            ask = cache.prepare(backend, requests, out)
        if backend.inline or not ask:
            _run_inline(backend, requests, out, ask)
        else:
            import asyncio  # imported here: in-process runs never need an event loop

            asyncio.run(_run_async(backend, requests, out, max_concurrency, ask))
        out.flush()
    finally:
        if cache is not None:  # also when the run aborts: what was answered is kept
            with suppress(Exception):
                out.flush()
            cache.finish(out)
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
