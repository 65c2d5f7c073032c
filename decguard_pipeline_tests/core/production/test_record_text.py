"""Records as JSON text built by Arrow kernels: byte for byte what orjson (the reports'
encoder) writes for the same values, compact and as a record sits in a report; and object
texts proposed from Arrow's structs accepted only where the source line holds exactly them."""

from __future__ import annotations

import json
import math
import random
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.json as pj
import pytest

from decguard_pipeline.core.production.object_text import object_texts
from decguard_pipeline.core.production.record_text import (
    FIELDS,
    RECORD_INDENT,
    json_floats,
    json_strings,
    record_texts,
)

LABELS = ["refund", "reject", "review"]


def _doubles(rng: np.random.Generator) -> np.ndarray:
    """Doubles of every magnitude, integral ones, zeros, subnormals, both signs."""
    parts = []
    for exponent in range(-320, 300, 3):
        mantissa = rng.random(40) * 9 + 1
        scaled = mantissa * np.float64(10.0) ** exponent
        parts += [scaled, np.round(scaled), np.round(scaled, 2)]
    parts.append(np.array([0.0, -0.0, 1.0, 100.0, 1e15, 1e16, 1e-5, 1e-4, 5e-324, 0.1 + 0.2]))
    values = np.concatenate(parts)
    values = values[np.isfinite(values)]
    return np.concatenate([values, -values])


def test_floats_are_orjsons_text_at_every_magnitude():
    values = _doubles(np.random.default_rng(3))
    texts = json_floats(pa.array(values)).to_pylist()
    assert texts == [orjson.dumps(float(v)).decode() for v in values]
    assert json_floats(pa.array([None, 0.5])).to_pylist() == ["null", "0.5"]


def test_floats_of_few_distinct_values_are_orjsons_text():
    """A long column repeating a few values (some integral, tiny, huge, null) is written
    once per distinct value: the same text per row."""
    rng = np.random.default_rng(5)
    few = np.array([0.25, 1.0, 0.0, -3.0, 1e-7, 2.5e12, 0.1 + 0.2, 7.0])
    values = few[rng.integers(0, len(few), 20_000)]
    mask = rng.random(len(values)) < 0.1
    texts = json_floats(pa.array(values, mask=mask)).to_pylist()
    expected = [
        "null" if m else orjson.dumps(float(v)).decode() for v, m in zip(values, mask, strict=True)
    ]
    assert texts == expected


def test_strings_are_orjsons_text():
    strings = ['plain', 'a "quote"', "back\\slash", "new\nline", "tab\t", "\x01\x1f", "é😀",
               "", "\u2028", "\x7f", "\\u00e9"]  # fmt: skip
    texts = json_strings(pa.array([*strings, None])).to_pylist()
    assert texts == [orjson.dumps(s).decode() for s in strings] + ["null"]


def _value(rng: random.Random) -> Any:
    return rng.choice(["x", 'q"', "é", 3, -7, 2.5, True, False, None, 10**20, [1, "a"],
                       {"deep": {"er": 1}}, float("nan")])  # fmt: skip


def _record(rng: random.Random, i: int) -> dict[str, Any]:
    """A normalised record (every field, unknowns None) of varied shape."""
    probs = [rng.choice([0.5, 0.25, 1e-7, 0.1 + 0.2, 1 / 3]) for _ in LABELS]
    metadata = {k: _value(rng) for k in rng.sample(["locale", "tier", "b", "c"], rng.randint(0, 4))}
    text = rng.choice(["a message", 'say "hi"\n', "é", None, {"text": "hi", "n": 3},
                       {"nested": {"a": [1, 2]}}, {}])  # fmt: skip
    return {
        "id": f"r{i}",
        "timestamp": rng.choice([None, "2026-11-02T09:15:00Z"]),
        "decision": "route",
        "input": text,
        "probabilities": dict(zip(LABELS, probs, strict=True)),
        "selected": rng.choice(LABELS),
        "confidence": rng.choice([0.5, 1.0, 0.123456789]),
        "backend": rng.choice([None, "default"]),
        "model": rng.choice([None, "m"]),
        "model_version": rng.choice([None, "v1", "v\\2"]),
        "outcome": rng.choice([None, *LABELS]),
        "outcome_correct": rng.choice([None, True, False]),
        "latency_ms": rng.choice([None, 12.0, 40.5, 1e12]),
        "cost": rng.choice([None, 0.001, 2.0]),
        "action": rng.choice([None, "accept", "fallback"]),
        "fallback": rng.choice([None, True, False]),
        "metadata": metadata,
    }


