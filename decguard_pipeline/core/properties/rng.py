"""The random stream of metamorphic transformations (DecGuard §9.1), bit for bit.

Each (seed, property, case) gets its own stream, so adding a case or a property never changes
what is generated for the others, and a stored run can be regenerated from its seed. Draws
come from SHA-256 rather than :mod:`random`, whose ``sample``/``shuffle`` are not promised to
stay the same across Python versions.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")

_SEPARATOR = "\x1f"
_sha256 = hashlib.sha256
# the 8-byte big-endian counters of the first draws, built once (a stream rarely needs more)
_COUNTERS = tuple(i.to_bytes(8, "big") for i in range(64))


def stream_key(*parts: object) -> bytes:
    """The key of the stream of ``parts`` (seed, property, case id)."""
    return _sha256(_SEPARATOR.join(map(str, parts)).encode("utf-8")).digest()


def draws(key: bytes, count: int) -> list[int]:
    """The first ``count`` values of the stream of ``key``, all at once: the i-th call of
    ``below(n)`` on a new ``Rng`` returns ``draws(key, count)[i] % n``. (A transformation
    knows how many draws a case takes before it makes any: they are hashed in one go.)"""
    counters = _COUNTERS[:count] if count <= len(_COUNTERS) else [
        i.to_bytes(8, "big") for i in range(count)
    ]  # fmt: skip
    return [int.from_bytes(_sha256(key + c).digest()[:16], "big") for c in counters]


def sample_from(values: Sequence[int], m: int, k: int, start: int = 0) -> list[int]:
    """``Rng.sample(range(m), k)`` computed from the stream values ``values[start:]`` (it
    takes ``min(k, m)`` of them), with only the swapped positions remembered."""
    moved: dict[int, int] = {}
    out = []
    for i in range(min(k, m)):
        j = i + values[start + i] % (m - i)
        out.append(moved.get(j, j))
        moved[j] = moved.get(i, i)
    return out


class Rng:
    """``below(n)`` = first 16 bytes of SHA-256(key ‖ counter as 8 bytes) mod n."""

    __slots__ = ("_counter", "_key")

    def __init__(self, *parts: object) -> None:
        self._key = stream_key(*parts)
        self._counter = 0

    def below(self, n: int) -> int:
        if n <= 0:
            raise ValueError("n must be positive")
        counter = self._counter
        suffix = _COUNTERS[counter] if counter < 64 else counter.to_bytes(8, "big")
        self._counter = counter + 1
        return int.from_bytes(_sha256(self._key + suffix).digest()[:16], "big") % n

    def choice(self, items: Sequence[T]) -> T:
        return items[self.below(len(items))]

    def sample(self, items: Sequence[T], k: int) -> list[T]:
        """``k`` distinct items in draw order (partial Fisher-Yates from the front)."""
        pool = list(items)
        k = min(k, len(pool))
        for i in range(k):
            j = i + self.below(len(pool) - i)
            pool[i], pool[j] = pool[j], pool[i]
        return pool[:k]

    def shuffled(self, items: Sequence[T]) -> list[T]:
        return self.sample(items, len(items))


def case_stream(seed: int, property_name: str, case_id: str) -> Rng:
    return Rng(seed, property_name, case_id)
