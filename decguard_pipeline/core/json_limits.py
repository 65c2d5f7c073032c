"""Cheap checks of a stored JSON document (a report) before it is parsed.

Parsing builds tens of bytes of Python objects per byte of input, and DecGuard's readers give
up only afterwards: a 100 MB file of nested arrays took 16 GB and 75 s to refuse. Here, before
any parser runs:

* only a regular file is read (not ``/dev/zero``, a FIFO or a socket), and its size is
  checked against a limit (``DECGUARD_MAX_REPORT_BYTES``, default 1 GiB, room for a report
  of about a million cases) before reading and again by the read itself, which never takes
  more than the limit;
* the bytes are checked to be UTF-8 a chunk at a time (no text copy of the whole file);
* a document whose top level is not an object is refused (DecGuard's message);
* nesting is checked with one vectorised pass: DecGuard's parser (pydantic's) refuses a
  value inside more than 200 arrays and objects with ``Invalid JSON: recursion limit
  exceeded at line L column C``; the same message, at the same place, is given here without
  parsing, so no reader here ever recurses deeper than that.
"""

from __future__ import annotations

import codecs
import mmap
import os
import re
import stat
import threading
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from decguard_pipeline.core.errors import ReportError

if TYPE_CHECKING:
    import numpy as np

MAX_BYTES_ENV = "DECGUARD_MAX_REPORT_BYTES"
DEFAULT_MAX_BYTES = 1 << 30
PARSER_DEPTH = 200  # pydantic-core's JSON recursion limit, which DecGuard reads reports with
# Below this size a document that is not an object is parsed anyway, so that the message is
# exactly DecGuard's even for a broken one ("Invalid JSON: ..." rather than "should be an
# object"); above it, not parsing matters more.
PARSE_ANYWAY_BYTES = 1 << 20

_CHUNK = 1 << 20  # bytes per vectorised step: a few MB of temporaries, whatever the file
_WHITESPACE = b" \t\n\r"
_VALUE_START = frozenset(b'["-0123456789tfn')
_SPACE = re.compile(rb"[ \t\n\r]*")
_KEY = re.compile(rb'"(?:[^"\\]|\\.)*"[ \t\n\r]*:[ \t\n\r]*', re.DOTALL)


def max_bytes() -> int:
    value = os.environ.get(MAX_BYTES_ENV, "").strip()
    if not value:
        return DEFAULT_MAX_BYTES
    if not value.isdigit() or int(value) < 1:
        raise ReportError(f"{MAX_BYTES_ENV} must be a positive number of bytes, got {value!r}")
    return int(value)


def open_regular(path: Path, what: str) -> BinaryIO:
    """``path`` opened for reading; ReportError when it is not a regular file (a device such
    as ``/dev/zero``, a FIFO, a socket: none has a size to check, and some never end).
    Opened without blocking, so a FIFO with no writer is refused, not waited on. OSError
    propagates: callers word it as DecGuard does."""
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
            raise ReportError(f"{path}: cannot read {what}: it is {kind}")
        os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def read_bounded(stream: BinaryIO, path: Path, what: str, limit: int | None = None) -> bytes:
    """Every byte of ``stream``, refused (ReportError) as soon as there are more than the
    limit: the size on disk is checked first, and the read itself never takes more (a file
    that grows while it is read, or whose size the file system does not know)."""
    limit = max_bytes() if limit is None else limit
    _check_size(os.fstat(stream.fileno()).st_size, path, what, limit)
    raw = stream.read(limit + 1)
    _check_read(len(raw), path, what, limit)
    return raw


def _check_size(size: int, path: Path, what: str, limit: int) -> None:
    if size > limit:
        raise ReportError(
            f"{path}: cannot read {what}: it is {size} bytes, over the limit of {limit} bytes "
            f"(set {MAX_BYTES_ENV} to read larger files)"
        )


def _check_read(size: int, path: Path, what: str, limit: int) -> None:
    if size > limit:
        raise ReportError(
            f"{path}: cannot read {what}: over the limit of {limit} bytes "
            f"(set {MAX_BYTES_ENV} to read larger files)"
        )