def _compact(value: Any) -> str:
    """How the pipeline stores an object's JSON (``to_json``: orjson, the standard library
    for what orjson refuses or would turn to null)."""
    try:
        text = orjson.dumps(value).decode()
    except orjson.JSONEncodeError:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if "null" in text and any(isinstance(v, float) and math.isnan(v) for v in _leaves(value)):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [x for v in value.values() for x in _leaves(v)]
    if isinstance(value, list):
        return [x for v in value for x in _leaves(v)]
    return [value]


def _table(records: list[dict[str, Any]]) -> tuple[pa.Table, np.ndarray]:
    columns: dict[str, list[Any]] = {name: [] for name, _ in FIELDS if name != "probabilities"}
    for record in records:
        for name in columns:
            value = record[name]
            if name in ("input", "metadata"):
                value = None if value is None else _compact(value)
            columns[name].append(value)
    probs = np.array([[r["probabilities"][label] for label in LABELS] for r in records])
    return pa.table(columns), probs


def _orjson_safe(record: dict[str, Any]) -> bool:
    """orjson writes the record at all (no integer beyond 64 bits)."""
    try:
        orjson.dumps(record)
    except orjson.JSONEncodeError:
        return False
    return True


def test_records_are_orjsons_text_compact_and_indented():
    rng = random.Random(5)
    records = [r for r in (_record(rng, i) for i in range(600)) if _orjson_safe(r)]
    plain = [r for r in records if not any(isinstance(v, float) and math.isnan(v)
             for v in _leaves(r["metadata"]))]  # fmt: skip
    table, probs = _table(plain)
    compact = record_texts(table, LABELS, probs, indented=False).to_pylist()
    expected = [orjson.dumps({k: v for k, v in r.items() if v is not None}).decode() for r in plain]
    assert compact == expected
    table, probs = _table(records)
    indented = record_texts(table, LABELS, probs, indented=True).to_pylist()
    # a record in a report: an element of the top-level "records" list
    document = orjson.dumps({"records": records}, option=orjson.OPT_INDENT_2).decode()
    assert document == '{\n  "records": [\n' + ",\n".join(
        " " * RECORD_INDENT + text for text in indented
    ) + "\n  ]\n}"  # fmt: skip


def _block(lines: list[str]) -> tuple[bytes, np.ndarray, pa.Array]:
    block = "".join(line + "\n" for line in lines).encode()
    starts = np.cumsum([0] + [len(line.encode()) + 1 for line in lines[:-1]])
    table = pj.read_json(pa.BufferReader(block))
    return block, starts, table.column("metadata").combine_chunks()


@pytest.mark.parametrize("spaced", [True, False])
def test_object_texts_are_the_records_own_where_certain(spaced):
    dumps = (
        (lambda v: json.dumps(v)) if spaced else (lambda v: json.dumps(v, separators=(",", ":")))
    )
    rows = [
        {"id": "a", "metadata": {"locale": "en", "tier": 1}},
        {"id": "b", "metadata": {"tier": 2, "locale": "it"}},  # another key order
        {"metadata": {"locale": "de", "tier": None}, "id": "c"},  # an explicit null, not last
        {"id": "d", "metadata": {"locale": "fr"}},  # a key absent
        {"id": "e", "metadata": {"locale": "x\\u00e9", "tier": 3}},  # written with an escape
        {"id": "f", "metadata": {"locale": "en", "tier": 7}},
        {"id": "g", "metadata": {}},
        {"id": "h"},  # no metadata at all
        {"input": {"metadata": {"locale": "en"}}, "id": "i", "metadata": {"locale": "en"}},
        {"metadata": {"locale": "en"}, "input": {"metadata": {"x": 1}}, "id": "j"},  # key twice
    ]
    lines = [dumps(r) for r in rows]
    lines[4] = lines[4].replace("x\\\\u00e9", "x\\u00e9")  # the escape itself in the file
    block, starts, struct = _block(lines)
    texts, unsure = object_texts(struct, memoryview(block), starts, "metadata")
    for line, text, doubt in zip(lines, texts.to_pylist(), unsure.tolist(), strict=True):
        record = json.loads(line)
        if "metadata" not in record:
            assert text is None and not doubt
        elif not doubt:  # certain: exactly what orjson writes for the record's object
            assert text == orjson.dumps(record["metadata"]).decode()
    # what cannot be told from the struct alone is left to the parsed record
    assert unsure.tolist() == [False, False, True, False, True, False, False, False, False, True]
    # a number Arrow read as a double in one record and an integer in another: the integer
    # reads 1.0 in the struct, which is not the record's text
    lines = [dumps({"metadata": {"tier": 1}}), dumps({"metadata": {"tier": 1.5}})]
    block, starts, struct = _block(lines)
    texts, unsure = object_texts(struct, memoryview(block), starts, "metadata")
    assert unsure.tolist() == [True, False] and texts[1].as_py() == '{"tier":1.5}'
