"""Reads answered without DuckLake (warehouse/committed_runs.py, ``Transaction.staged_run``)
give exactly what DuckLake gives, and ``Warehouse.snapshot`` reads one snapshot.

The expected rows come from SQL written here against the committed table (the run's rows
with its newest ``recorded_at``, in row-id order), not from the code under test."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest

from decguard_pipeline.warehouse import Warehouse, committed_runs
from decguard_pipeline.warehouse.schema import TABLES
from decguard_pipeline.warehouse.transaction import Transaction
from decguard_pipeline_tests.support.evaluations import REFUND, execute_target

T0 = datetime(2026, 3, 1, 2, 0, tzinfo=UTC)
KEYS = {"contract": "refund", "target": "default@v1"}


def duckdb_rows(wh: Warehouse, table: str, contract: str, target: str, run: str) -> pa.Table:
    """The run's newest write of ``table`` as DuckLake holds it."""
    found = wh.query(
        f'SELECT * FROM lake.main."{table}" WHERE contract = $c AND target = $t AND run_id = $r '
        f'AND recorded_at = (SELECT max(recorded_at) FROM lake.main."{table}" '
        "WHERE contract = $c AND target = $t AND run_id = $r) ORDER BY rowid",
        {"c": contract, "t": target, "r": run},
    )
    schema = TABLES[table]
    return pa.Table.from_arrays([found.column(f.name).cast(f.type) for f in schema], schema=schema)


def kept(wh: Warehouse) -> dict[tuple[str, ...], pa.Table]:
    return {k[1:]: v for k, v in committed_runs._kept.items() if k[0] == wh._key}


def test_an_evaluation_reads_back_from_memory_what_duckdb_holds(tmp_path):
    root = tmp_path / "wh"
    result = execute_target(REFUND, "default@refund-mock-v1", root)
    assert result.success
    wh = Warehouse(root)
    remembered = kept(wh)
    # the run's one commit: every table it wrote, read back by the same process
    assert {"runs", "case_results", "metrics", "gate_results", "verdicts"} <= {
        k[0] for k in remembered
    }
    for (table, contract, target, run), rows in remembered.items():
        expected = duckdb_rows(wh, table, contract, target, run)
        assert rows.schema == expected.schema == TABLES[table], table
        assert rows.to_pylist() == expected.to_pylist(), table
        assert wh.read_run(table, contract, target, run) is rows  # no DuckLake query


def test_a_runs_staged_rows_read_inside_its_transaction_as_duckdb_reads_them(tmp_path, monkeypatch):
    wh = Warehouse(tmp_path / "wh")
    wh.write("metrics", [{"metric": "accuracy", "value": 0.5}], **KEYS, run_id="r", recorded_at=T0)
    later = T0 + timedelta(seconds=1)
    with wh.transaction():
        wh.write("metrics", [{"metric": "other run", "value": 1.0}], **KEYS, run_id="s")
        rows = [{"metric": "accuracy", "value": 0.75}, {"metric": "ece", "value": 0.1}]
        wh.write("metrics", rows, **KEYS, run_id="r", recorded_at=later)
        from_memory = wh.read_run("metrics", "refund", "default@v1", "r")
        none_staged = wh.read_run("metrics", "refund", "default@v1", "t")
        # the same read through DuckLake's view of the committed and staged rows
        monkeypatch.setattr(Transaction, "staged_run", lambda *a: None)
        through_duckdb = wh.read_run("metrics", "refund", "default@v1", "r")
    assert from_memory is not None and through_duckdb is not None
    assert from_memory.to_pylist() == through_duckdb.to_pylist()
    assert [r["value"] for r in from_memory.to_pylist()] == [0.75, 0.1]
    assert none_staged is None


def test_two_writes_of_a_run_at_the_same_time_both_count(tmp_path):
    """DuckLake's newest write of a run is every row with its newest ``recorded_at``: a second
    commit under the same one adds to the first, and memory must not keep only the last."""
    wh = Warehouse(tmp_path / "wh")
    for value in (0.1, 0.2):
        wh.write("metrics", [{"metric": "m", "value": value}], **KEYS, run_id="r", recorded_at=T0)
    rows = wh.read_run("metrics", "refund", "default@v1", "r")
    assert rows is not None and [r["value"] for r in rows.to_pylist()] == [0.1, 0.2]
    assert rows.to_pylist() == duckdb_rows(wh, "metrics", "refund", "default@v1", "r").to_pylist()


def test_a_newer_write_of_a_run_replaces_the_one_kept(tmp_path):
    wh = Warehouse(tmp_path / "wh")
    wh.write("metrics", [{"metric": "m", "value": 0.1}], **KEYS, run_id="r", recorded_at=T0)
    later = T0 + timedelta(seconds=1)
    wh.write("metrics", [{"metric": "m", "value": 0.2}], **KEYS, run_id="r", recorded_at=later)
    rows = wh.read_run("metrics", "refund", "default@v1", "r")
    assert rows is not None and [r["value"] for r in rows.to_pylist()] == [0.2]


def test_rows_deleted_by_maintenance_are_not_read_from_memory(tmp_path):
    wh = Warehouse(tmp_path / "wh")
    wh.write("metrics", [{"metric": "m", "value": 0.1}], **KEYS, run_id="r", recorded_at=T0)
    assert wh.read_run("metrics", "refund", "default@v1", "r") is not None
    with wh.direct() as con:
        con.execute("DELETE FROM lake.main.metrics WHERE run_id = 'r'")
    assert wh.read_run("metrics", "refund", "default@v1", "r") is None


def test_reads_in_a_snapshot_see_one_snapshot(tmp_path):
    wh = Warehouse(tmp_path / "wh")
    wh.write("metrics", [{"metric": "m", "value": 0.1}], **KEYS, run_id="r", recorded_at=T0)

    def count() -> int:
        return wh.query("SELECT count(*) AS n FROM metrics").column("n")[0].as_py()

    def commit_another() -> None:
        wh.write("metrics", [{"metric": "m", "value": 0.2}], **KEYS, run_id="s", recorded_at=T0)

    with wh.snapshot():
        before = count()
        writer = threading.Thread(target=commit_another)  # another connection's commit
        writer.start()
        writer.join(60)
        assert count() == before == 1
    assert count() == 2


def test_a_reading_connection_left_by_an_error_is_not_handed_out_again(tmp_path):
    wh = Warehouse(tmp_path / "wh")
    with pytest.raises(Exception, match="no_such_table"), wh.connect() as con:
        con.execute("BEGIN")
        con.execute("SELECT * FROM no_such_table")
    with wh.connect() as con:  # a fresh one: not inside the failed transaction
        assert con.execute("SELECT count(*) FROM metrics").fetchone() == (0,)
