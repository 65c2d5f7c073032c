"""The response cache where answers leave the backend: before a batch is sent, the answers
already known are replayed into the runner's collector and only the rest is asked; every
answer that passes validation is recorded as it arrives.

It applies to every provider (built-ins, plugins, the mock) and to every batch a run sends
through :func:`backends.runner.decide_all` (golden cases, property pairs, minimisation), since
it is attached to the backend (``backend.response_cache``) by whoever made the backend for a
run. Storage is someone else's: an :class:`AnswerStore` (the warehouse's ``responses`` table,
``warehouse/responses.py``) opened for the model version, and read-only
:class:`AnswerSource` s (the report of ``--retry-errors``).

The model version is part of every key. It is given (a pipeline target), or the backend says
it without deciding anything (``version_hint``: configuration or health answer), or else the
first request of the run is sent before the others and its answer's ``model_version`` is the
version (the *probe*: one request that would have been sent anyway, unless every case was
cached). A new model version therefore never reuses another version's answers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from decguard_pipeline.backends.runner import ask_one
from decguard_pipeline.core.cache.answers import Answers, Hits
from decguard_pipeline.core.cache.key import Identity, request_keys
from decguard_pipeline.core.cache.summary import CacheStats
from decguard_pipeline.core.contract.spec import DecisionSpec
from decguard_pipeline.core.decision import DecisionRequest, validate_probabilities
from decguard_pipeline.core.errors import InvalidResponse

if TYPE_CHECKING:
    from decguard_pipeline.backends.base import Backend
    from decguard_pipeline.backends.collector import Collector

# Requests tried one by one to learn the model version before the batch (each is one of the
# run's own requests: a failure is that case's typed error, not an extra request).
MAX_PROBES = 3


class AnswerStore(Protocol):
    """Where a cache keeps the answers of one model version."""

    def lookup(self, keys: Sequence[bytes], k: int) -> Hits:
        """The stored answers of ``keys`` (``Hits.rows`` index into ``keys``)."""
        ...

    def keep(self, answers: Answers) -> int:
        """Validated answers: stored within a few seconds; returns how many will be (an
        answer whose metadata JSON cannot hold is not)."""
        ...

    def journal(self, row: dict[str, Any]) -> None:
        """One validated answer, kept at once (a run killed a moment later keeps it)."""
        ...

    def due(self) -> bool:
        """Whether the last store is long enough ago that what was kept since must be stored
        now (the caller first hands over the answers it still holds)."""
        ...

    def due_in(self) -> float:
        """Seconds until :meth:`due` (0 or less: now)."""
        ...

    def publish(self) -> None:
        """Store what was kept so far (and start the interval again)."""
        ...

    def flush(self) -> None:
        """Store everything kept so far; the batch is over."""
        ...


class AnswerSource(Protocol):
    """Answers known without asking and without a key: a stored report's results."""

    name: str

    def lookup_requests(self, requests: Sequence[DecisionRequest], k: int) -> Hits: ...


