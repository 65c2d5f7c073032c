"""Row-wise concatenation of literal text and string columns, by one Arrow ``take``.

``pc.binary_join_element_wise(*pieces, "")`` visits every piece of every row through a
generic kernel: a record's ~40 pieces cost ~100 ns each, and a report's ten million records
are 400 million pieces. Here every piece is gathered by one ``take`` into a single string
array whose values, in order, are row 0's pieces, then row 1's, ...: its data buffer is
already the rows' texts back to back, and every k-th offset (k pieces a row) is where a row
begins. Same values as the kernel, several times faster.

A column of few distinct values (a label, a version, a probability in hundredths, a flag)
takes part as the texts of its distinct values and a code per row, and a run of such
columns with the literal text around them is folded into one piece (the distinct
combinations that occur, each joined once): a record then has ~12 pieces instead of ~40.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_LIMIT = (1 << 31) - 1  # bytes a string array (int32 offsets) can hold
CHUNK_BYTES = 4 << 20
SAMPLE = 2048  # rows looked at to tell a column of few distinct values
MAX_CODES = 4096  # distinct combinations a folded piece may have
_MAX_PRODUCT = 1 << 22  # codes of two pieces combined through a lookup table of this size


@dataclass
class Coded:
    """A column as the texts of its distinct values and each row's code."""

    dictionary: pa.Array  # strings, no null
    codes: np.ndarray  # int32, one per row

    def __len__(self) -> int:
        return len(self.codes)

    def slice(self, start: int, length: int) -> Coded:
        return Coded(self.dictionary, self.codes[start : start + length])

    def size(self) -> int:
        """About the bytes its rows hold."""
        return _data_size(self.dictionary) * len(self.codes) // max(len(self.dictionary), 1)


Piece = str | pa.Array | Coded


def _coded(array: pa.Array, null_replacement: str | None) -> Coded | None:
    """``array`` coded when a sample of it repeats a lot (a null as ``null_replacement``;
    never with nulls that must make the row null)."""
    if array.null_count and null_replacement is None:
        return None
    sample = array.slice(0, SAMPLE)
    if pc.count_distinct(sample, mode="all").as_py() * 4 > len(sample):
        return None
    encoded = pc.dictionary_encode(array)
    dictionary = encoded.dictionary
    codes = encoded.indices
    if array.null_count:
        codes = pc.fill_null(codes, len(dictionary))
        dictionary = pa.concat_arrays([dictionary, pa.array([null_replacement], pa.string())])
    return Coded(dictionary, codes.to_numpy(zero_copy_only=False).astype(np.int32))


