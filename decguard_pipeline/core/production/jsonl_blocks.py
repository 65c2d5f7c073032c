"""Reading a JSONL records file in blocks of whole lines, through ``pyarrow.json`` when it can.

:func:`fast_table` parses one block with Arrow and returns a table only when the table is
known to hold exactly the block's records: one row per non-blank line (Arrow also splits on a
lone carriage return and skips blank lines), and no explicit ``null`` where DecGuard
distinguishes it from an absent field (``id``, ``confidence``, ``metadata``). Otherwise the
block is read line by line in Python (:func:`python_items`), with DecGuard's messages for bad
UTF-8 and bad JSON.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.json as pj

from decguard_pipeline.core.contract.spec import DecisionSpec
from decguard_pipeline.core.json_limits import ITEM_DEPTH, nesting_problem
from decguard_pipeline.core.production.records import Item
from decguard_pipeline.core.validation import SURROGATE_ESCAPE, lone_surrogate, unique_pairs

BLOCK_BYTES = 16 << 20
_WHITESPACE = np.zeros(256, dtype=bool)
_WHITESPACE[list(b" \t\n\r\x0b\x0c")] = True
# keys whose explicit null differs from their absence in DecGuard
_NULL_SENSITIVE = ("id", "confidence", "metadata")
# a key spelt with \\u escapes (\\u0061-\\u007a are the lowercase letters) hides from a
# byte search; any such escape sends the block to the Python path
_LETTER_ESCAPES = (b"\\u006", b"\\u007")


def block_ranges(data: Any, size: int | None = None) -> Iterator[tuple[int, int]]:
    """(start, end) of successive stretches of ``data`` (bytes or an mmap), each ending at a
    newline except the last; no stretch is empty."""
    size = size or BLOCK_BYTES
    start, total = 0, len(data)
    while start < total:
        end = min(start + size, total)
        if end < total:
            cut = data.rfind(b"\n", start, end)
            end = cut + 1 if cut >= 0 else _next_newline(data, end, total)
        yield start, end
        start = end


def _next_newline(data: Any, at: int, total: int) -> int:
    found = data.find(b"\n", at, total)
    return total if found < 0 else found + 1


def line_starts(block: Any) -> np.ndarray:
    """Offsets where the block's lines start (a final newline opens no new line)."""
    ends = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == 10)
    starts = np.concatenate(([0], ends + 1))
    return starts[starts < len(block)] if len(block) else starts[:0]


def nonblank_lines(block: Any, starts: np.ndarray) -> np.ndarray:
    """Indices (into ``starts``) of the lines DecGuard reads: not empty after strip()."""
    data = np.frombuffer(block, dtype=np.uint8)
    if not len(starts):
        return starts
    # a line whose first byte is not whitespace is certainly not blank; check the others
    candidates = np.flatnonzero(_WHITESPACE[data[starts]])
    keep = np.ones(len(starts), dtype=bool)
    bounds = np.append(starts, len(block))
    for i in candidates.tolist():
        keep[i] = bool(bytes(block[bounds[i] : bounds[i + 1]]).strip())
    return np.flatnonzero(keep)


# Arrow's JSON parser recurses once per level of nesting, on a worker thread's stack: a line
# nested 20,000 deep crashed the process. A line that deep is long (two bytes a level), so
# only long lines are looked at (exactly, by ``nesting_problem``): a few per block at most.
_LONG_LINE = 4_000


def _deep_line(block: Any, starts: np.ndarray) -> bool:
    """Whether a line of the block nests deeper than a record may (``ITEM_DEPTH``)."""
    if len(block) <= _LONG_LINE:
        return False  # no line nests deep enough to matter to Arrow (the schema says more)
    lengths = np.diff(np.append(starts, len(block)))
    for i in np.flatnonzero(lengths > _LONG_LINE).tolist():
        start = int(starts[i])
        if nesting_problem(bytes(block[start : start + int(lengths[i])])) is not None:
            return True
    return False


def _too_deep(schema: pa.Schema) -> bool:
    """Whether a record of this schema may hold a value inside more than ``ITEM_DEPTH``
    arrays and objects (an upper bound: an empty list counts one level more than in JSON)."""
    stack = [(field.type, 1) for field in schema]  # a field's value: inside the record
    while stack:
        kind, depth = stack.pop()
        if depth > ITEM_DEPTH:
            return True
        if pa.types.is_struct(kind):
            stack += [(kind.field(i).type, depth + 1) for i in range(kind.num_fields)]
        elif pa.types.is_map(kind):
            stack += [(kind.key_type, depth + 1), (kind.item_type, depth + 1)]
        elif (
            pa.types.is_list(kind)
            or pa.types.is_large_list(kind)
            or pa.types.is_fixed_size_list(kind)
        ):
            stack.append((kind.value_type, depth + 1))
    return False