def read_document(path: Path, what: str) -> bytes:
    """The bytes of a stored document: a regular file, refused (ReportError) when larger
    than the limit, before reading by its size and while reading by what arrives. OSError
    propagates: callers word it as DecGuard does."""
    limit = max_bytes()
    with open_regular(path, what) as stream:
        return read_bounded(stream, path, what, limit)


class ReadAhead:
    """``read_writable(path, what)`` in a thread from now on: the read waits on the kernel,
    not on the interpreter, so it overlaps whatever this process imports meanwhile (the
    ``report`` command: the 97 MB of a 5,000-case ``--all`` report read during the ~0.2 s
    of the imports before its split). :meth:`result` waits for it, and raises what the read
    raised."""

    def __init__(self, path: Path, what: str) -> None:
        self._buffer: bytearray | mmap.mmap | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._read, args=(path, what), daemon=True)
        self._thread.start()

    def _read(self, path: Path, what: str) -> None:
        try:
            # pages made as the read writes them: while MAP_POPULATE makes 97 MB of them, the
            # importing thread's own memory mappings wait for it (the imports of ``report``
            # took 0.21-0.28 s beside it, 0.16-0.22 s beside this, ten interleaved rounds)
            self._buffer = read_writable(path, what, populate=False)
        except BaseException as exc:  # raised where the result is asked for
            self._error = exc

    def result(self) -> bytearray | mmap.mmap:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._buffer is not None
        return self._buffer


def read_writable(path: Path, what: str, *, populate: bool = True) -> bytearray | mmap.mmap:
    """:func:`read_document` into a buffer the caller may write to (``report.halves`` marks
    where its parts end in it). On Linux, anonymous memory mapped for it, with its pages made
    at once (``MAP_POPULATE``: 97 MB read in 0.06-0.08 s, against 0.07-0.09 s for bytes and
    0.14-0.17 s for a zeroed bytearray) unless ``populate`` is False: the kernel then makes
    them as the read writes them (0.09-0.12 s); a file that changes size while read, as
    bytes."""
    limit = max_bytes()
    with open_regular(path, what) as stream:
        size = os.fstat(stream.fileno()).st_size
        _check_size(size, path, what, limit)
        linux = getattr(mmap, "MAP_POPULATE", 0)
        if size and linux:
            flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | (linux if populate else 0)
            buffer = mmap.mmap(-1, size, flags=flags)
            if stream.readinto(buffer) == size and not stream.read(1):
                return buffer
            buffer.close()
    return bytearray(read_document(path, what))


def check_utf8(raw: bytes) -> None:
    """Raise the UnicodeDecodeError ``raw.decode('utf-8')`` would, without decoding it whole."""
    view = memoryview(raw)
    start = 0
    while start < len(raw):
        end = min(start + _CHUNK, len(raw))
        while end < len(raw) and 0x80 <= raw[end] < 0xC0:  # not inside a character
            end += 1
        try:
            codecs.utf_8_decode(view[start:end], "strict", True)
        except UnicodeDecodeError as exc:
            raise UnicodeDecodeError(
                "utf-8", raw, start + exc.start, start + exc.end, exc.reason
            ) from None
        start = end


def structure_problem(raw: bytes) -> str | None:
    """DecGuard's schema error line (``(root): ...``) for a document that need not be parsed
    to be refused: not an object, or nested deeper than its parser reads. None otherwise
    (the document may still be invalid; the parsers say how)."""
    first = first_significant(raw)
    if first in _VALUE_START and len(raw) > PARSE_ANYWAY_BYTES:  # any value but an object
        return "(root): Input should be an object"
    position = too_deep(raw)
    if position is not None:
        line, column = line_column(raw, position)
        return f"(root): Invalid JSON: recursion limit exceeded at line {line} column {column}"
    return None


# A case or record sits two containers deep in its report (the document, its list of
# results or records): one whose values nest deeper than this makes a report DecGuard's
# parser refuses to read back, and far deeper ones exhaust the JSON decoder's recursion.
ITEM_DEPTH = PARSER_DEPTH - 2


def line_column(raw: bytes, position: int) -> tuple[int, int]:
    """1-based line and column (in bytes) of an offset of ``raw``."""
    line = raw.count(b"\n", 0, position) + 1
    return line, position - (raw.rfind(b"\n", 0, position) + 1) + 1


