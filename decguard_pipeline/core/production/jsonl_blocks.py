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

import numpy as np
import pyarrow as pa
import pyarrow.json as pj

from decguard_pipeline.core.contract.decision import DecisionSpec
from decguard_pipeline.core.production.records import Item
from decguard_pipeline.core.validation import unique_pairs

BLOCK_BYTES = 16 << 20
_WHITESPACE = np.zeros(256, dtype=bool)
_WHITESPACE[list(b" \t\n\r\x0b\x0c")] = True
# keys whose explicit null differs from their absence in DecGuard
_NULL_SENSITIVE = ("id", "confidence", "metadata")
# a key spelt with \\u escapes (\\u0061-\\u007a are the lowercase letters) hides from a
# byte search; any such escape sends the block to the Python path
_LETTER_ESCAPES = (b"\\u006", b"\\u007")


def blocks(path_stream: object, size: int | None = None) -> Iterator[bytes]:
    """Successive chunks of a binary stream, each ending at a newline (except the last)."""
    read = path_stream.read  # type: ignore[attr-defined]
    size = size or BLOCK_BYTES
    carry = b""
    while True:
        data = read(size)
        if not data:
            if carry:
                yield carry
            return
        data = carry + data
        cut = data.rfind(b"\n")
        if cut < 0:
            carry = data
            continue
        carry = data[cut + 1 :]
        yield data[: cut + 1]


def line_starts(block: bytes) -> np.ndarray:
    """Offsets where the block's lines start (a final newline opens no new line)."""
    ends = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == 10)
    starts = np.concatenate(([0], ends + 1))
    return starts[starts < len(block)] if len(block) else starts[:0]


def nonblank_lines(block: bytes, starts: np.ndarray) -> np.ndarray:
    """Indices (into ``starts``) of the lines DecGuard reads: not empty after strip()."""
    data = np.frombuffer(block, dtype=np.uint8)
    if not len(starts):
        return starts
    # a line whose first byte is not whitespace is certainly not blank; check the others
    candidates = np.flatnonzero(_WHITESPACE[data[starts]])
    keep = np.ones(len(starts), dtype=bool)
    bounds = np.append(starts, len(block))
    for i in candidates.tolist():
        keep[i] = bool(block[bounds[i] : bounds[i + 1]].strip())
    return np.flatnonzero(keep)


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
            try:
                items.append(Item(json.loads(text, object_pairs_hook=unique_pairs), position))
            except ValueError as exc:
                items.append(Item(None, position, f"invalid JSON: {exc}"))
        position += 1
    return items, lines


def _schemas(spec: DecisionSpec, segment_keys: tuple[str, ...]) -> list[pa.Schema]:
    """Explicit types for the fields DecGuard defines, tightest first. The second leaves
    ``input``, ``selected``, ``outcome`` and the metadata to inference (objects as inputs,
    numbers as score labels or segment values)."""
    text, number, flag = pa.string(), pa.float64(), pa.bool_()
    probabilities = pa.struct([(label, number) for label in spec.labels])
    common = [
        ("id", text), ("timestamp", text), ("decision", text), ("probabilities", probabilities),
        ("confidence", number), ("backend", text), ("model", text), ("model_version", text),
        ("outcome_correct", flag), ("latency_ms", number), ("cost", number), ("action", text),
        ("fallback", flag),
    ]  # fmt: skip
    metadata = pa.struct([(key, text) for key in segment_keys])
    tight = [*common, ("input", text), ("selected", text), ("outcome", text)]
    return [pa.schema([*tight, ("metadata", metadata)]), pa.schema(common)]


class ArrowReader:
    """Parses blocks with pyarrow.json for one contract."""

    def __init__(self, spec: DecisionSpec, segment_keys: tuple[str, ...]) -> None:
        self.options = [
            pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="infer")
            for schema in _schemas(spec, segment_keys)
        ]
        self.read_options = pj.ReadOptions(use_threads=True, block_size=1 << 20)

    def _parse(self, block: bytes) -> pa.Table | None:
        for options in self.options:
            try:
                return pj.read_json(
                    pa.BufferReader(block), read_options=self.read_options, parse_options=options
                )
            except (pa.ArrowException, UnicodeDecodeError, ValueError):
                continue
        return None

    def fast_table(self, block: bytes) -> pa.Table | None:
        """The block as an Arrow table whose rows are exactly its records, or None."""
        if b"\r" in block and block.count(b"\r") != block.count(b"\r\n"):
            return None  # Arrow would split a line at a lone CR; DecGuard does not
        if b"\xef\xbb\xbf" in block:
            return None  # Arrow skips a byte order mark; Python's json refuses it
        table = self._parse(block)
        if table is None:
            return None
        starts = line_starts(block)
        records = nonblank_lines(block, starts)
        if table.num_rows != len(records):
            return None  # e.g. two objects on one line
        if not self._nulls_are_absences(block, table, starts[records]):
            return None
        return table

    @staticmethod
    def _nulls_are_absences(block: bytes, table: pa.Table, starts: np.ndarray) -> bool:
        """True when no record writes ``null`` for a field whose absence means a default."""
        escaped = any(hint in block for hint in _LETTER_ESCAPES)
        for key in _NULL_SENSITIVE:
            if key in table.column_names:
                missing = ~table.column(key).is_valid().to_numpy(zero_copy_only=False)
            else:
                missing = np.ones(table.num_rows, dtype=bool)
            if not missing.any():
                continue
            if escaped:
                return False
            literal = f'"{key}"'.encode()
            if literal not in block:
                continue
            # rows without a value whose line still mentions the key: maybe "key": null
            hits = []
            at = block.find(literal)
            while at >= 0:
                hits.append(at)
                at = block.find(literal, at + 1)
            rows = np.searchsorted(starts, np.array(hits), side="right") - 1
            if missing[rows[rows >= 0]].any():
                return False
        return True


def read_lines(path_stream: object) -> Iterator[tuple[int, bytes]]:
    """(line number, raw line) of every non-blank line, for a second pass over the file."""
    for lineno, raw in enumerate(path_stream, start=1):  # type: ignore[call-overload]
        if raw.strip():
            yield lineno, raw


def json_value(raw: bytes) -> object:
    """A line already known to be valid JSON, parsed quickly (orjson) or, for what orjson
    refuses (NaN, huge integers, lone surrogates), with the standard library."""
    import orjson

    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw.decode("utf-8"))