class ResponseCache:
    """One run's cache: replays what is known, records what is asked, counts both."""

    def __init__(
        self,
        *,
        provider: str,
        model: str | None,
        settings: Mapping[str, Any],
        decision: DecisionSpec,
        open_store: Callable[[str], AnswerStore] | None,
        version: str | None = None,
        sources: Sequence[AnswerSource] = (),
        stats: CacheStats | None = None,
        sample: int = 0,
    ) -> None:
        """``settings`` already passed through ``core.cache.key.key_settings``;
        ``open_store(version)`` opens the store of a model version (None: no cache, only the
        ``sources``); ``version`` when the caller knows it; ``sample``: the index of the
        first draw of nondeterministic scoring."""
        self.provider, self.model, self.settings = provider, model, settings
        self.decision = decision
        self.open_store = open_store
        self.version = version
        self.sources = list(sources)
        self.stats = stats or CacheStats()
        if version is not None:
            self.stats.version, self.stats.version_source = version, "given"
        self.sample = sample
        # pipeline.repeats: the repetition being asked (0: the report's own ask, keyed as in
        # a run without repeats; 1, 2, ...: extra asks, each under its own sample index even
        # for scoring that looks deterministic, so each repetition replays its own answer)
        self.repetition = 0
        self._store: AnswerStore | None = None
        self._prefix: bytes | None = None
        self._asked: list[int] = []  # the rows of the batch going on that were sent

    # -- the runner's side -------------------------------------------------------------------

    def prepare(
        self, backend: Backend, requests: Sequence[DecisionRequest], out: Collector
    ) -> list[int]:
        """Replay the known answers of ``requests`` into ``out``; returns the rows still to
        ask. Answers asked from now on are recorded (``out.sink``)."""
        n = len(requests)
        pending = np.ones(n, dtype=bool)
        for source in self.sources if not self.repetition else ():  # a report: one ask
            rows = np.flatnonzero(pending)
            found = source.lookup_requests([requests[i] for i in rows.tolist()], out.k)
            self._replay(backend, out, found, rows, pending)
        store, probed = None, []
        if self.open_store is not None:
            probed = self._resolve_version(backend, requests, out, pending)
            store = self.store()
        if store is None:
            asked = np.flatnonzero(pending).tolist()
            self._sent(asked + probed)
            return asked
        keys = request_keys(self.prefix(), requests, sample=self.sample_index())
        rows = np.flatnonzero(pending)
        if len(rows):
            self._replay(backend, out, store.lookup([keys[i] for i in rows.tolist()], out.k),
                         rows, pending)  # fmt: skip
        out.sink = Recorder(store, requests, keys, self.stats, journaling=not backend.inline)
        if probed:  # an answer the cache holds already is not stored twice
            known = store.lookup([keys[i] for i in probed], out.k)
            out.sink.skip = {probed[r] for r in known.rows.tolist()}
        asked = np.flatnonzero(pending).tolist()
        self._sent(asked + probed)
        return asked

    def finish(self, out: Collector | None = None) -> None:
        """The batch is over (or aborted): store what was recorded, and count the requests
        sent that the backend answered (``out``: the batch's collector)."""
        if out is not None and self._asked:  # answered: a latency and no error
            rows = np.asarray(self._asked, dtype=np.intp)
            kinds = out.error_kind
            decided = [kinds[i] is None for i in self._asked]
            self.stats.answered += int(np.count_nonzero(~np.isnan(out.latency[rows]) & decided))
        self._asked = []
        if self._store is not None:
            self._store.flush()

    def _sent(self, rows: list[int]) -> None:
        self._asked = rows
        self.stats.asked += len(rows)

    # -- internals ----------------------------------------------------------------------------

    def sample_index(self) -> int | None:
        """The sample index of this batch's keys: None for deterministic scoring's first
        ask (a plain key), else the first draw's index plus the repetition."""
        if self.nondeterministic:
            return self.sample + self.repetition
        return self.repetition or None

    @property
    def nondeterministic(self) -> bool:
        return self.identity("").nondeterministic

    def identity(self, version: str) -> Identity:
        return Identity(self.provider, self.model, self.settings, version, self.decision)

    def prefix(self) -> bytes:
        if self._prefix is None:
            assert self.version is not None
            self._prefix = self.identity(self.version).digest()
        return self._prefix

    def store(self) -> AnswerStore | None:
        if self._store is None and self.version is not None and self.open_store is not None:
            self._store = self.open_store(self.version)
        return self._store

    def _replay(
        self,
        backend: Backend,
        out: Collector,
        found: Hits,
        rows: np.ndarray,
        pending: np.ndarray,
    ) -> None:
        """``found`` (rows relative to ``rows``) into the collector."""
        if not len(found):
            return
        found.rows = rows[found.rows]
        out.replay(found, backend.model)
        pending[found.rows] = False
        self.stats.replayed(found.source, found.prompt_tokens, found.completion_tokens)
        backend.note_replayed(found.model_version, found.metadata)

    def _resolve_version(
        self,
        backend: Backend,
        requests: Sequence[DecisionRequest],
        out: Collector,
        pending: np.ndarray,
    ) -> list[int]:
        """Find the model version when nobody said it: the backend's hint, else the answer of
        the first pending requests, asked one at a time. Returns the rows asked."""
        if self.version is not None:
            return []
        try:
            hint = backend.version_hint()
        except Exception:  # a plugin's hint that fails says nothing: the answer will
            hint = None
        if hint is not None:
            self._set_version(hint, "hint")
            return []
        asked: list[int] = []
        for i in np.flatnonzero(pending)[:MAX_PROBES].tolist():
            pending[i] = False
            asked.append(i)
            try:
                prediction, latency = ask_one(backend, requests[i])
            except Exception as exc:
                out.failed(i, exc)  # a configuration error propagates, as in any run
                continue
            # validated and recorded with the batch (the recorder is attached before it ends)
            out.answer(i, prediction, latency, backend.model)
            self._set_version(out.model_version[i] or "", "probe")
            break
        return asked

    def _set_version(self, version: str, source: str) -> None:
        self.version = version
        self.stats.version, self.stats.version_source = version, source


