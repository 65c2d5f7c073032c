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

import numpy as np

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


def stream_keys(seed: int, property_name: str, case_ids: Sequence[str]) -> list[bytes]:
    """``stream_key(seed, property_name, case_id)`` of every case."""
    prefix = f"{seed}{_SEPARATOR}{property_name}{_SEPARATOR}"
    return [_sha256(f"{prefix}{case_id}".encode()).digest() for case_id in case_ids]


_WORD_LIMIT = 1 << 32  # moduli below this keep the word arithmetic within 64 bits


class StreamValues:
    """The first draws of many streams, hashed in one pass: stream ``s`` contributes
    ``counts[s]`` values, laid out one stream after the other (``offsets``). Each value (the
    first 16 bytes of a digest, a 128-bit integer) is held as two 64-bit words, so that
    ``mod(n)`` gives every ``value % n`` at once: ``draws(key, c)[i] % n`` equals
    ``mod(n)[offsets[s] + i]`` for the stream ``s`` of ``key``."""

    def __init__(self, keys: Sequence[bytes], counts: Sequence[int]) -> None:
        self.counts = list(counts)
        self.offsets = np.concatenate(([0], np.cumsum(self.counts, dtype=np.int64)))
        longest = max(self.counts, default=0)
        counters = _COUNTERS if longest <= len(_COUNTERS) else tuple(
            i.to_bytes(8, "big") for i in range(longest)
        )  # fmt: skip
        digests = b"".join(
            [_sha256(key + c).digest() for key, n in zip(keys, counts, strict=True)
             for c in counters[:n]]
        )  # fmt: skip
        words = np.frombuffer(digests, dtype=">u8").reshape(-1, 4)
        self.high = words[:, 0].astype(np.uint64)
        self.low = words[:, 1].astype(np.uint64)

    def __len__(self) -> int:
        return len(self.high)

    def mod(self, n: int | np.ndarray) -> np.ndarray:
        """Every value modulo ``n`` (a positive integer, or one per value), as int64."""
        return _mod(self.high, self.low, n)

    def mod_at(self, positions: np.ndarray, n: int | np.ndarray) -> np.ndarray:
        """The values at ``positions`` modulo ``n`` (one per position, or one for all)."""
        return _mod(self.high[positions], self.low[positions], n)


def _mod(high: np.ndarray, low: np.ndarray, n: int | np.ndarray) -> np.ndarray:
    """(high·2⁶⁴ + low) mod n = ((high mod n)·(2⁶⁴ mod n) + low mod n) mod n, in 64-bit words
    while n < 2³² (every product stays below 2⁶⁴); Python integers beyond that."""
    if isinstance(n, int):
        if not 0 < n < _WORD_LIMIT:
            return _mod_exactly(high, low, [n] * len(high))
        moduli = np.uint64(n)
    else:
        moduli = np.asarray(n)
        if moduli.size and not (moduli.min() > 0 and moduli.max() < _WORD_LIMIT):
            return _mod_exactly(high, low, moduli.tolist())
        moduli = moduli.astype(np.uint64)
    power = (np.uint64(2**64 - 1) % moduli + np.uint64(1)) % moduli  # 2**64 mod n
    return (((high % moduli) * power + low % moduli) % moduli).astype(np.int64)


def _mod_exactly(high: np.ndarray, low: np.ndarray, moduli: list[int]) -> np.ndarray:
    """Python integers, for moduli the words cannot take (never met in practice)."""
    out = []
    for h, lo, n in zip(high.tolist(), low.tolist(), moduli, strict=True):
        if n <= 0:
            raise ValueError("n must be positive")
        out.append(((h << 64) | lo) % n)
    return np.array(out, dtype=object)


def sample_from(values: Sequence[int], m: int, k: int, start: int = 0) -> list[int]:
    """``Rng.sample(range(m), k)`` computed from the stream values ``values[start:]`` (it
    takes ``min(k, m)`` of them), with only the swapped positions remembered."""
    return swaps_to_sample([values[start + i] % (m - i) for i in range(min(k, m))])


def swaps_to_sample(offsets: Sequence[int]) -> list[int]:
    """The items a partial Fisher-Yates shuffle of ``range(m)`` picks when draw ``i`` swaps
    position ``i`` with ``i + offsets[i]`` (``offsets[i]`` = value mod (m - i))."""
    moved: dict[int, int] = {}
    out = []
    for i, offset in enumerate(offsets):
        j = i + offset
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