def unwritable_text(record: object) -> str | None:
    """The problem of a record holding a lone surrogate (a ``\\uD800``-``\\uDFFF`` escape not
    part of a pair) in a field the report writes, which no UTF-8 writer can write; None
    otherwise. The id is left to the schema (DecGuard's message) and the metadata, which
    the report does not write, is read as DecGuard reads it."""
    if not isinstance(record, dict):
        return None
    where = lone_surrogate({k: v for k, v in record.items() if k not in ("id", "metadata")})
    if where is None:
        return None
    return (
        f"invalid production record:\n  {where}: text with a lone surrogate (a \\uD800-\\uDFFF "
        "escape not part of a pair), which UTF-8 cannot encode"
    )


def python_items(
    block: bytes, first_line: int, first_position: int
) -> tuple[list[Item], list[int]]:
    """The block's records parsed as DecGuard parses them, with their line numbers."""
    items: list[Item] = []
    lines: list[int] = []
    position = first_position
    pieces = block.split(b"\n")
    if block.endswith(b"\n"):
        pieces.pop()
        last_newline = True
    else:
        last_newline = False
    for offset, piece in enumerate(pieces):
        if not piece.strip():
            continue
        raw = piece + b"\n" if (offset < len(pieces) - 1 or last_newline) else piece
        lines.append(first_line + offset)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            items.append(Item(None, position, "production dataset is not valid UTF-8"))
        else:
            deep = nesting_problem(raw.strip())  # before parsing: the decoder recurses
            if deep is not None:
                items.append(Item(None, position, f"invalid JSON: {deep}"))
                position += 1
                continue
            try:
                value = json.loads(text, object_pairs_hook=unique_pairs)
            except ValueError as exc:
                items.append(Item(None, position, f"invalid JSON: {exc}"))
            else:
                unwritable = unwritable_text(value) if SURROGATE_ESCAPE.search(text) else None
                items.append(Item(value, position, unwritable))
        position += 1
    return items, lines


def record_schemas(spec: DecisionSpec, segment_keys: tuple[str, ...]) -> list[pa.Schema]:
    """Explicit types for the fields DecGuard defines, tightest first. The second leaves
    ``input``, ``selected``, ``outcome`` and the metadata to inference (objects as inputs,
    numbers as score labels or segment values)."""
    text, number, flag = pa.string(), pa.float64(), pa.bool_()
    probabilities = pa.struct([(label, number) for label in spec.labels])
    # 'confidence' is left to inference: its column then exists only if some record writes
    # the key, which tells "absent everywhere" from "null somewhere" without a byte search
    common = [
        ("id", text), ("timestamp", text), ("decision", text), ("probabilities", probabilities),
        ("backend", text), ("model", text), ("model_version", text),
        ("outcome_correct", flag), ("latency_ms", number), ("cost", number), ("action", text),
        ("fallback", flag),
    ]  # fmt: skip
    metadata = pa.struct([(key, text) for key in segment_keys])
    tight = [*common, ("input", text), ("selected", text), ("outcome", text)]
    return [pa.schema([*tight, ("metadata", metadata)]), pa.schema(common)]


def read_objects(texts: pa.Array, keys: tuple[str, ...]) -> pa.StructArray | None:
    """JSON objects given one per string (compact, no newline) as a struct of ``keys`` the
    way a records block reads them (text first, else Arrow's inference); None when Arrow
    cannot read them, or reads other than one row per text."""
    block = pa.py_buffer(("\n".join(texts.to_pylist()) + "\n").encode())
    tight = pa.schema([(key, pa.string()) for key in keys])
    for options in (
        pj.ParseOptions(explicit_schema=tight, unexpected_field_behavior="ignore"),
        pj.ParseOptions(),
    ):
        try:
            table = pj.read_json(pa.BufferReader(block), parse_options=options)
        except (pa.ArrowException, ValueError):
            continue
        if table.num_rows != len(texts):
            return None
        columns = [
            table.column(key).combine_chunks() if key in table.column_names
            else pa.nulls(table.num_rows) for key in keys
        ]  # fmt: skip
        return pa.StructArray.from_arrays(columns, names=list(keys))
    return None