class Recorder:
    """Where the collector hands the answers of one batch: journaled one by one as they
    arrive (network runs), kept in batches once validated."""

    def __init__(
        self,
        store: AnswerStore,
        requests: Sequence[DecisionRequest],
        keys: list[bytes],
        stats: CacheStats,
        *,
        journaling: bool,
    ) -> None:
        self.store = store
        self.requests = requests
        self.keys = keys
        self.stats = stats
        self.journaling = journaling
        self.skip: set[int] = set()  # rows asked although the cache holds their answer

    def journal(self, out: Collector, i: int, raw: Any) -> None:
        """Answer ``i`` just arrived: keep it now if it is valid (the same rules as the batch
        validation that follows)."""
        if i in out.unstorable or i in self.skip:
            return
        labels = self.requests[i].decision.labels
        try:
            values = validate_probabilities(labels, raw, tolerance=out.tolerance)
        except (InvalidResponse, OverflowError):
            return
        tokens = out.tokens(i)
        self.store.journal(
            {
                "key": self.keys[i].hex(),
                "case_id": self.requests[i].case_id,
                "labels": list(labels),
                "probabilities": list(values.values()),
                "model": out.model[i],
                "model_version": out.model_version[i],
                "latency_ms": float(out.latency[i]),
                "prompt_tokens": tokens[0],
                "completion_tokens": tokens[1],
                "metadata": out.metadata[i],
                "answered_at": time.time(),
            }
        )

    def flushed(self) -> None:
        """The collector validated what it held: store it if the interval has passed (also
        when nothing new was valid, so the interval starts again)."""
        if self.store.due():
            self.store.publish()

    def keep(self, out: Collector, rows: list[int]) -> None:
        """Rows that passed validation."""
        if self.skip:
            rows = [i for i in rows if i not in self.skip]
        if not rows:
            return
        index = np.asarray(rows, dtype=np.intp)
        nan = np.full(len(rows), np.nan)
        first, last = rows[0], rows[-1]
        if last - first == len(rows) - 1:  # consecutive rows (an in-process run): slices

            def pick(column: Sequence[Any]) -> list[Any]:
                return list(column[first : last + 1])
        else:

            def pick(column: Sequence[Any]) -> list[Any]:
                return [column[i] for i in rows]

        asked = pick(self.requests)
        self.stats.stored += self.store.keep(
            Answers(
                keys=pick(self.keys),
                case_ids=[request.case_id for request in asked],
                labels=[request.decision.labels for request in asked],
                probs=out.probs[index],
                model=pick(out.model),
                model_version=pick(out.model_version),
                latency_ms=out.latency[index],
                prompt_tokens=nan if out.prompt_tokens is None else out.prompt_tokens[index],
                completion_tokens=(
                    nan if out.completion_tokens is None else out.completion_tokens[index]
                ),
                metadata=pick(out.metadata),
                answered_at=time.time(),
            )
        )
