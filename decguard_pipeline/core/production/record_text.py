"""Normalised production records as JSON text, column-wise.

A check report holds every record (``records``), and the pipeline stores each one as compact
JSON (``production_records.record_json``): ten million records are gigabytes of text. Here the
text of a whole batch is assembled with Arrow string kernels from typed columns, byte for byte
what ``orjson`` writes for the record as a Python dict (the reports' encoder): compact, or
indented as a record sits in a report.

Where the kernels cannot promise orjson's bytes, the value is encoded by orjson itself, one
value (or one record) at a time: floats outside ``[1e-5, 1e10)`` (Arrow and orjson pick
different notations there), strings with control characters, objects that are not flat or
hold non-finite numbers or integers beyond 64 bits.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from decguard_pipeline.core.production.text_join import concatenated, concatenated_chunks
from decguard_pipeline.core.report.jsonio import encode

# the normalised record's fields in DecGuard's order (and their JSON kinds)
TEXT, FLOAT, FLAG, RAW = "text", "float", "flag", "raw"
FIELDS: tuple[tuple[str, str], ...] = (
    ("id", TEXT), ("timestamp", TEXT), ("decision", TEXT), ("input", RAW),
    ("probabilities", RAW), ("selected", TEXT), ("confidence", FLOAT), ("backend", TEXT),
    ("model", TEXT), ("model_version", TEXT), ("outcome", TEXT), ("outcome_correct", FLAG),
    ("latency_ms", FLOAT), ("cost", FLOAT), ("action", TEXT), ("fallback", FLAG),
    ("metadata", RAW),
)  # fmt: skip
RECORD_INDENT = 4  # a report's record: an element of the top-level "records" list
_SAFE_LOW, _SAFE_HIGH = 1e-5, 1e10
_CONTROL = r"[\x00-\x1f]"
# a flat object whose keys and strings hold nothing structural: indented by replacement
_PLAIN_STRING = r'"[^"\\,:{}\[\]\x00-\x1f]*"'
_PLAIN_VALUE = rf"(?:{_PLAIN_STRING}|true|false|null|-?[0-9][0-9.eE+-]*)"
_FLAT_OBJECT = rf"^\{{(?:{_PLAIN_STRING}:{_PLAIN_VALUE}(?:,{_PLAIN_STRING}:{_PLAIN_VALUE})*)?\}}$"
# what orjson would not write as it is stored: non-finite tokens, integers beyond 64 bits
_NOT_ORJSON = r"NaN|Infinity|[0-9]{19,}"


def string_bytes(array: pa.Array) -> memoryview:
    """The concatenated bytes of a string array's values, without a copy."""
    offsets = np.frombuffer(array.buffers()[1], dtype=np.int32)
    start, end = offsets[array.offset], offsets[array.offset + len(array)]
    return memoryview(array.buffers()[2])[start:end]


def _null_text(array: pa.Array, text: pa.Array) -> pa.Array:
    return pc.if_else(array.is_valid(), text, pa.scalar("null"))


def _patched(base: pa.Array, source: pa.Array, mask: np.ndarray, encode: Any) -> pa.Array:
    """``base`` with the rows where ``mask`` holds replaced by ``encode`` of ``source``'s
    value (only those rows become Python values)."""
    mask_array = pa.array(mask)
    exact = [encode(v) for v in source.filter(mask_array).to_pylist()]
    return pc.replace_with_mask(base, mask_array, pa.array(exact, pa.string()))


def plain_strings(array: pa.Array) -> bool:
    """No string of ``array`` needs an escape (no quote, backslash or control character)."""
    data = array.buffers()[2]
    if data is None or not len(array):
        return True
    offsets = np.frombuffer(array.buffers()[1], dtype=np.int32)
    chars = np.frombuffer(data, dtype=np.uint8)[
        offsets[array.offset] : offsets[array.offset + len(array)]
    ]
    return not ((chars < 0x20) | (chars == 0x22) | (chars == 0x5C)).any()


def quoted(array: pa.Array) -> pa.Array:
    """Each string as a JSON string (null stays null), as orjson writes it: ``"`` and ``\\``
    escaped, everything else raw UTF-8; strings with control characters via orjson."""
    if plain_strings(array):
        return pc.binary_join_element_wise('"', array, '"', "")
    escaped = pc.replace_substring(pc.replace_substring(array, "\\", "\\\\"), '"', '\\"')
    quoted = pc.binary_join_element_wise('"', escaped, '"', "")
    control = pc.fill_null(pc.match_substring_regex(array, _CONTROL), False)
    if pc.any(control).as_py():
        mask = control.to_numpy(zero_copy_only=False)
        quoted = _patched(quoted, array, mask, lambda v: orjson.dumps(v).decode())
    return quoted