def _merged(a: Coded, b: Coded) -> Coded | None:
    """One piece for two adjacent coded pieces, unless their combinations are too many."""
    k = len(b.dictionary)
    if len(a.dictionary) * k > _MAX_PRODUCT:
        return None
    combined = a.codes.astype(np.int64) * k + b.codes
    present = np.bincount(combined, minlength=len(a.dictionary) * k) > 0
    values = np.flatnonzero(present)
    if len(values) > MAX_CODES:
        return None
    lookup = np.cumsum(present, dtype=np.int64) - 1
    left = a.dictionary.take(pa.array(values // k))
    right = b.dictionary.take(pa.array(values % k))
    joined = pc.binary_join_element_wise(left, right, "")
    return Coded(joined, lookup[combined].astype(np.int32))


def _with_text(coded: Coded, before: str = "", after: str = "") -> Coded:
    joined = pc.binary_join_element_wise(before, coded.dictionary, after, "")
    return Coded(joined, coded.codes)


def folded(pieces: Sequence[str | pa.Array], null_replacement: str | None) -> list[Piece]:
    """``pieces`` with the columns of few distinct values coded and each run of coded
    columns and literal text folded into as few pieces as :data:`MAX_CODES` allows."""
    out: list[Piece] = []
    group: Coded | None = None
    text = ""
    for piece in pieces:
        if isinstance(piece, str):
            if group is None:
                text += piece
            else:
                group = _with_text(group, after=piece)
            continue
        coded = _coded(piece, null_replacement)
        if coded is None:
            if group is not None:
                out.append(group)
                group = None
            if text:
                out.append(text)
                text = ""
            out.append(piece)
            continue
        if text:
            coded, text = _with_text(coded, before=text), ""
        merged = None if group is None else _merged(group, coded)
        if merged is None and group is not None:
            out.append(group)
        group = coded if merged is None else merged
    if group is not None:
        out.append(group)
    if text:
        out.append(text)
    return out


def _data_size(array: pa.Array) -> int:
    offsets = np.frombuffer(array.buffers()[1], dtype=np.int32)
    return int(offsets[array.offset + len(array)] - offsets[array.offset])


def concatenated_chunks(
    pieces: Sequence[str | pa.Array], null_replacement: str | None = None
) -> pa.ChunkedArray:
    """:func:`concatenated` a few MB of text at a time (chunks of :data:`CHUNK_BYTES`): a
    take's output grows by reallocation, and buffers of tens of MB come back from the
    allocator as fresh pages for every batch (each page faulted and zeroed again), while
    a few MB are reused from one chunk to the next."""
    arrays = [_string(p) if isinstance(p, pa.Array | pa.ChunkedArray) else p for p in pieces]
    if not any(isinstance(p, pa.Array) for p in arrays):
        return pa.chunked_array([concatenated(arrays, null_replacement)], pa.string())
    parts = folded(arrays, null_replacement)
    columns = [p for p in parts if not isinstance(p, str)]
    n = len(columns[0])
    size = sum(c.size() if isinstance(c, Coded) else _data_size(c) for c in columns)
    size += n * sum(len(p.encode()) for p in parts if isinstance(p, str))
    rows = max(1024, CHUNK_BYTES * n // max(size, 1))
    if n <= rows:
        return pa.chunked_array([concatenated(parts, null_replacement)], pa.string())
    chunks = [
        concatenated(
            [p if isinstance(p, str) else p.slice(start, rows) for p in parts], null_replacement
        )
        for start in range(0, n, rows)
    ]
    return pa.chunked_array(chunks, pa.string())


def _string(array: pa.Array | pa.ChunkedArray) -> pa.Array:
    array = array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array
    return array if array.type == pa.string() else pc.cast(array, pa.string())


def concatenated(pieces: Sequence[Piece], null_replacement: str | None = None) -> pa.Array:
    """Per row, the concatenation of ``pieces`` (literal text, string arrays of one length
    or :class:`Coded` columns): ``pc.binary_join_element_wise(*pieces, "")``, a row null
    where a piece is null unless ``null_replacement`` stands in for null pieces."""
    options = {} if null_replacement is None else {
        "null_handling": "replace", "null_replacement": null_replacement}  # fmt: skip
    columns = [p for p in pieces if not isinstance(p, str)]
    if not columns:  # literals alone: the kernel's scalar
        return pc.binary_join_element_wise(*pieces, "", **options)
    n = len(columns[0])
    arrays: list[pa.Array] = []
    starts: list[int] = []
    per_row: list[bool] = []
    valid: pa.Array | None = None
    at = size = 0
    for piece in pieces:
        if isinstance(piece, str):
            array = pa.array([piece], pa.string())
            size += n * len(piece.encode())
        elif isinstance(piece, Coded):
            array = piece.dictionary
            size += piece.size()
        else:
            array = _string(piece)
            if array.null_count:
                if null_replacement is None:
                    valid = array.is_valid() if valid is None else pc.and_(valid, array.is_valid())
                    array = pc.fill_null(array, "")
                else:
                    array = pc.fill_null(array, null_replacement)
            size += _data_size(array)
        arrays.append(array)
        starts.append(at)
        per_row.append(not isinstance(piece, str | Coded))
        at += len(array)
    if size > _LIMIT or at > _LIMIT or not n:
        return pc.binary_join_element_wise(*_arrays(pieces), "", **options)
    k = len(arrays)
    index = np.empty((n, k), dtype=np.int32)
    index[:] = np.asarray(starts, dtype=np.int32)
    index[:, np.asarray(per_row)] += np.arange(n, dtype=np.int32)[:, None]
    for j, piece in enumerate(pieces):
        if isinstance(piece, Coded):
            index[:, j] += piece.codes
    taken = pc.take(pa.concat_arrays(arrays), pa.array(index.ravel()), boundscheck=False)
    offsets = np.frombuffer(taken.buffers()[1], dtype=np.int32)
    rows = offsets[taken.offset : taken.offset + n * k + 1 : k].copy()
    out = pa.StringArray.from_buffers(n, pa.py_buffer(rows), taken.buffers()[2])
    if valid is not None:
        out = pc.if_else(valid, out, pa.scalar(None, pa.string()))
    return out


def _arrays(pieces: Sequence[Piece]) -> list[str | pa.Array]:
    """Coded pieces as the columns they stand for."""
    return [p.dictionary.take(pa.array(p.codes)) if isinstance(p, Coded) else p for p in pieces]
