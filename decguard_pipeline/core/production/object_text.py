"""The exact JSON of a record's object field (``metadata``, an object ``input``), column-wise.

Arrow parses an object into a struct whose fields are every key seen in the block, in the
order first seen, and it reads an absent key and ``null`` alike; orjson writes a record's
object with its own keys in the record's order. So a text is proposed from the struct (its
non-null members, compact, in struct order) and accepted for a record only when the record's
line holds exactly that text, or Python's ``json.dumps`` spacing of it, right after the key:
then the text is the object's, byte for byte. Any other record (keys in another order, an
explicit null, escapes or number spellings orjson would rewrite, nested values) is left to
the caller, which encodes it from the parsed record.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from decguard_pipeline.core.production.record_text import json_flags, json_floats, json_strings


def proposed_texts(
    struct: pa.Array, order: list[int], *, spaced: bool = False
) -> tuple[pa.Array, np.ndarray]:
    """Per record, the compact (``spaced``: ``", "`` and ``": "``) JSON of the struct's
    non-null members in ``order`` (field indices), and which records the proposal cannot
    cover (a member of a type not proposed here)."""
    n = len(struct)
    unsure = np.zeros(n, dtype=bool)
    sep, colon = (", ", ": ") if spaced else (",", ":")
    text = pa.array([""] * n, pa.string())
    for i in order:
        field = struct.type.field(i)
        child = struct.field(i)
        kind = child.type
        if kind == pa.null():
            continue
        if kind in (pa.string(), pa.large_string()):
            value = json_strings(child)
        elif kind == pa.bool_():
            value = json_flags(child)
        elif pa.types.is_integer(kind):
            value = pc.cast(child, pa.string())
        elif kind == pa.float64():
            value = json_floats(child)
        else:  # nested objects and lists: the caller encodes them
            unsure |= child.is_valid().to_numpy(zero_copy_only=False)
            continue
        member = pc.binary_join_element_wise(
            json_strings(pa.array([field.name]))[0], colon, value, ""
        )
        joined = pc.binary_join_element_wise(text, sep, member, "")
        empty = pc.equal(pc.utf8_length(text), 0)
        joined = pc.if_else(empty, member, joined)
        text = pc.if_else(child.is_valid(), joined, text)
    return pc.binary_join_element_wise("{", text, "}", ""), unsure


_ESCAPE = re.compile(rb"\\u00")


def value_starts(block: Any, starts: np.ndarray, key: str) -> np.ndarray:
    """Per record (lines starting at ``starts``), where the value of ``"key":`` begins when
    the key is written exactly once on the record's line (one optional space each side of
    the colon) and the line holds no ``\\u00`` escape (a key spelt with escapes hides from
    the search), else -1."""
    pattern = re.compile(re.escape(json_strings(pa.array([key]))[0].as_py().encode()) + rb" ?: ?")
    ends = np.fromiter((m.end() for m in pattern.finditer(block)), dtype=np.int64)
    lines = np.searchsorted(starts, ends, side="right") - 1
    keep = lines >= 0
    ends, lines = ends[keep], lines[keep]
    once = np.bincount(lines, minlength=len(starts))[lines] == 1
    out = np.full(len(starts), -1, dtype=np.int64)
    out[lines[once]] = ends[once]
    escapes = np.fromiter((m.start() for m in _ESCAPE.finditer(block)), dtype=np.int64)
    out[np.searchsorted(starts, escapes, side="right") - 1] = -1
    return out


def matches(data: np.ndarray, at: np.ndarray, texts: pa.Array) -> np.ndarray:
    """Per record, whether the bytes of ``data`` from ``at`` (-1: no) are ``texts``'s. The
    source stretches become strings over ``data`` without a copy (every other element of an
    array whose gaps are the bytes between them) and are compared by Arrow."""
    lengths = pc.binary_length(texts).to_numpy(zero_copy_only=False).astype(np.int64)
    begin = np.maximum.accumulate(np.maximum(at, 0)) if len(at) else at
    # the stretches share one offsets buffer, so they must not overlap: one running into
    # the next record's line is not its record's object anyway
    usable = (at >= 0) & (begin + lengths <= len(data))
    usable[:-1] &= begin[:-1] + lengths[:-1] <= begin[1:]
    end = np.where(usable, begin + lengths, begin)
    offsets = np.empty(2 * len(at) + 1, dtype=np.int64)
    offsets[0:-1:2], offsets[1::2] = begin, end
    offsets[-1] = end[-1] if len(end) else 0
    pieces = pa.LargeStringArray.from_buffers(
        2 * len(at), pa.py_buffer(offsets), pa.py_buffer(data)
    )
    source = pieces.take(pa.array(np.arange(0, 2 * len(at), 2)))
    same = pc.fill_null(pc.equal(source, pc.cast(texts, pa.large_string())), False)
    return usable & same.to_numpy(zero_copy_only=False)


def _source_order(
    struct: pa.Array, data: np.ndarray, at: np.ndarray, starts: np.ndarray, row: int
) -> list[int]:
    """The struct's fields in the order record ``row`` writes them (fields it does not
    write last): producers usually write every record's keys in one order."""
    end = starts[row + 1] if row + 1 < len(starts) else len(data)
    line = data[at[row] : end].tobytes()
    names = [struct.type.field(i).name for i in range(struct.type.num_fields)]
    found = [line.find(json_strings(pa.array([name]))[0].as_py().encode()) for name in names]
    return sorted(range(len(names)), key=lambda i: (found[i] < 0, found[i]))


def object_texts(
    struct: pa.Array, block: Any, starts: np.ndarray, key: str
) -> tuple[pa.Array, np.ndarray]:
    """The compact JSON text of each record's object ``key`` (the struct column Arrow read
    from the block's records, which start at ``starts``), and which records it is not
    certain for (the caller encodes those from the parsed record). A null struct row gets
    no text."""
    data = np.frombuffer(block, dtype=np.uint8)
    present = struct.is_valid().to_numpy(zero_copy_only=False)
    at = value_starts(block, starts, key)
    found = np.zeros(len(struct), dtype=bool)
    texts = pa.nulls(len(struct), pa.string())
    unsure = np.zeros(len(struct), dtype=bool)
    orders = [list(range(struct.type.num_fields))]
    for attempt in range(2):
        for order in orders:
            compact, unsure = proposed_texts(struct, order)
            for spaced in (False, True):
                proposal = proposed_texts(struct, order, spaced=True)[0] if spaced else compact
                hit = matches(data, np.where(found | ~present, -1, at), proposal)
                if hit.any():
                    texts = pc.if_else(pa.array(hit), compact, texts)
                    found |= hit
                if (found | ~present).all():
                    break
        missing = np.flatnonzero(present & ~found & (at >= 0))
        if attempt or not len(missing):
            break
        orders = [_source_order(struct, data, at, starts, int(missing[0]))]
    return texts, present & (unsure | ~found)