def json_strings(array: pa.Array) -> pa.Array:
    """Each string as a JSON string, a null as ``null``."""
    return _null_text(array, quoted(_string(array)))


def _string(array: pa.Array) -> pa.Array:
    array = array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array
    return array if array.type == pa.string() else pc.cast(array, pa.string())


def float_texts(array: pa.Array) -> pa.Array:
    """Each float as orjson writes it (null stays null): Arrow's shortest round-trip text,
    with ``.0`` on integral values, inside ``[1e-5, 1e10)`` where the two agree; orjson's own
    text elsewhere. A column of few distinct values (probabilities in cents, whole
    milliseconds) is written once per value."""
    array = array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array
    array = pc.cast(array, pa.float64())
    if len(array) >= _DISTINCT_SAMPLE * 4 and _few_distinct(array):
        encoded = pc.dictionary_encode(array)
        return _float_texts(encoded.dictionary).take(encoded.indices)
    return _float_texts(array)


_DISTINCT_SAMPLE = 2048


def _few_distinct(array: pa.Array) -> bool:
    """Whether a sample of the column repeats its values a lot (then encoding each distinct
    value once beats encoding every row)."""
    sample = array.slice(0, _DISTINCT_SAMPLE).to_numpy(zero_copy_only=False)
    return len(np.unique(sample)) * 8 <= len(sample)


def _float_texts(array: pa.Array) -> pa.Array:
    values = np.asarray(pc.fill_null(array, 0.5).to_numpy(zero_copy_only=False))
    text = pc.cast(array, pa.string())
    size = np.abs(values)
    safe = (size == 0.0) | ((size >= _SAFE_LOW) & (size < _SAFE_HIGH))
    integral = safe & (values == np.floor(values))
    if integral.any():  # only those rows rewritten
        mask = pa.array(integral)
        text = pc.replace_with_mask(text, mask, pc.binary_join_element_wise(
            text.filter(mask), ".0", ""))  # fmt: skip
    if not safe.all():
        odd = ~safe
        exact = [orjson.dumps(v).decode() for v in values[odd].tolist()]
        text = pc.replace_with_mask(text, pa.array(odd), pa.array(exact, pa.string()))
    if array.null_count:
        text = pc.if_else(array.is_valid(), text, pa.scalar(None, pa.string()))
    return text


def json_floats(array: pa.Array) -> pa.Array:
    """Each float as orjson writes it, a null as ``null``."""
    return pc.fill_null(float_texts(array), "null")


def flag_texts(array: pa.Array) -> pa.Array:
    array = array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array
    return pc.if_else(array, pa.scalar("true"), pa.scalar("false"))


def json_flags(array: pa.Array) -> pa.Array:
    return pc.fill_null(flag_texts(array), "null")


def _object_punctuation(indent: int | None) -> tuple[str, str, str]:
    """What opens an object, separates its members and closes it, for an object whose
    opening brace sits at ``indent`` spaces (None: compact)."""
    if indent is None:
        return "{", ",", "}"
    inner = "\n" + " " * (indent + 2)
    return "{" + inner, "," + inner, "\n" + " " * indent + "}"


def _by_distinct(texts: pa.Array, work: Any) -> Any:
    """``work`` done on the distinct values of a (usually low-cardinality) column only."""
    encoded = pc.dictionary_encode(texts)
    result = work(encoded.dictionary)
    if isinstance(result, np.ndarray):
        codes = pc.fill_null(encoded.indices, 0).to_numpy(zero_copy_only=False)
        return result[codes] if len(result) else np.ones(len(texts), dtype=bool)
    return result.take(encoded.indices)


def exact_objects(texts: pa.Array) -> np.ndarray:
    """Rows whose stored JSON (compact, as ``to_json`` wrote it) is also orjson's text."""
    texts = _string(texts)

    def exact(values: pa.Array) -> np.ndarray:
        found = pc.fill_null(pc.match_substring_regex(values, _NOT_ORJSON), False)
        return ~np.asarray(found.to_numpy(zero_copy_only=False), dtype=bool)

    return _by_distinct(texts, exact)


def indented_objects(texts: pa.Array, indent: int) -> pa.Array:
    """Compact JSON values (objects or strings, orjson's text) laid out as orjson's
    ``OPT_INDENT_2`` lays them out when the value's first line sits at ``indent`` spaces."""
    texts = _string(texts)
    if not pc.any(pc.fill_null(pc.starts_with(texts, "{"), False)).as_py():
        return texts
    return _by_distinct(texts, lambda values: _indented(values, indent))


