"""``production_records`` rows built column-wise from the blocks Arrow parses equal the rows
the record-by-record path builds from each parsed record (the rows the pipeline always
wrote), whatever the records hold: object inputs, metadata keys in any order, escapes,
explicit nulls, nested values, non-finite numbers."""

from __future__ import annotations

import json
import random
import textwrap
import time
from concurrent.futures import Executor, ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pytest

from decguard_pipeline.core.contract import load_contract
from decguard_pipeline.core.production import jsonl_blocks
from decguard_pipeline.core.production.loader import load_records
from decguard_pipeline.warehouse.rows import production_records
from decguard_pipeline.warehouse.rows.production_records import RecordsWriter
from decguard_pipeline_tests.support.production_records import CONTRACTS, make_record

KEYS = {"contract": "c", "target": "2026-11-02", "run_id": "r", "source": "file",
        "source_path": "day.jsonl", "dataset_hash": "sha256:x",
        "recorded_at": datetime(2026, 11, 3, tzinfo=UTC)}  # fmt: skip


def _varied(rng: random.Random, i: int) -> tuple[dict[str, Any], bool]:
    """A record and whether to write it with Python's default spacing (else compact)."""
    record = make_record(rng, "choice", i, uniform=rng.random() < 0.99)
    if "metadata" in record and rng.random() < 0.2:  # keys in another order
        record["metadata"] = dict(reversed(list(record["metadata"].items())))
    extra = rng.random()
    if extra < 0.01:
        record["metadata"] = {"locale": "é", "note": 'say "hi"', "deep": {"a": [1, 2]}}
    elif extra < 0.02:
        record["input"] = {"text": "héllo\n", "n": 2**70}
    elif extra < 0.03:
        record.setdefault("metadata", {})["score"] = float("nan")
    elif extra < 0.04:
        record.setdefault("metadata", {})["locale"] = "café"  # written as \\u00e9 by json
    return record, rng.random() < 0.5


def _write(path: Path, rows: list[tuple[dict[str, Any], bool]]) -> Path:
    with path.open("w") as out:
        for record, spaced in rows:
            text = json.dumps(record) if spaced else json.dumps(record, separators=(",", ":"))
            out.write(text + "\n")
    return path


def _rows(
    path: Path, contract: Path, pools: tuple[Executor, Executor] | None = None
) -> tuple[pa.Table, int]:
    c = load_contract(contract).contract
    tables: list[pa.Table] = []
    writer = RecordsWriter(c.spec(), dict(KEYS), None, tables.append, pools)
    data = load_records(
        path, c.spec(), tolerance=c.evaluation.probability_tolerance,
        segment_keys=c.production.segments, sink=writer,
    )  # fmt: skip
    writer.finish()
    return pa.concat_tables(tables), data.columnar


@pytest.mark.parametrize("seed", [31, 32])
def test_rows_built_column_wise_equal_the_record_by_record_rows(seed, tmp_path, monkeypatch):
    rng = random.Random(seed)
    contract = tmp_path / "c.yaml"
    contract.write_text(textwrap.dedent(CONTRACTS["choice"]))
    path = _write(tmp_path / "day.jsonl", [_varied(rng, i) for i in range(3000)])
    monkeypatch.setattr(jsonl_blocks, "BLOCK_BYTES", 4096)  # many blocks, both paths
    fast, columnar = _rows(path, contract)
    assert 1000 < columnar < 3000  # most blocks column-wise, some record by record
    monkeypatch.setattr(
        jsonl_blocks.ArrowReader, "fast_table",
        lambda self, block, source=None: (None, len(jsonl_blocks.line_starts(block)), None),
    )  # fmt: skip
    exact, columnar = _rows(path, contract)
    assert columnar == 0
    assert fast.schema == exact.schema
    for name in fast.column_names:
        assert fast.column(name).to_pylist() == exact.column(name).to_pylist(), name


