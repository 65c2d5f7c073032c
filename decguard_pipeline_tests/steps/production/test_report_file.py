"""``check -o`` writes its report column-wise from the rows the loader kept
(steps/production/report_file.py): byte for byte the report DecGuard 0.1.1 writes and the one
the record-by-record writer writes, for JSON lines in one block or many, a JSON array,
records the column kernels cannot copy and an integer only the standard library encodes;
nothing is left beside the report, and no folder is made for a report that is not written."""

from __future__ import annotations

import json
import random
import tempfile
import textwrap
from pathlib import Path

import pytest

from decguard_pipeline.core.production import jsonl_blocks
from decguard_pipeline_tests.steps.production.test_day import ODD_LINES
from decguard_pipeline_tests.support.production_records import (
    CONTRACTS,
    make_record,
    record_by_record_report,
    run_both,
)


def _strip(raw: bytes) -> bytes:
    """A report without what differs by construction: when, by which program version."""
    return b"\n".join(
        line
        for line in raw.split(b"\n")
        if not line.startswith((b'  "created_at"', b'  "decguard_version"'))
    )


def _contract(tmp_path: Path) -> Path:
    contract = tmp_path / "decguard.yaml"
    contract.write_text(textwrap.dedent(CONTRACTS["choice"]))
    return contract


def _records(n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    return [make_record(rng, "choice", i, uniform=rng.random() < 0.9) for i in range(n)]


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".decguard-check-"))


def _check_o(ours, ref, contract: Path, dataset: Path, tmp_path: Path) -> bytes:
    """``check -o`` by both programs and by the record-by-record writer: one report."""
    mine, theirs = tmp_path / "out" / "ours.json", tmp_path / "out" / "ref.json"
    done = ours("check", contract, "-d", dataset, "-o", mine)
    assert done.exit_code in (0, 1), done.stderr
    assert ref("check", contract, "-d", dataset, "-o", theirs).exit_code == done.exit_code
    raw = mine.read_bytes()
    assert _strip(raw) == _strip(theirs.read_bytes())
    assert _strip(raw) == _strip(record_by_record_report(contract, dataset, tmp_path / "one.json"))
    assert _leftovers(mine.parent) == [] and _leftovers(tmp_path) == []
    return raw


@pytest.mark.slow
@pytest.mark.parametrize("block_bytes", [None, 16384])
def test_json_lines_in_one_block_or_many(tmp_path, ours, ref, monkeypatch, block_bytes):
    if block_bytes:  # many stretches: rows built on one thread, written on another, in order
        monkeypatch.setattr(jsonl_blocks, "BLOCK_BYTES", block_bytes)
    records = _records(3000, 11)
    dataset = tmp_path / "day.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in records))
    raw = _check_o(ours, ref, _contract(tmp_path), dataset, tmp_path)
    assert [r["id"] for r in json.loads(raw)["records"]] == [
        r.get("id", f"record-{i + 1}") for i, r in enumerate(records)
    ]


@pytest.mark.slow
def test_a_json_array(tmp_path, ours, ref):
    dataset = tmp_path / "day.json"
    dataset.write_text(json.dumps(_records(500, 12), indent=1))
    _check_o(ours, ref, _contract(tmp_path), dataset, tmp_path)


@pytest.mark.slow
def test_records_the_column_kernels_cannot_copy(tmp_path, ours, ref):
    plain = [json.dumps(r) for r in _records(40, 13)]
    big = ODD_LINES[0].replace('"metadata"', '"input": {"n": 1180591620717411303424}, "metadata"')
    lines = plain[:20] + ODD_LINES[1:] + [big.replace('"plain"', '"big"')] + plain[20:]
    dataset = tmp_path / "day.jsonl"
    dataset.write_text("\n".join(lines) + "\n")
    raw = _check_o(ours, ref, _contract(tmp_path), dataset, tmp_path)
    assert {r["id"] for r in json.loads(raw)["records"]} >= {"spaced", "nan", "big"}
    big_one = next(r for r in json.loads(raw)["records"] if r["id"] == "big")
    assert type(big_one["input"]["n"]) is int  # 2**70 exact, not 1.1805916207174113e+21
    run_both(ours, ref, _contract(tmp_path), "-d", dataset)  # the terminal and -f json too


def test_a_bad_record_leaves_nothing_and_makes_no_folder(tmp_path, ours):
    lines = [json.dumps(r) for r in _records(50, 14)] + ['{"id": "x", "decision": "route"}']
    dataset = tmp_path / "day.jsonl"
    dataset.write_text("\n".join(lines) + "\n")
    out = tmp_path / "new" / "folder" / "report.json"
    done = ours("check", _contract(tmp_path), "-d", dataset, "-o", out)
    assert done.exit_code == 2 and "line 51" in done.stderr
    assert not (tmp_path / "new").exists() and _leftovers(tmp_path) == []


def test_a_report_folder_that_takes_no_temporary_file_gets_the_same_report(
    tmp_path, ours, monkeypatch
):
    dataset = tmp_path / "day.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in _records(300, 15)))
    contract = _contract(tmp_path)
    expected = _strip(record_by_record_report(contract, dataset, tmp_path / "one.json"))

    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "TemporaryDirectory", refused)
    out = tmp_path / "out.json"
    assert ours("check", contract, "-d", dataset, "-o", out).exit_code in (0, 1)
    assert _strip(out.read_bytes()) == expected
