"""A production day through the steps as the day's multi-asset runs them: ``check_day`` on the
columns ``ingest_day`` just checked (no read-back) writes the same report, byte for byte, as
``check -o``, as the record-by-record writer and as ``check_day`` reading the stored records
back; the records are handed to one check only."""

from __future__ import annotations

import json
import random
import textwrap
from pathlib import Path

import pytest

from decguard_pipeline.core.errors import DatasetError, DecGuardError
from decguard_pipeline.core.production import jsonl_blocks
from decguard_pipeline.steps.base import Step
from decguard_pipeline.steps.contracts import discover_contracts
from decguard_pipeline.steps.production.check import check_day
from decguard_pipeline.steps.production.ingest import ingest_day
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline_tests.support.production_records import (
    CONTRACTS,
    make_record,
    record_by_record_report,
)

DAY = "2026-11-20"


def _strip(raw: bytes) -> bytes:
    """A report without what differs by construction: when, and the contract path as given."""
    return b"\n".join(
        line for line in raw.split(b"\n") if not line.startswith((b'  "created_at"', b'    "path"'))
    )


@pytest.fixture
def day(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A contract with segments and every gate kind, and a day of records of every field
    kind: wrong and missing outcomes, correctness without outcome, routing (actions,
    fallbacks), latency and cost, typed segments and absent ones, object inputs."""
    contract = tmp_path / "contracts" / "route" / "decguard.yaml"
    contract.parent.mkdir(parents=True)
    contract.write_text(textwrap.dedent(CONTRACTS["choice"]))
    rng = random.Random(7)
    records = [make_record(rng, "choice", i, uniform=rng.random() < 0.9) for i in range(3000)]
    path = tmp_path / "production" / "route" / f"{DAY}.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    monkeypatch.setenv("DECGUARD_PRODUCTION", str(tmp_path / "production"))
    monkeypatch.setenv("DECGUARD_PRODUCTION_START", DAY)
    return contract, path


@pytest.mark.slow
@pytest.mark.parametrize("block_bytes", [None, 16384])
def test_the_day_checked_on_its_ingested_columns_is_check_os_report(
    day, tmp_path, ours, monkeypatch, block_bytes
):
    """Also with many small blocks: the stored rows (built on the writer's thread) and the
    report's row groups (built on two threads) come out in order."""
    if block_bytes:
        monkeypatch.setattr(jsonl_blocks, "BLOCK_BYTES", block_bytes)
    contract, path = day
    [entry] = discover_contracts(str(contract.parent.parent))
    warehouse = Warehouse(tmp_path / "wh")
    fused = Step(warehouse, "fused")
    ingested = ingest_day(entry, DAY, fused)
    assert ingested.n == 3000 and 0 < ingested.n_correctness < ingested.n
    together = check_day(entry, DAY, fused, ingested)
    with pytest.raises(DecGuardError, match="already handed"):
        ingested.take()
    # the same day checked alone: its stored records read back and checked again
    alone = check_day(entry, DAY, Step(warehouse, "alone"))
    cli = tmp_path / "cli.json"
    assert ours("check", contract, "--dataset", path, "-o", cli).exit_code in (0, 1)
    expected = _strip(cli.read_bytes())
    assert _strip(record_by_record_report(contract, path, tmp_path / "one.json")) == expected
    assert _strip(together.report_path.read_bytes()) == expected
    assert _strip(alone.report_path.read_bytes()) == expected
    if block_bytes:  # many stretches written, read back in the day's order
        ids = [json.loads(line).get("id") for line in path.read_text().splitlines() if line]
        stored = warehouse.query(
            "SELECT position, id FROM production_records WHERE run_id = 'fused' ORDER BY rowid"
        ).to_pylist()
        assert [r["position"] for r in stored] == list(range(len(ids)))
        given = [(i, r["id"]) for i, r in enumerate(stored) if ids[i] is not None]
        assert given == [(i, x) for i, x in enumerate(ids) if x is not None]
    report = json.loads(cli.read_text())
    assert report["segments"] and report["metrics"]["counts"]["with_correctness"] < 3000
    assert together.rows["production_checks"] == [
        {
            **row,
            "run_id": "fused",
            "recorded_at": together.rows["production_checks"][0]["recorded_at"],
        }
        for row in alone.rows["production_checks"]
    ]


# records whose text the column kernels must not copy as they are: each falls back to the
# record-by-record encoding (or fails as check fails), and the report stays check -o's
_P = '"probabilities": {"refund": 0.5, "reject": 0.3, "review": 0.2}, "selected": "refund"'
ODD_LINES = [
    '{"id": "plain", "decision": "route", ' + _P + ', "metadata": {"locale": "en", "tier": 1}}',
    '{ "id" :"spaced" ,\t"decision":  "route",' + _P + ' , "metadata" : {"locale" :"en"} }',
    '{"id": "esc\\u00e9", "decision": "route", "input": "caf\\u00e9 \\ud83d\\ude00 \\/ \\"q\\"", '
    + _P
    + ', "metadata": {"locale": "\\u0065n", "tier": 2}}',
    '{"id": "floats", "decision": "route", "probabilities": {"refund": 5e-1, "reject": 0.30, '
    '"review": 2E-1}, "selected": "refund", "latency_ms": 1e5, "cost": 1.0, '
    '"metadata": {"locale": "en", "tier": 1.0, "w": 1e5}}',
    '{"id": "nan", "decision": "route", ' + _P + ', "metadata": {"locale": "en", "x": NaN}}',
    '{"id": "nested", "decision": "route", "input": {"b": [1, {"c": null}], "a": 1.5e-7}, '
    + _P
    + ', "metadata": {"locale": "de", "extra": {"k": [true, false]}}}',
    '{"id": "order", "decision": "route", ' + _P + ', "metadata": {"tier": 3, "locale": "fr"}}',
]


@pytest.mark.slow
def test_records_the_kernels_cannot_copy_give_check_os_report(tmp_path, monkeypatch, ours):
    """Unusual spacing, unicode escapes, 1e5 / 1.0 / 5e-1 numbers, NaN, nested and
    reordered objects, among plain records (all inside one Arrow block)."""
    contract, path = _odd_day(tmp_path, monkeypatch, ODD_LINES[1:])
    cli = tmp_path / "cli.json"
    done = ours("check", contract, "--dataset", path, "-o", cli)
    [entry] = discover_contracts(str(contract.parent.parent))
    step = Step(Warehouse(tmp_path / "wh"), "odd")
    assert done.exit_code in (0, 1), done.stderr  # every record valid
    checked = check_day(entry, DAY, step, ingest_day(entry, DAY, step))
    assert _strip(checked.report_path.read_bytes()) == _strip(cli.read_bytes())
    assert _strip(record_by_record_report(contract, path, tmp_path / "one.json")) == _strip(
        cli.read_bytes()
    )
    report = json.loads(cli.read_text())
    assert {r["id"] for r in report["records"]} >= {"spaced", "esc\u00e9", "floats", "nan"}


@pytest.mark.slow
def test_a_duplicate_key_fails_the_ingestion_as_it_fails_check(tmp_path, monkeypatch, ours):
    line = (
        '{"id": "dup", "decision": "route", '
        + _P
        + ', "metadata": {"locale": "en", "locale": "it"}}'
    )
    contract, path = _odd_day(tmp_path, monkeypatch, [line])
    done = ours("check", contract, "--dataset", path)
    assert done.exit_code == 2 and "line 26: invalid JSON: duplicate key 'locale'" in done.stderr
    [entry] = discover_contracts(str(contract.parent.parent))
    with pytest.raises(DatasetError) as failed:
        ingest_day(entry, DAY, Step(Warehouse(tmp_path / "wh"), "dup"))
    assert f"error: {failed.value}\n" == done.stderr


def _odd_day(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, odd: list[str]) -> tuple[Path, Path]:
    """A day of 50 plain records with ``odd`` lines after the 25th."""
    contract = tmp_path / "contracts" / "route" / "decguard.yaml"
    contract.parent.mkdir(parents=True)
    contract.write_text(textwrap.dedent(CONTRACTS["choice"]))
    path = tmp_path / "production" / "route" / f"{DAY}.jsonl"
    path.parent.mkdir(parents=True)
    plain = [ODD_LINES[0].replace('"plain"', f'"p{i}"') for i in range(50)]
    path.write_text("\n".join(plain[:25] + odd + plain[25:]) + "\n")
    monkeypatch.setenv("DECGUARD_PRODUCTION", str(tmp_path / "production"))
    monkeypatch.setenv("DECGUARD_PRODUCTION_START", DAY)
    return contract, path
