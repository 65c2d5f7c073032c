"""Record timestamps: ISO 8601 with a timezone, as ``datetime.fromisoformat`` reads them.

A column of timestamps is checked at once: values in the usual shape
``YYYY-MM-DDTHH:MM:SS[.ffffff](Z|±HH:MM)`` are range-checked with array arithmetic; every
other value (other separators, basic format, odd offsets…) goes through the standard library,
so the answer is always exactly DecGuard's.
"""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_SHAPE = (
    r"^(?P<y>\d{4})-(?P<mo>\d{2})-(?P<d>\d{2})T(?P<h>\d{2}):(?P<mi>\d{2}):(?P<s>\d{2})"
    r"(?:\.\d{1,6})?(?:Z|[+-](?P<oh>\d{2}):(?P<om>\d{2}))$"
)
_DAYS = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])


def timestamp_problem(value: str) -> str | None:
    """DecGuard's rule for one value (ISO 8601, ``Z`` allowed, with a timezone): what is
    wrong with it, or None."""
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return "must be an ISO 8601 timestamp"
    return None if parsed.tzinfo is not None else "must include a timezone"


def timestamp_ok(value: str) -> bool:
    return timestamp_problem(value) is None


def _ints(parts: pa.StructArray, name: str) -> np.ndarray:
    # "0" + digits: unmatched rows and an absent offset (``Z``) read as 0
    digits = pc.binary_join_element_wise("0", pc.fill_null(parts.field(name), ""), "")
    return pc.cast(digits, pa.int32()).to_numpy(zero_copy_only=False)


_DIGITS = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18]
_SEPARATORS = {4: b"-", 7: b"-", 10: b"T", 13: b":", 16: b":"}


def _fixed_shape(values: pa.Array) -> np.ndarray | None:
    """Fast accept for the commonest spelling, ``YYYY-MM-DDTHH:MM:SSZ`` (20 bytes), read
    straight from the Arrow buffers as a byte matrix; None when the array has nulls or other
    lengths (the general path decides)."""
    if values.null_count or values.type != pa.string() or not len(values):
        return None
    offsets = np.frombuffer(values.buffers()[1], dtype=np.int32)[
        values.offset : values.offset + len(values) + 1
    ]
    if not np.all(np.diff(offsets) == 20):
        return None
    data = np.frombuffer(values.buffers()[2], dtype=np.uint8)
    grid = data[offsets[0] : offsets[0] + 20 * len(values)].reshape(-1, 20)
    digits = grid[:, _DIGITS].astype(np.int32) - 48
    ok = np.all((digits >= 0) & (digits <= 9), axis=1) & (grid[:, 19] == ord("Z"))
    for column, char in _SEPARATORS.items():
        ok &= grid[:, column] == char[0]
    number = lambda i, j: digits[:, i] * 10 + digits[:, j]  # noqa: E731
    year = number(0, 1) * 100 + number(2, 3)
    month, day = number(4, 5), number(6, 7)
    return ok & _calendar_ok(year, month, day) & (number(8, 9) <= 23) & (
        number(10, 11) <= 59
    ) & (number(12, 13) <= 59)  # fmt: skip


def _calendar_ok(year: np.ndarray, month: np.ndarray, day: np.ndarray) -> np.ndarray:
    leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
    month_ok = (month >= 1) & (month <= 12)
    days = _DAYS[np.where(month_ok, month, 0)] + ((month == 2) & leap)
    return (year >= 1) & month_ok & (day >= 1) & (day <= days)


def timestamps_ok(values: pa.Array) -> np.ndarray:
    """Per non-null string value whether it is a valid timestamp (nulls count as valid)."""
    n = len(values)
    fixed = _fixed_shape(values)
    if fixed is not None and fixed.all():
        return fixed
    ok = np.ones(n, dtype=bool)
    present = ~pc.is_null(values).to_numpy(zero_copy_only=False)
    if not present.any():
        return ok
    parts = pc.extract_regex(pc.fill_null(values, ""), _SHAPE)
    shaped = parts.is_valid().to_numpy(zero_copy_only=False) & present
    year, month, day = _ints(parts, "y"), _ints(parts, "mo"), _ints(parts, "d")
    fast = (
        shaped
        & _calendar_ok(year, month, day)
        & (_ints(parts, "h") <= 23)
        & (_ints(parts, "mi") <= 59)
        & (_ints(parts, "s") <= 59)
        & (_ints(parts, "oh") <= 23)
        & (_ints(parts, "om") <= 59)
    )
    slow = np.flatnonzero(present & ~fast)
    if len(slow):
        texts = values.take(pa.array(slow)).to_pylist()
        verdicts = {text: timestamp_ok(text) for text in set(texts)}
        ok[slow] = [verdicts[text] for text in texts]
    return ok
