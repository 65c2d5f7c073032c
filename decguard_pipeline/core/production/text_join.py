"""Row-wise concatenation of literal text and string columns, by one Arrow ``take``.

``pc.binary_join_element_wise(*pieces, "")`` visits every piece of every row through a
generic kernel: a record's ~40 pieces cost ~100 ns each, and a report's ten million records
are 400 million pieces. Here every piece is gathered by one ``take`` into a single string
array whose values, in order, are row 0's pieces, then row 1's, ...: its data buffer is
already the rows' texts back to back, and every k-th offset (k pieces a row) is where a row
begins. Same values as the kernel, several times faster.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_LIMIT = (1 << 31) - 1  # bytes a string array (int32 offsets) can hold
CHUNK_BYTES = 4 << 20


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
    pieces = [p.combine_chunks() if isinstance(p, pa.ChunkedArray) else p for p in pieces]
    columns = [p for p in pieces if not isinstance(p, str)]
    n = len(columns[0]) if columns else 0
    size = sum(_data_size(c) for c in columns if c.type == pa.string())
    size += n * sum(len(p.encode()) for p in pieces if isinstance(p, str))
    rows = max(1024, CHUNK_BYTES * n // max(size, 1))
    if not columns or n <= rows:
        return pa.chunked_array([concatenated(pieces, null_replacement)], pa.string())
    chunks = [
        concatenated(
            [p if isinstance(p, str) else p.slice(start, rows) for p in pieces], null_replacement
        )
        for start in range(0, n, rows)
    ]
    return pa.chunked_array(chunks, pa.string())


def concatenated(pieces: Sequence[str | pa.Array], null_replacement: str | None = None) -> pa.Array:
    """Per row, the concatenation of ``pieces`` (literal text, or string arrays of one
    length): ``pc.binary_join_element_wise(*pieces, "")``, a row null where a piece is null
    unless ``null_replacement`` stands in for null pieces."""
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
        else:
            array = piece.combine_chunks() if isinstance(piece, pa.ChunkedArray) else piece
            if array.type != pa.string():
                array = pc.cast(array, pa.string())
            if array.null_count:
                if null_replacement is None:
                    valid = array.is_valid() if valid is None else pc.and_(valid, array.is_valid())
                    array = pc.fill_null(array, "")
                else:
                    array = pc.fill_null(array, null_replacement)
            size += _data_size(array)
        arrays.append(array)
        starts.append(at)
        per_row.append(not isinstance(piece, str))
        at += len(array)
    if size > _LIMIT or at > _LIMIT or not n:
        return pc.binary_join_element_wise(*pieces, "", **options)
    k = len(arrays)
    index = np.empty((n, k), dtype=np.int32)
    index[:] = np.asarray(starts, dtype=np.int32)
    index[:, np.asarray(per_row)] += np.arange(n, dtype=np.int32)[:, None]
    taken = pc.take(pa.concat_arrays(arrays), pa.array(index.ravel()), boundscheck=False)
    offsets = np.frombuffer(taken.buffers()[1], dtype=np.int32)
    rows = offsets[taken.offset : taken.offset + n * k + 1 : k].copy()
    out = pa.StringArray.from_buffers(n, pa.py_buffer(rows), taken.buffers()[2])
    if valid is not None:
        out = pc.if_else(valid, out, pa.scalar(None, pa.string()))
    return out
