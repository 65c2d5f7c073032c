"""Exact sums of a float column per group, for millions of records at array speed.

``math.fsum`` over a Python list costs about 140 ns a value (list conversion included); the
production metrics need a dozen sums per segment. Here every value is read, from its bits,
as a 53-bit integer mantissa times a power of two, and the mantissa is cut into two 27-bit
limbs; limbs are added per (group, exponent) with ``np.bincount``, whose float64 accumulator
stays exact because every partial sum is an integer below 2**53 (27 bits + at most 2**26
values). Each group's exact total is assembled as a Python integer and rounded once, so the
result is the correctly rounded sum: bit for bit ``math.fsum`` (also correctly rounded, and
0.0 for an exact zero). Tests compare both on random and adversarial data.
"""

from __future__ import annotations

import math

import numpy as np

_LIMB = 27
_MASK = (1 << _LIMB) - 1
MAX_VALUES = 1 << 26  # keeps every limb sum below 2**53
SMALL = 4096  # below this, math.fsum over a list is cheaper
_FRACTION = (1 << 52) - 1


class ExactColumn:
    """A finite float64 column prepared for exact sums under any grouping."""

    def __init__(self, values: np.ndarray) -> None:
        values = np.ascontiguousarray(values, dtype=np.float64)
        if len(values) >= MAX_VALUES:
            raise ValueError("too many values for exact limb sums")
        self.values = values
        # in place where it can be: ten million values are 80 MB a temporary array, and the
        # production metrics prepare several columns at once (the check's peak memory)
        bits = values.view(np.int64)
        biased = bits >> 52
        biased &= 0x7FF
        # normal numbers carry the implicit leading bit; subnormals (biased 0) use exponent 1
        whole = bits & _FRACTION
        np.bitwise_or(whole, np.int64(1 << 52), out=whole, where=biased > 0)
        np.negative(whole, out=whole, where=bits < 0)
        np.maximum(biased, 1, out=biased)
        seen = np.flatnonzero(np.bincount(biased, minlength=2048))
        lookup = np.zeros(2048, dtype=np.int16)  # at most 2046 exponents
        lookup[seen] = np.arange(len(seen), dtype=np.int16)
        self.exponents = [int(e) - 1075 for e in seen]  # value = whole * 2**exponent
        self.slot = lookup[biased]
        del biased
        self.whole = whole

    def totals(
        self, groups: np.ndarray | None, n_groups: int, rows: np.ndarray | None = None
    ) -> list[int]:
        """The exact sum of each group's values as an integer multiple of 2**``base``.
        ``groups`` gives each value's group (None: one group); ``rows`` restricts the values
        (a boolean mask)."""
        n_slots = len(self.exponents)
        if groups is None:
            key = self.slot.astype(np.int64)
        else:
            key = groups.astype(np.int64)
            key *= n_slots
            key += self.slot
        size = n_groups * n_slots
        if rows is not None:
            key[~rows] = size  # excluded values land in a spare bin
        # each limb computed straight into one float buffer (exact: below 2**27 in size)
        weights = np.empty(len(self.whole), dtype=np.float64)
        high, low = (
            np.bincount(
                key, weights=limb(self.whole, bits, out=weights, casting="unsafe"),
                minlength=size + 1,
            )[:size].reshape(n_groups, n_slots).tolist()
            for limb, bits in ((np.right_shift, _LIMB), (np.bitwise_and, _MASK))
        )  # fmt: skip
        shifts = [exponent - self.base for exponent in self.exponents]
        return [
            sum(((int(h) << _LIMB) + int(lo)) << shift
                for h, lo, shift in zip(high[g], low[g], shifts, strict=True))
            for g in range(n_groups)
        ]  # fmt: skip

    @property
    def base(self) -> int:
        return self.exponents[0] if self.exponents else 0

    def sums(
        self, groups: np.ndarray | None, n_groups: int, rows: np.ndarray | None = None
    ) -> list[float]:
        """Correctly rounded sum of the values of each group (0.0 for an empty group)."""
        return [scaled(t, self.base) for t in self.totals(groups, n_groups, rows)]


def scaled(integer: int, power: int) -> float:
    """``integer * 2**power`` rounded once to the nearest float (ties to even)."""
    if integer == 0:
        return 0.0
    if power >= 0:
        return float(integer << power)
    return integer / (1 << -power)  # int / int is correctly rounded in CPython


def exact_sum(values: np.ndarray) -> float:
    """``math.fsum(values)`` for any length, at array speed for long columns."""
    if len(values) < SMALL:
        return math.fsum(values.tolist())
    return ExactColumn(values).sums(None, 1)[0]
