"""The streaming verifier agrees with the whole-file one: a report it accepts verifies, and
any file the whole-file verifier refuses (an edited number, record or layout) it does not
accept, whether written by us or by decguard 0.1.1."""

from __future__ import annotations

import json
import random
import textwrap
from pathlib import Path

import pytest

from decguard_pipeline.core.errors import ReportError
from decguard_pipeline.core.production import verify_stream
from decguard_pipeline.core.production.check import run_check
from decguard_pipeline.core.production.verify import load_production_report
from decguard_pipeline.core.production.verify_stream import verify_report
from decguard_pipeline_tests.support.production_records import (
    CONTRACTS,
    make_record,
    write_records,
)


def _whole(path: Path) -> bool:
    try:
        load_production_report(path)
    except ReportError:
        return False
    return True


@pytest.fixture
def report(tmp_path: Path) -> Path:
    rng = random.Random(21)
    contract = tmp_path / "c.yaml"
    contract.write_text(textwrap.dedent(CONTRACTS["choice"]))
    records = [make_record(rng, "choice", i, uniform=True) for i in range(400)]
    day = write_records(tmp_path / "day.jsonl", records)
    base = write_records(tmp_path / "base.jsonl", records[:150])
    path = tmp_path / "report.json"
    run_check(contract, dataset=day, baseline=base).write(path)
    return path


def test_a_report_verifies_block_by_block(report, monkeypatch):
    monkeypatch.setattr(verify_stream, "BLOCK_BYTES", 4096)  # many blocks, few records each
    assert verify_report(report) and _whole(report)


def _edited(report: Path, tmp_path: Path, edit) -> Path:
    text = report.read_text()
    changed = edit(text)
    assert changed != text
    path = tmp_path / "edited.json"
    path.write_text(changed)
    return path


EDITS = {
    "a probability": lambda t: t.replace('"refund": 0.', '"refund": 0.0', 1),
    "an outcome": lambda t: t.replace('"outcome": "reject"', '"outcome": "refund"', 1),
    "a derived correctness dropped": lambda t: t.replace(
        '"outcome_correct": true', '"outcome_correct": null', 1
    ),
    "a metric": lambda t: t.replace('"total": 400', '"total": 401', 1),
    "a repeated id": lambda t: t.replace('"id": "r1"', '"id": "r0"', 1),
    "an unknown field": lambda t: t.replace('"id": "r3",', '"id": "r3", "extra": 1,', 1),
    "a NaN latency": lambda t: t.replace('"latency_ms": 12.0', '"latency_ms": NaN', 1),
    "a missing comma": lambda t: t.replace("\n    },\n    {\n", "\n    }\n    {\n", 1),
    "a truncated file": lambda t: t[: len(t) // 2],
}


@pytest.mark.parametrize("name", list(EDITS))
def test_an_edited_report_is_never_accepted(name, report, tmp_path):
    path = _edited(report, tmp_path, EDITS[name])
    assert not _whole(path)  # DecGuard's rules refuse it...
    assert not verify_report(path)  # ...so the streaming verifier must not accept it


def test_other_layouts_go_to_the_whole_file_verifier(report, tmp_path):
    compact = tmp_path / "compact.json"
    compact.write_text(json.dumps(json.loads(report.read_text())))
    assert not verify_report(compact) and _whole(compact)
    moved = json.loads(report.read_text())
    records = moved.pop("records")
    moved = {"records": records, **moved}  # records first: not where the layout has them
    first = tmp_path / "first.json"
    first.write_text(json.dumps(moved, indent=2))
    assert not verify_report(first) and _whole(first)


@pytest.mark.slow
def test_the_references_report_verifies_the_same_way(tmp_path, ref):
    rng = random.Random(22)
    contract = tmp_path / "c.yaml"
    contract.write_text(textwrap.dedent(CONTRACTS["choice"]))
    day = write_records(
        tmp_path / "day.jsonl", [make_record(rng, "choice", i, uniform=True) for i in range(200)]
    )
    out = tmp_path / "theirs.json"
    assert ref("check", contract, "--dataset", day, "-o", out).exit_code in (0, 1)
    assert _whole(out)
    # DecGuard writes the same layout: it is verified block by block (or, for a value it
    # spells otherwise, handed to the whole-file verifier, which accepts it)
    verify_report(out)
