"""Response bodies read within a size limit, decompressed as they arrive.

A model answer is small; a hostile or broken server can send 50 MB, or 200 KB of gzip that
inflates to 200 MB. Bodies are therefore read chunk by chunk and decoded here (not by the
HTTP client, which inflates a whole chunk at once) with zlib's ``max_length``, so at most
``limit + 1`` decoded bytes ever exist: memory stays bounded whatever arrives.

Content codings are those httpx decodes without optional packages (DecGuard's client):
``identity``, ``gzip``, ``deflate`` (zlib-wrapped, or raw when that fails on the first
chunk); other codings are passed through undecoded, as httpx does. A corrupt stream raises
``httpx.DecodingError`` with zlib's message, the error DecGuard's client raises.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from typing import Any

DEFAULT_MAX_RESPONSE_BYTES = 1 << 20  # 1 MiB: a model answer is a few hundred bytes
ACCEPT_ENCODING = "gzip, deflate"  # the codings decoded here, and no others


def _decoding_error(exc: Exception) -> Exception:
    # httpx imported only on this failure path: property runs import this module (paraphrase
    # limits) and never need httpx otherwise
    import httpx

    return httpx.DecodingError(str(exc))


class TooLarge(Exception):
    """The decoded body is larger than the limit."""


class _Inflate:
    def __init__(self, coding: str) -> None:
        self.coding = coding
        self.first = True
        wbits = zlib.MAX_WBITS | 16 if coding == "gzip" else zlib.MAX_WBITS
        self.inflater = zlib.decompressobj(wbits)

    def decode(self, data: bytes, room: int) -> bytes:
        """Decoded ``data``; TooLarge as soon as it would exceed ``room`` bytes."""
        first, self.first = self.first, False
        try:
            return self._decode(data, room)
        except zlib.error as exc:
            if first and self.coding == "deflate":  # raw deflate, without the zlib wrapper
                self.inflater = zlib.decompressobj(-zlib.MAX_WBITS)
                return self.decode(data, room)
            raise _decoding_error(exc) from exc

    def _decode(self, data: bytes, room: int) -> bytes:
        pieces, size = [], 0
        while data:
            # max_length > 0 always (size <= room): zlib reads 0 as "no limit"
            piece = self.inflater.decompress(data, room + 1 - size)
            pieces.append(piece)
            size += len(piece)
            if size > room:
                raise TooLarge
            tail = self.inflater.unconsumed_tail
            if not piece and len(tail) >= len(data):  # the stream has ended
                break
            data = tail
        return b"".join(pieces)

    def flush(self, room: int) -> bytes:
        try:
            rest = self.inflater.flush()
        except zlib.error as exc:
            raise _decoding_error(exc) from exc
        if len(rest) > room:
            raise TooLarge
        return rest


def codings(headers: Mapping[str, str]) -> list[str]:
    """The Content-Encoding values decoded here, in the order they were applied."""
    if hasattr(headers, "getall"):  # aiohttp
        values = headers.getall("content-encoding", [])
    elif hasattr(headers, "get_list"):  # httpx
        values = headers.get_list("content-encoding")
    else:
        values = [headers.get("content-encoding", "")]
    found = []
    for value in values:
        for part in str(value).split(","):
            coding = part.strip().lower()
            if coding in ("gzip", "deflate"):
                found.append(coding)
    return found


class BoundedBody:
    """Collects one response body: ``feed`` raw chunks, then ``finish``."""

    def __init__(self, headers: Mapping[str, str], limit: int) -> None:
        self.limit = limit
        # the last coding applied is undone first
        self.stages = [_Inflate(c) for c in reversed(codings(headers))]
        self.parts: list[bytes] = []
        self.size = 0
        length = (headers.get("content-length") or "").strip()
        if not self.stages and length.isdigit() and int(length) > limit:
            raise TooLarge  # refused before a byte is read

    def feed(self, chunk: bytes) -> None:
        self._keep(self._through(self.stages, chunk))

    def finish(self) -> bytes:
        for i, stage in enumerate(self.stages):
            later = self.stages[i + 1 :]
            rest = stage.flush(self.limit if later else self.limit - self.size)
            self._keep(self._through(later, rest))
        return b"".join(self.parts)

    def _through(self, stages: list[_Inflate], data: bytes) -> bytes:
        # an intermediate coding's output is bounded by the limit too; the last one's by what
        # is left of it
        for j, stage in enumerate(stages):
            last = j == len(stages) - 1
            data = stage.decode(data, self.limit - self.size if last else self.limit)
        return data

    def _keep(self, data: bytes) -> None:
        if data:
            self.size += len(data)
            if self.size > self.limit:
                raise TooLarge
            self.parts.append(data)


def read_within(response: Any, limit: int) -> bytes:
    """A synchronous (httpx) response's body: at most ``limit`` decoded bytes (TooLarge
    beyond). How long it may take is the attempt's deadline (``deadline.py``)."""
    body = BoundedBody(response.headers, limit)
    for chunk in response.iter_raw():
        body.feed(chunk)
    return body.finish()