def nesting_problem(raw: bytes, *, enclosing: int = 0, lines: bool = False) -> str | None:
    """``nested too deeply: …`` when a value of the JSON text ``raw`` sits inside more than
    ``ITEM_DEPTH`` arrays and objects of its item (``enclosing``: how many containers hold each
    item, one for a file that is a list of them), else None. ``lines``: name the line too (a
    whole file; a JSONL line is named by the caller). Decided without parsing, and cheaply for
    the usual item (too few brackets to be that deep)."""
    limit = ITEM_DEPTH + enclosing
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return None
    position = too_deep(raw, limit)
    if position is None:
        return None
    line, column = line_column(raw, position)
    where = f"line {line}, column {column}" if lines else f"column {column}"
    return (
        f"nested too deeply: the value at {where} is inside more than {ITEM_DEPTH} arrays and "
        f"objects of its {'item' if enclosing else 'line'} (a report holding it could not be "
        f"read back: DecGuard's parser stops at {PARSER_DEPTH})"
    )


def first_significant(raw: bytes) -> int | None:
    """The first byte that is not JSON whitespace, or None."""
    for byte in raw[:4096]:
        if byte not in _WHITESPACE:
            return byte
    stripped = raw.lstrip(_WHITESPACE)
    return stripped[0] if stripped else None


def too_deep(raw: bytes, limit: int = PARSER_DEPTH) -> int | None:
    """Offset of the first value inside more than ``limit`` arrays and objects, which is
    where pydantic's parser stops (object keys are not values), or None.

    Strings are told apart from structure by their unescaped quotes; chunks never end inside
    a run of backslashes, so each escape is decided within one chunk."""
    import numpy as np  # here: reading a document (``ReadAhead``) starts before NumPy is in

    data = np.frombuffer(raw, dtype=np.uint8)
    n = len(data)
    depth, in_string, start = 0, 0, 0
    while start < n:
        end = min(start + _CHUNK, n)
        while end < n and data[end - 1] == 0x5C:
            end += 1
        chunk = data[start:end]
        quotes = _unescaped_quotes(chunk)
        folded = chunk | 0x20  # "[" -> "{" and "]" -> "}", nothing else lands on them
        opens = folded == 0x7B
        marks = np.flatnonzero(opens | (folded == 0x7D))
        if len(marks):
            quoted = (np.searchsorted(quotes, marks) + in_string) & 1
            marks = marks[quoted == 0]
            steps = np.where(opens[marks], 1, -1)
            levels = depth + np.cumsum(steps, dtype=np.int64)
            if len(levels) and levels.max() > limit:
                deepest = marks[(levels == limit + 1) & (steps > 0)]
                for mark in deepest.tolist():
                    found = _first_child(raw, start + mark)
                    if found is not None:
                        return found
            if len(levels):
                depth = int(levels[-1])
        in_string = (in_string + len(quotes)) & 1
        start = end
    return None


def _unescaped_quotes(chunk: np.ndarray) -> np.ndarray:
    import numpy as np

    quotes = np.flatnonzero(chunk == 0x22)
    slashes = np.flatnonzero(chunk == 0x5C)
    if not len(quotes) or not len(slashes):
        return quotes
    # runs of backslashes: a quote right after a run of odd length is escaped
    breaks = np.flatnonzero(np.diff(slashes) != 1)
    run_start = slashes[np.concatenate(([0], breaks + 1))]
    run_end = slashes[np.concatenate((breaks, [len(slashes) - 1]))]
    which = np.searchsorted(run_end, quotes - 1)
    which = np.minimum(which, len(run_end) - 1)
    after_run = run_end[which] == quotes - 1
    odd = ((run_end[which] - run_start[which] + 1) & 1) == 1
    return quotes[~(after_run & odd)]


def _first_child(raw: bytes, opener: int) -> int | None:
    """Where the first value inside the container opened at ``opener`` starts; None when
    it is empty. For an object, after its first key (a malformed key: the key itself)."""
    position = _SPACE.match(raw, opener + 1).end()  # type: ignore[union-attr]
    if position >= len(raw):
        return None
    if raw[position] in (ord("]"), ord("}")):
        return None
    if raw[opener] == ord("{"):
        key = _KEY.match(raw, position)
        if key is not None:
            return key.end()
    return position