class ArrowReader:
    """Parses blocks with pyarrow.json for one contract."""

    def __init__(self, spec: DecisionSpec, segment_keys: tuple[str, ...]) -> None:
        self.options = [
            pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="infer")
            for schema in record_schemas(spec, segment_keys)
        ]
        # one thread per block: blocks are parsed on a worker thread beside the checks
        self.read_options = pj.ReadOptions(use_threads=False, block_size=1 << 22)

    def _parse(self, block: Any) -> pa.Table | None:
        source = pa.py_buffer(block)
        for options in self.options:
            try:
                return pj.read_json(
                    pa.BufferReader(source), read_options=self.read_options, parse_options=options
                )
            except (pa.ArrowException, UnicodeDecodeError, ValueError):
                continue
        return None

    def fast_table(
        self, block: Any, source: Any = None
    ) -> tuple[pa.Table | None, int, np.ndarray | None]:
        """The block (bytes or a memoryview) as an Arrow table whose rows are exactly its
        records (or None), the number of lines it spans and where each record's line starts
        (with the table). ``source`` is an object with ``find(sub, start, end)`` over the
        block's bytes (an mmap and the block's offset) to search without copying."""
        finder = _Finder(block, source)
        table, starts = self._table(block, finder)
        n_lines = len(line_starts(block) if starts is None else starts)
        if table is None or starts is None or _too_deep(table.schema):
            return None, n_lines, None  # a record maybe nested too deeply: line by line
        return table, n_lines, starts[nonblank_lines(block, starts)]

    def _table(self, block: Any, finder: _Finder) -> tuple[pa.Table | None, np.ndarray | None]:
        # single-byte searches run at memchr speed
        if finder.find(b"\r") >= 0:
            data = np.frombuffer(block, dtype=np.uint8)
            if np.count_nonzero(data == 0x0D) != _crlf_count(data):
                return None, None  # Arrow would split a line at a lone CR; DecGuard does not
        if finder.find(b"\xef") >= 0 and finder.find(b"\xef\xbb\xbf") >= 0:
            return None, None  # Arrow skips a byte order mark; Python's json refuses it
        starts = line_starts(block)
        if _deep_line(block, starts):
            return None, starts  # Arrow's parser recurses per level: deep enough, it crashes
        table = self._parse(block)
        if table is None:
            return None, None
        records = nonblank_lines(block, starts)
        if table.num_rows != len(records):
            return None, starts  # e.g. two objects on one line
        escaped = finder.find(b"\\") >= 0
        if not self._nulls_are_absences(finder, table, starts[records], escaped=escaped):
            return None, starts
        return table, starts

    @staticmethod
    def _nulls_are_absences(
        finder: _Finder, table: pa.Table, starts: np.ndarray, *, escaped: bool
    ) -> bool:
        """True when no record writes ``null`` for a field whose absence means a default."""
        for key in _NULL_SENSITIVE:
            if key not in table.column_names:
                continue  # an inferred column is missing only when no record writes the key
            missing = ~table.column(key).is_valid().to_numpy(zero_copy_only=False)
            if not missing.any():
                continue
            # an escaped spelling of the key hides from the byte search below
            if escaped and any(finder.find(hint) >= 0 for hint in _LETTER_ESCAPES):
                return False
            literal = f'"{key}"'.encode()
            hits = []
            at = finder.find(literal)
            while at >= 0:
                hits.append(at)
                at = finder.find(literal, at + 1)
            if not hits:
                continue  # the key is never written: absent everywhere
            # rows without a value whose line still mentions the key: maybe "key": null
            rows = np.searchsorted(starts, np.array(hits), side="right") - 1
            if missing[rows[rows >= 0]].any():
                return False
        return True


class _Finder:
    """Substring search in a block, in place when the block lies in a searchable source."""

    def __init__(self, block: Any, source: Any) -> None:
        if source is None:
            self.data, self.offset, self.end = bytes(block), 0, len(block)
        else:
            self.data, self.offset = source
            self.end = self.offset + len(block)

    def find(self, sub: bytes, start: int = 0) -> int:
        at = self.data.find(sub, self.offset + start, self.end)
        return at - self.offset if at >= 0 else -1


def _crlf_count(data: np.ndarray) -> int:
    cr = np.flatnonzero(data[:-1] == 0x0D)
    return int(np.count_nonzero(data[cr + 1] == 0x0A))


def read_lines(path_stream: object) -> Iterator[tuple[int, bytes]]:
    """(line number, raw line) of every non-blank line, for a second pass over the file."""
    for lineno, raw in enumerate(path_stream, start=1):  # type: ignore[call-overload]
        if raw.strip():
            yield lineno, raw


def json_value(raw: bytes) -> object:
    """A line already known to be valid JSON, parsed quickly (orjson) or, for what orjson
    refuses (NaN, huge integers, lone surrogates), with the standard library."""
    import orjson

    from decguard_pipeline.core import json_exact

    try:
        return json_exact.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw.decode("utf-8"))
