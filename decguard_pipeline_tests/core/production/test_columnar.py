"""The columnar (pyarrow) path: it takes typed record files whole, agrees with the exact
record-by-record path and with decguard 0.1.1, and hands every doubtful block to the exact
path (explicit nulls, lone carriage returns, two objects on a line, int/float segment values)."""

from __future__ import annotations

import json
import random
import textwrap

import numpy as np
import pyarrow as pa
import pyarrow.json as pj
import pytest

from decguard_pipeline.core.contract import load_contract
from decguard_pipeline.core.production import jsonl_blocks
from decguard_pipeline.core.production.loader import load_records, load_table
from decguard_pipeline.core.production.metrics import production_metrics
from decguard_pipeline_tests.support.production_records import (
    CONTRACTS,
    make_record,
    run_both,
    write_records,
)

COLUMNS = ("selected", "confidence", "outcome", "correct", "action", "fallback", "latency_ms",
           "cost", "brier", "nll")  # fmt: skip


def _contract(tmp_path, kind):
    path = tmp_path / f"{kind}.yaml"
    path.write_text(textwrap.dedent(CONTRACTS[kind]))
    return path


def _load(path, contract):
    c = load_contract(contract).contract
    return load_records(
        path, c.spec(), tolerance=c.evaluation.probability_tolerance,
        segment_keys=c.production.segments,
    )  # fmt: skip


def _same_columns(a, b):
    for name in COLUMNS:
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert a.ids.to_pylist() == b.ids.to_pylist()
    for key in a.segments:
        values_a = [a.segment_values[key].values[c] for c in a.segments[key]]
        values_b = [b.segment_values[key].values[c] for c in b.segments[key]]
        assert [(type(v), v) for v in values_a] == [(type(v), v) for v in values_b]


@pytest.mark.parametrize("kind", ["choice", "score", "noul"])
def test_typed_records_take_the_columnar_path_and_match_reference(kind, tmp_path, ours, ref):
    rng = random.Random(11)
    contract = _contract(tmp_path, kind)
    current = write_records(
        tmp_path / "c.jsonl", [make_record(rng, kind, i, uniform=True) for i in range(300)]
    )
    base = write_records(
        tmp_path / "b.jsonl", [make_record(rng, kind, i, uniform=True) for i in range(50)]
    )
    data = _load(current, contract)
    assert data.columnar == len(data) == 300
    run_both(ours, ref, contract, "-d", current, "--baseline", base)


def test_columnar_and_exact_paths_agree(tmp_path, monkeypatch):
    rng = random.Random(12)
    contract = _contract(tmp_path, "choice")
    path = write_records(
        tmp_path / "c.jsonl", [make_record(rng, "choice", i, uniform=True) for i in range(400)]
    )
    fast = _load(path, contract)
    monkeypatch.setattr(
        jsonl_blocks.ArrowReader, "fast_table",
        lambda self, block, source=None: (None, len(jsonl_blocks.line_starts(block)), None),
    )  # fmt: skip
    exact = _load(path, contract)
    assert (fast.columnar, exact.columnar) == (400, 0)
    _same_columns(fast.columns, exact.columns)
    assert list(fast.records()) == list(exact.records())


def test_small_blocks_mix_both_paths(tmp_path, monkeypatch, ours, ref):
    """Blocks of ~2 kB: odd records (object inputs, numeric segment values) send their block
    to the exact path, the others stay columnar; ids default by global position."""
    monkeypatch.setattr(jsonl_blocks, "BLOCK_BYTES", 2048)
    rng = random.Random(13)
    contract = _contract(tmp_path, "choice")
    records = [make_record(rng, "choice", i, uniform=True) for i in range(300)]
    for i in (40, 41, 150):
        records[i]["input"] = {"text": "an object input"}
    records[220].setdefault("metadata", {})["locale"] = 7
    for r in records[::7]:
        r.pop("id", None)
    path = write_records(tmp_path / "c.jsonl", records)
    data = _load(path, contract)
    assert 0 < data.columnar < 300
    run_both(ours, ref, contract, "-d", path)