def _indented(texts: pa.Array, indent: int) -> pa.Array:
    flat = pc.fill_null(pc.match_substring_regex(texts, _FLAT_OBJECT), True)
    head, sep, tail = _object_punctuation(indent)
    spread = pc.replace_substring(texts, "{", head)
    spread = pc.replace_substring(spread, ',"', sep + '"')
    spread = pc.replace_substring(spread, '":', '": ')
    spread = pc.replace_substring(spread, "}", tail)
    spread = pc.if_else(pc.equal(texts, "{}"), texts, spread)
    objects = pc.fill_null(pc.starts_with(texts, "{"), False)
    done = pc.if_else(objects, spread, texts)
    rest = pc.and_(objects, pc.invert(flat))
    if pc.any(rest).as_py():
        mask = rest.to_numpy(zero_copy_only=False)
        done = _patched(done, texts, mask, lambda v: indent_value(json.loads(v), indent))
    return done


def indent_value(value: Any, indent: int) -> str:
    """The indented text of a value (``jsonio.encode``: orjson's bytes, an integer beyond 64
    bits exact) whose first line sits at ``indent`` spaces."""
    return encode(value).decode().replace("\n", "\n" + " " * indent)


class Joined:
    """Literal text and columns to concatenate row-wise (adjacent literals merged):
    :func:`text_join.concatenated`."""

    def __init__(self) -> None:
        self.args: list[Any] = []
        self.text = ""

    def literal(self, text: str) -> None:
        self.text += text

    def column(self, values: pa.Array) -> None:
        if self.text:
            self.args.append(self.text)
            self.text = ""
        self.args.append(values)

    def joined(self, null_replacement: str | None = None) -> pa.Array:
        if self.text:
            self.args.append(self.text)
        return concatenated(self.args, null_replacement)

    def joined_chunks(self, null_replacement: str | None = None) -> pa.ChunkedArray:
        """:meth:`joined` a few MB at a time (:func:`text_join.concatenated_chunks`)."""
        if self.text:
            self.args.append(self.text)
        return concatenated_chunks(self.args, null_replacement)


def record_texts(
    table: pa.Table, labels: Sequence[str], probs: np.ndarray, *, indented: bool, prefix: str = ""
) -> pa.ChunkedArray:
    """The JSON text of each normalised record of ``table`` (columns named like the record
    fields; ``input`` and ``metadata`` as the compact JSON of their values, the input absent
    as null; probabilities given as ``probs`` in ``labels`` order), in chunks of a few MB.

    ``indented``: as the record sits in a report, every field written; otherwise compact with
    the absent fields left out (``production_records.record_json``). One join of literal text
    and columns assembles the records; only a field that may be absent from a compact record
    is joined to its key first. ``prefix``: literal text before each record."""
    inner = RECORD_INDENT + 2 if indented else None
    head, sep, tail = _object_punctuation(RECORD_INDENT if indented else None)
    colon = ": " if indented else ":"
    out = Joined()
    out.literal(prefix)
    for number, (name, kind) in enumerate(FIELDS):
        key = (head if number == 0 else sep) + f'"{name}"{colon}'
        if name == "probabilities":
            out.literal(key)
            _probabilities(out, probs, labels, inner, colon)
            continue
        column = table.column(name)
        column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        nulls = column.null_count > 0
        if column.null_count == len(column):  # absent from every record
            if indented:
                out.literal(key + "null")
            continue
        if kind == TEXT:
            column = _string(column)
            if not nulls and plain_strings(column):  # the quotes join the literal text
                out.literal(key + '"')
                out.column(column)
                out.literal('"')
                continue
            value = quoted(column)
        elif kind == FLOAT:
            value = float_texts(column)
        elif kind == FLAG:
            value = flag_texts(column)
        else:
            value = indented_objects(column, inner) if indented else _string(column)
        if nulls and not indented:  # absent from a compact record: key and value together
            out.column(pc.fill_null(pc.binary_join_element_wise(key, value, ""), ""))
        else:
            out.literal(key)
            out.column(value)
    out.literal(tail)
    if indented:
        return out.joined_chunks(null_replacement="null")
    return out.joined_chunks()


def _probabilities(
    out: Joined, probs: np.ndarray, labels: Sequence[str], indent: int | None, colon: str
) -> None:
    head, sep, tail = _object_punctuation(indent)
    for j, label in enumerate(labels):
        out.literal((head if j == 0 else sep) + orjson.dumps(label).decode() + colon)
        out.column(float_texts(pa.array(probs[:, j])))
    out.literal(tail)
