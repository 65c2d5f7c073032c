"""core/json_exact.py: orjson where it reads JSON as the standard library does; refused (for
the callers' standard-library fallback) where a number may lie beyond 64 bits."""

from __future__ import annotations

import json

import orjson
import pytest

from decguard_pipeline.core import json_exact
from decguard_pipeline.core.production.jsonl_blocks import json_value

BIG = [2**64, 2**70, -(2**63) - 1, -(2**70), 10**30]
EDGES = [2**63 - 1, -(2**63), 2**64 - 1]  # 19-20 digits that orjson reads exactly


@pytest.mark.parametrize("number", BIG)
def test_integers_beyond_64_bits_are_refused_and_read_exactly_by_the_fallback(number):
    text = json.dumps({"input": {"n": number, "list": [1, number]}}, indent=2)
    assert isinstance(orjson.loads(text)["input"]["n"], float)  # what the guard is for
    with pytest.raises(orjson.JSONDecodeError):
        json_exact.loads(text)
    value = json_value(text.encode())
    assert value == {"input": {"n": number, "list": [1, number]}}
    assert type(value["input"]["n"]) is int and type(value["input"]["list"][1]) is int


@pytest.mark.parametrize(
    "text",
    [
        '{"hash": "sha256:a1234567890123456789012345678901234567890123456789012345678901234"}',
        '{"id": "order 12345678901234567890123"}',
        '{"n": 922337203685477580, "m": -922337203685477580, "f": 0.12345678901234568}',
        "[1.5e300, -2.5e-300, 123456789012345678]",
    ],
)
def test_what_orjson_reads_as_the_standard_library_does_is_left_to_it(text):
    assert json_exact.loads(text) == json.loads(text)
    assert json_exact.loads(text.encode()) == json.loads(text)


@pytest.mark.parametrize("number", EDGES)
def test_64_bit_edges_are_read_exactly_either_way(number):
    read = json_value(json.dumps({"n": number}).encode())["n"]
    assert read == number and type(read) is int


@pytest.mark.parametrize(
    "text",
    ["12345678901234567890", " -12345678901234567890 ", "[\n  12345678901234567890\n]",
     '{"a":\t-12345678901234567890}', '{"a": 1234567890123456789.5}'],
)  # fmt: skip
def test_a_long_number_anywhere_a_value_may_start_is_refused(text):
    assert json_exact.long_integer(text.encode())
    with pytest.raises(orjson.JSONDecodeError):
        json_exact.loads(text)


def test_a_number_split_between_two_scanned_chunks_is_seen(monkeypatch):
    monkeypatch.setattr(json_exact, "_CHUNK", 64)
    for pad in range(40, 90):  # the number starts on either side of, or across, a boundary
        raw = b"[" + b" " * pad + b",\n   -" + str(2**70).encode() + b"]"
        assert json_exact.long_integer(raw), pad
        assert not json_exact.long_integer(raw.replace(str(2**70).encode(), b"12345"))