def test_arrow_table_gives_the_file_metrics(tmp_path):
    rng = random.Random(14)
    contract = _contract(tmp_path, "choice")
    path = write_records(
        tmp_path / "c.jsonl", [make_record(rng, "choice", i, uniform=True) for i in range(200)]
    )
    loaded = load_contract(contract)
    c = loaded.contract
    from_file = _load(path, contract)
    table = pj.read_json(path)
    from_table = load_table(
        table, c.spec(), tolerance=c.evaluation.probability_tolerance,
        segment_keys=c.production.segments,
    )  # fmt: skip
    assert from_table.columnar == 200
    assert production_metrics(from_table.columns, c.evaluation) == production_metrics(
        from_file.columns, c.evaluation
    )
    _same_columns(from_table.columns, from_file.columns)


def test_arrow_table_errors_name_the_row(tmp_path):
    contract = load_contract(_contract(tmp_path, "noul")).contract
    table = pa.table(
        {
            "decision": ["spam", "spam"],
            "probabilities": [{"spam": 0.9, "ham": 0.1}, {"spam": 0.2, "ham": 0.7}],
            "selected": ["spam", "ham"],
        }
    )
    from decguard_pipeline.core.errors import DatasetError

    with pytest.raises(DatasetError) as caught:
        load_table(table, contract.spec(), tolerance=0.001, path="warehouse.records")
    assert str(caught.value) == (
        "warehouse.records: row 2: probabilities sum to 0.9, outside 1 ± 0.001"
    )


TYPED = {"decision": "spam", "probabilities": {"spam": 0.9, "ham": 0.1}, "selected": "spam"}


@pytest.mark.parametrize(
    "odd_line",
    [
        '{"id": null, "decision": "spam", "probabilities": {"spam": 0.9, "ham": 0.1}, '
        '"selected": "spam"}',
        '{"decision": "spam", "probabilities": {"spam": 0.9, "ham": 0.1}, "selected": "spam", '
        '"confidence" :\tnull}',
        '{"decision": "spam", "probabilities": {"spam": 0.9, "ham": 0.1}, "selected": "spam", '
        '"metadata": null}',
        '{"\\u0069d": null, "decision": "spam", "probabilities": {"spam": 0.9, "ham": 0.1}, '
        '"selected": "spam"}',
        '{"decision": "spam", "probabilities": {"spam": 0.9, "ham": 0.1}, "selected": "spam"}\r'
        '{"decision": "spam", "probabilities": {"spam": 0.9, "ham": 0.1}, "selected": "spam"}',
        '{"decision": "spam", "probabilities": {"spam": 0.9, "ham": 0.1}, "selected": "spam"} '
        '{"decision": "spam", "probabilities": {"spam": 0.9, "ham": 0.1}, "selected": "spam"}',
        '{"id": "a", "id": "b", "decision": "spam", "probabilities": {"spam": 0.9, "ham": 0.1}, '
        '"selected": "spam"}',
        '{"decision": "spam", "probabilities": {"spam": NaN, "ham": 0.1}, "selected": "spam"}',
    ],
)
def test_doubtful_lines_are_judged_exactly(odd_line, tmp_path, ours, ref):
    """Arrow reads these as valid (or differently); DecGuard rejects them: so must we."""
    contract = _contract(tmp_path, "noul")
    lines = [json.dumps({**TYPED, "id": f"r{i}", "confidence": 0.9}) for i in range(20)]
    lines.insert(9, odd_line)
    path = tmp_path / "odd.jsonl"
    path.write_bytes(("\n".join(lines) + "\n").encode())
    a, b = ours("check", contract, "-d", path), ref("check", contract, "-d", path)
    assert (a.exit_code, a.stderr) == (b.exit_code, b.stderr)
    assert a.exit_code == 2 and "line 10" in a.stderr


def test_integral_float_segment_values_keep_their_type(tmp_path, ours, ref):
    """Arrow reads 2 and 2.0 alike; DecGuard groups them apart (int 2, float 2.0)."""
    contract = _contract(tmp_path, "score")
    records = [
        {"decision": "severity", "probabilities": {"1": 0.1, "2": 0.6, "3": 0.2, "4": 0.1},
         "selected": "2", "outcome": "2", "metadata": {"team": value}}
        for value in (2, 2.0, 2, 3.5, 2.0)
    ]  # fmt: skip
    path = write_records(tmp_path / "c.jsonl", records)
    run_both(ours, ref, contract, "-d", path)
    doc = json.loads(ours("check", contract, "-d", path, "-f", "json").stdout)
    assert [(type(s["value"]).__name__, s["metrics"]["counts"]["total"]) for s in doc["segments"]] \
        == [("float", 2), ("float", 1), ("int", 2)]  # fmt: skip
