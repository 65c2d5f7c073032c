"""Staying under a provider's limits: pacing, Retry-After, backoff, and counting every wait.

A :class:`Pacer` holds one bucket per configured limit (``requests_per_minute``,
``tokens_per_minute``), shared by every request of a backend whichever thread or event loop
sends it. A request *reserves* its cost and is told how long to wait: reservations are made
under a lock, waits happen outside it, so pacing never serialises the requests themselves.
Each bucket is a generic cell-rate algorithm with no burst allowance: requests are spread
evenly (one every 60/rpm seconds), which keeps a run under a server's limit however the
server counts it. A server's ``Retry-After`` also holds the whole backend, not only the
request that met it: the others would only bounce off the same limit.

No pacing wait is longer than ``max_wait_s`` (the backend's ``max_pacing_wait_s``): token
reservations are corrected by the usage servers report, and a count that is wrong (yet
plausible enough to be believed: ``core.usage.token_count`` drops the impossible ones) must
not stop a run for days. A bucket never runs further ahead than that; a request that would
wait longer goes after it, and the server's own limit (429 and ``Retry-After``) takes over.
"""

from __future__ import annotations

import email.utils
import math
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass


class Bucket:
    """``rate`` units per second, reserved in order; a cost larger than one unit is paid
    in full (the next reservation waits for it), so the long-run rate is exact."""

    def __init__(self, per_minute: float) -> None:
        self.rate = per_minute / 60.0
        self.tat = -math.inf  # theoretical arrival time of the next unit

    def reserve(self, cost: float, now: float, max_wait_s: float = math.inf) -> float:
        """Seconds from ``now`` until a request of ``cost`` units may go: at most
        ``max_wait_s`` (the debt beyond it is forgiven)."""
        start = max(now, min(self.tat, now + max_wait_s))
        self.tat = start + cost / self.rate
        return start - now

    def refund(self, units: float) -> None:
        """Correct a reservation made on an estimate (negative: it cost more)."""
        self.tat -= units / self.rate


@dataclass
class Waits:
    """What a backend's requests spent waiting, for the run's extension report."""

    requests: int = 0  # HTTP requests sent (retries included)
    retries: int = 0
    retry_wait_s: float = 0.0
    retry_after_honoured: int = 0  # retries that waited as the server asked
    paced: int = 0  # requests held back by the backend's own limits
    paced_wait_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


class Pacer:
    """The rate limits of one backend, plus the pause a server asked for."""

    def __init__(
        self,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        max_wait_s: float = math.inf,
    ) -> None:
        self.requests = Bucket(requests_per_minute) if requests_per_minute else None
        self.tokens = Bucket(tokens_per_minute) if tokens_per_minute else None
        self.clock = clock
        self.max_wait_s = max_wait_s
        self.hold_until = -math.inf
        self.waits = Waits()
        self._lock = threading.Lock()

    def reserve(self, tokens: float) -> float:
        """Reserve one request of about ``tokens`` tokens; seconds to wait before sending."""
        with self._lock:
            now = self.clock()
            wait = max(0.0, self.hold_until - now)
            if self.requests is not None:
                wait = max(wait, self.requests.reserve(1.0, now, self.max_wait_s))
            if self.tokens is not None:
                wait = max(wait, self.tokens.reserve(tokens, now, self.max_wait_s))
            self.waits.requests += 1
            if wait > 0.0:
                self.waits.paced += 1
                self.waits.paced_wait_s += wait
            return wait

    def settle(self, estimated: float, actual: float) -> None:
        """A request's real token count is known: correct its reservation."""
        if self.tokens is not None and actual >= 0:
            with self._lock:
                self.tokens.refund(estimated - actual)

    def hold(self, seconds: float) -> None:
        """The server asked every request to wait ``seconds`` from now."""
        with self._lock:
            self.hold_until = max(self.hold_until, self.clock() + seconds)

    def retried(self, wait_s: float, *, server_said: bool) -> None:
        with self._lock:
            self.waits.retries += 1
            self.waits.retry_wait_s += wait_s
            self.waits.retry_after_honoured += int(server_said)

    def used(self, prompt_tokens: int, completion_tokens: int) -> None:
        with self._lock:
            self.waits.prompt_tokens += prompt_tokens
            self.waits.completion_tokens += completion_tokens

    def snapshot(self) -> dict[str, float | int]:
        with self._lock:
            return self.waits.as_dict()


def retry_after_s(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """The wait a 429/503 answer asks for: ``retry-after-ms`` (OpenAI's, milliseconds) or
    ``Retry-After`` as delay-seconds or an HTTP-date (RFC 9110 §10.2.3); None when absent
    or unreadable. A date in the past means no wait. ``now``: Unix time (for tests)."""
    milliseconds = headers.get("retry-after-ms")
    if milliseconds is not None:
        try:
            value = float(milliseconds)
        except ValueError:
            value = math.nan
        if math.isfinite(value) and value >= 0.0:
            return value / 1000.0
    raw = headers.get("retry-after")
    if raw is None:
        return None
    text = raw.strip()
    try:
        seconds = float(text)  # delay-seconds (decimals accepted: some servers send them)
    except ValueError:
        pass
    else:
        return seconds if math.isfinite(seconds) and seconds >= 0.0 else None
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # an HTTP-date is always GMT
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


def backoff_s(base: float, attempt: int, rng: random.Random) -> float:
    """Exponential backoff with jitter: ``base × 2^attempt``, scaled by a factor drawn
    uniformly from [0.5, 1.5) so that requests refused together do not return together."""
    return base * 2**attempt * (0.5 + rng.random())