def test_stretches_built_and_written_on_two_threads_are_written_in_order(tmp_path, monkeypatch):
    """The ingestion's writer: rows are built on one pool while one thread writes them; a
    stretch slow to build still comes out in its place (here with two building threads,
    so that later stretches are built before it)."""
    contract = tmp_path / "c.yaml"
    contract.write_text(textwrap.dedent(CONTRACTS["choice"]))
    path = _write(tmp_path / "day.jsonl", [_varied(random.Random(5), i) for i in range(800)])
    monkeypatch.setattr(jsonl_blocks, "BLOCK_BYTES", 4096)
    alone, _ = _rows(path, contract)
    built = production_records.arrow_rows

    def slow_first(table, batch, block, starts, spec, first_position):
        if first_position == 1:
            time.sleep(0.2)  # the next stretches are built meanwhile
        return built(table, batch, block, starts, spec, first_position)

    monkeypatch.setattr(production_records, "arrow_rows", slow_first)
    with ThreadPoolExecutor(2) as building, ThreadPoolExecutor(1) as writing:
        threaded, _ = _rows(path, contract, (building, writing))
    assert threaded.column("position").to_pylist() == list(range(800))
    assert threaded.equals(alone)


def test_a_stretch_that_cannot_be_built_on_its_thread_fails_the_load(tmp_path, monkeypatch):
    contract = tmp_path / "c.yaml"
    contract.write_text(textwrap.dedent(CONTRACTS["choice"]))
    path = _write(tmp_path / "day.jsonl", [_varied(random.Random(6), i) for i in range(800)])
    monkeypatch.setattr(jsonl_blocks, "BLOCK_BYTES", 4096)
    built = production_records.arrow_rows
    broken_at: list[int] = []

    def breaks(table, batch, block, starts, spec, first_position):
        if first_position > 200 and not broken_at:
            broken_at.append(first_position)
            raise MemoryError("no memory for this stretch")
        return built(table, batch, block, starts, spec, first_position)

    monkeypatch.setattr(production_records, "arrow_rows", breaks)
    with (
        ThreadPoolExecutor(1) as building,
        ThreadPoolExecutor(1) as writing,
        pytest.raises(MemoryError, match="no memory for this stretch"),
    ):
        _rows(path, contract, (building, writing))
    assert broken_at


def test_record_json_is_the_normalised_record_as_orjson_writes_it(tmp_path):
    contract = tmp_path / "c.yaml"
    contract.write_text(textwrap.dedent(CONTRACTS["choice"]))
    records = [
        {"decision": "route", "probabilities": {"reject": 0.25, "refund": 0.5, "review": 0.25},
         "selected": "refund", "metadata": {"tier": 2, "locale": "en"}, "input": "a \"b\"",
         "latency_ms": 3, "outcome": "refund"},
        {"id": "x", "decision": "route", "probabilities": {"refund": 0.2, "reject": 0.7,
         "review": 0.1}, "selected": "reject", "input": {"k": [1, {"z": None}]}},
    ]  # fmt: skip
    path = _write(tmp_path / "day.jsonl", [(r, True) for r in records])
    rows, _ = _rows(path, contract)
    expected = [
        {"id": "record-1", "decision": "route", "input": 'a "b"',
         "probabilities": {"refund": 0.5, "reject": 0.25, "review": 0.25}, "selected": "refund",
         "confidence": 0.5, "outcome": "refund", "outcome_correct": True, "latency_ms": 3.0,
         "metadata": {"tier": 2, "locale": "en"}},
        {"id": "x", "decision": "route", "input": {"k": [1, {"z": None}]},
         "probabilities": {"refund": 0.2, "reject": 0.7, "review": 0.1}, "selected": "reject",
         "confidence": 0.7, "metadata": {}},
    ]  # fmt: skip
    assert rows.column("record_json").to_pylist() == [orjson.dumps(e).decode() for e in expected]
    assert rows.column("metadata_json").to_pylist() == ['{"tier":2,"locale":"en"}', "{}"]
    assert rows.column("input_json").to_pylist() == ['"a \\"b\\""', '{"k":[1,{"z":null}]}']
