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


class Rng:
    """``below(n)`` = first 16 bytes of SHA-256(key ‖ counter as 8 bytes) mod n."""

    __slots__ = ("_counter", "_key")

    def __init__(self, *parts: object) -> None:
        self._key = hashlib.sha256(_SEPARATOR.join(map(str, parts)).encode("utf-8")).digest()
        self._counter = 0

    def below(self, n: int) -> int:
        if n <= 0:
            raise ValueError("n must be positive")
        block = hashlib.sha256(self._key + self._counter.to_bytes(8, "big")).digest()
        self._counter += 1
        return int.from_bytes(block[:16], "big") % n

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
