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

from decguard_pipeline.core.production.record_text import (
    Joined,
    flag_texts,
    float_texts,
    json_strings,
    plain_strings,
    quoted,
)


def proposed_texts(
    struct: pa.Array, order: list[int], *, spaced: bool = False
) -> tuple[pa.Array, np.ndarray]:
    """Per record, the compact (``spaced``: ``", "`` and ``": "``) JSON of the struct's
    non-null members in ``order`` (field indices), and which records the proposal cannot
    cover (a member of a type not proposed here). Members every record has are joined in
    one pass with their keys as literal text; the rest joined key and value first."""
    unsure = np.zeros(len(struct), dtype=bool)
    sep, colon = (", ", ": ") if spaced else (",", ":")
    members: list[tuple[str, pa.Array, bool]] = []  # key, value text, quotes to add
    for i in order:
        child = struct.field(i)
        kind = child.type
        if kind == pa.null():
            continue
        if kind in (pa.string(), pa.large_string()):
            child = child if kind == pa.string() else pc.cast(child, pa.string())
            bare = child.null_count == 0 and plain_strings(child)
            value, quote = (child, True) if bare else (quoted(child), False)
        elif kind == pa.bool_():
            value, quote = flag_texts(child), False
        elif pa.types.is_integer(kind):
            value, quote = pc.cast(child, pa.string()), False
        elif kind == pa.float64():
            value, quote = float_texts(child), False
        else:  # nested objects and lists: the caller encodes them
            unsure |= child.is_valid().to_numpy(zero_copy_only=False)
            continue
        key = json_strings(pa.array([struct.type.field(i).name]))[0].as_py() + colon
        members.append((key, value, quote))
    if all(value.null_count == 0 for _, value, _ in members):
        out = Joined()
        out.literal("{")
        for number, (key, value, quote) in enumerate(members):
            out.literal((sep if number else "") + key + ('"' if quote else ""))
            out.column(value)
            out.literal('"' if quote else "")
        out.literal("}")
        return out.joined(), unsure
    # each present member with a leading separator, an absent one as nothing; the first
    # separator is cut off (pyarrow's null_handling="skip" drops rows that are all null)
    pieces = [
        pc.fill_null(pc.binary_join_element_wise(
            sep + key + ('"' if quote else ""), value, '"' if quote else "", ""
        ), "")
        for key, value, quote in members
    ]  # fmt: skip
    if not pieces:
        return pa.repeat(pa.scalar("{}"), len(struct)), unsure
    body = pc.utf8_slice_codeunits(pc.binary_join_element_wise(*pieces, ""), len(sep))
    return pc.binary_join_element_wise("{", body, "}", ""), unsure


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
    usable = (at >= 0) & (at + lengths <= len(data))
    stop = np.where(usable, at + lengths, 0)
    before = np.maximum.accumulate(np.concatenate(([0], stop[:-1]))) if len(at) else stop
    # the stretches share one offsets buffer, so they must not overlap: one overlapping an
    # earlier stretch runs beyond its own line, so it is not its record's object anyway
    usable &= at >= before
    stop = np.where(usable, at + lengths, 0)
    end = np.maximum.accumulate(stop) if len(at) else stop
    begin = np.where(usable, at, end)
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


def _closing_braces(data: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per record, where its line's final ``}`` stands (the line ending in ``}``, ``}\\n``
    or ``}\\r\\n``), else -1."""
    end = np.append(starts[1:], len(data)) - 1
    end -= (end >= starts) & (data[np.maximum(end, 0)] == 0x0A)
    end -= (end >= starts) & (data[np.maximum(end, 0)] == 0x0D)
    ok = (end >= starts) & (data[np.maximum(end, 0)] == 0x7D)
    return np.where(ok, end, -1)


class _Finder:
    """Where each record's object value may start: first right before the line's final brace
    (the object written last, the usual layout: nothing to search), else after its key."""

    def __init__(self, block: Any, starts: np.ndarray, key: str) -> None:
        self.block, self.starts, self.key = block, starts, key
        self.data = np.frombuffer(block, dtype=np.uint8)
        self.closes = _closing_braces(self.data, starts)
        self.quoted = json_strings(pa.array([key]))[0].as_py()
        self._after_key: np.ndarray | None = None

    def after_key(self) -> np.ndarray:
        if self._after_key is None:
            self._after_key = value_starts(self.block, self.starts, self.key)
        return self._after_key

    def hits(self, proposal: pa.Array, todo: np.ndarray, *, spaced: bool, last: bool) -> np.ndarray:
        """Records (among ``todo``) whose object is ``proposal``'s text, written ``last`` in
        the record or else anywhere after its key."""
        if not last:
            return matches(self.data, np.where(todo, self.after_key(), -1), proposal)
        lead = f", {self.quoted}: " if spaced else f",{self.quoted}:"
        tail = pc.binary_join_element_wise(lead, proposal, "}", "")
        size = pc.binary_length(tail).to_numpy(zero_copy_only=False)
        at = self.closes + 1 - size
        usable = todo & (self.closes >= 0) & (at >= self.starts)
        return matches(self.data, np.where(usable, at, -1), tail)


def object_texts(
    struct: pa.Array, block: Any, starts: np.ndarray, key: str
) -> tuple[pa.Array, np.ndarray]:
    """The compact JSON text of each record's object ``key`` (the struct column Arrow read
    from the block's records, which start at ``starts``), and which records it is not
    certain for (the caller encodes those from the parsed record). A null struct row gets
    no text."""
    finder = _Finder(block, starts, key)
    present = struct.is_valid().to_numpy(zero_copy_only=False)
    found = np.zeros(len(struct), dtype=bool)
    texts = pa.nulls(len(struct), pa.string())
    unsure = np.zeros(len(struct), dtype=bool)
    orders = [list(range(struct.type.num_fields))]
    # the layouts tried, the block's first line's spacing first (a writer keeps one spacing;
    # a record matches at most one of them, so the order changes only the work)
    layouts = [(True, False), (True, True), (False, False), (False, True)]
    first_line = bytes(finder.data[: finder.closes[0] + 1]) if len(starts) else b""
    if b'": ' in first_line:
        layouts = [(True, True), (True, False), (False, True), (False, False)]
    for attempt in range(2):
        for order in orders:
            compact, unsure = proposed_texts(struct, order)
            spaced_text: pa.Array | None = None
            for last, spaced in layouts:
                todo = present & ~found
                if not todo.any():
                    break
                if spaced and spaced_text is None:
                    spaced_text = proposed_texts(struct, order, spaced=True)[0]
                proposal = spaced_text if spaced else compact
                hit = finder.hits(proposal, todo, spaced=spaced, last=last)
                if hit.any():
                    texts = pc.if_else(pa.array(hit), compact, texts)
                    found |= hit
        if attempt or (found | ~present).all():
            break
        at = finder.after_key()
        missing = np.flatnonzero(present & ~found & (at >= 0))
        if not len(missing):
            break
        orders = [_source_order(struct, finder.data, at, starts, int(missing[0]))]
    return texts, present & (unsure | ~found)
