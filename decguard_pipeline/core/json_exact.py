"""orjson's parser, refusing what it would read otherwise than the standard library.

orjson (3.10 on) reads an integer beyond 64 bits as a float: ``1180591620717411303424``
becomes ``1.1805916207174113e+21``, where the standard library, and DecGuard with it, keeps
the integer. Every caller already parses with the standard library what orjson refuses
(NaN, infinities, lone surrogates), so :func:`loads` refuses text where a number may have 19
or more digits before its point: every integer outside 64 bits has them. What is refused in
error (such a run inside a string, or a long float) the standard library reads the same.
"""

from __future__ import annotations

from typing import Any

import orjson

_RUN = 19  # digits: -9223372036854775809, the first integer below 64 bits, has 19
_CHUNK = 16 << 20  # bytes scanned at a time (a copy of each, not of the whole document)


def _table() -> bytes:
    """Digits to ``0``; what may come before a number (``:``, ``,``, ``[``) to ``p``; ``-``
    kept; anything else to a space (JSON's own whitespace is deleted)."""
    out = bytearray(b" " * 256)
    out[ord("0") : ord("9") + 1] = b"0" * 10
    for byte in b":,[":
        out[byte] = ord("p")
    out[ord("-")] = ord("-")
    return bytes(out)


_TABLE, _SPACE = _table(), b" \t\n\r"
_NUMBERS = (b"p" + b"0" * _RUN, b"p-" + b"0" * _RUN)


def long_integer(raw: bytes | bytearray | memoryview) -> bool:
    """Whether ``raw`` may hold a number whose integer part has 19 or more digits: a run of
    19 digits right after ``:``, ``,``, ``[`` or the document's start (whitespace between
    them skipped, a minus sign allowed), in a string or not. Hex digests and long digit runs
    within strings do not count, unless right after one of those characters."""
    view = memoryview(raw).cast("B")
    carry = b"p"  # the document's start: a number may begin it
    for start in range(0, len(view), _CHUNK):
        text = carry + bytes(view[start : start + _CHUNK]).translate(_TABLE, _SPACE)
        if any(number in text for number in _NUMBERS):
            return True
        carry = text[-(len(_NUMBERS[1]) - 1) :]  # a number split between two chunks
    return False


def loads(raw: bytes | bytearray | memoryview | str) -> Any:
    """``orjson.loads(raw)``, raising ``orjson.JSONDecodeError`` also where an integer may
    lie beyond 64 bits (for the caller's standard-library fallback)."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if long_integer(data):
        raise orjson.JSONDecodeError("a number of 19 digits or more: parsed exactly elsewhere",
                                     "", 0)  # fmt: skip
    return orjson.loads(raw)
