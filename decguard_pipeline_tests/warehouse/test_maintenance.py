"""``warehouse compact`` on DuckLake's own operations: inlined rows moved into files, small
files merged, old snapshots expired (time travel reaches back ``--snapshot-days``, never
further), retention that keeps what ``latest_*`` shows, the command and the Dagster job, and
readers, writers and kill -9 during a compaction."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from decguard_pipeline.cli import cli
from decguard_pipeline.core.errors import DecGuardError
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline.warehouse.maintenance import Settings, compact, data_files
from decguard_pipeline.warehouse.schema import TABLES
from decguard_pipeline_tests.conftest import ROOT
from decguard_pipeline_tests.support.warehouse_history import PARTITIONS, fill_history

TODAY = datetime(2026, 6, 1, tzinfo=UTC)
QUIET = {"log": lambda _: None}


def answers(con) -> dict[str, list[tuple]]:
    """Every row of every table and view, sorted."""
    out = {}
    for name in [*TABLES, *(f"latest_{t}" for t in TABLES), "latest_all_checks"]:
        rows = con.execute(f"SELECT * FROM {name}").fetchall()
        out[name] = sorted(map(repr, rows))
    return out


def snapshot(wh: Warehouse) -> int:
    with wh.connect() as con:
        return con.execute("SELECT id FROM lake.current_snapshot()").fetchone()[0]


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("history") / "wh"
    fill_history(Warehouse(root), writes=10, today=TODAY)
    return root


@pytest.fixture
def wh(history, tmp_path) -> Warehouse:
    """A copy of the history of its own (a test may compact it)."""
    shutil.copytree(history, tmp_path / "wh")
    return Warehouse(tmp_path / "wh")


def test_compaction_keeps_every_answer_and_leaves_a_file_per_table(wh):
    with wh.connect() as con:
        expected = answers(con)
    assert data_files(wh)["case_results"] == 0  # every evaluation's rows were inlined
    result = compact(wh, Settings(today=lambda: TODAY), **QUIET)
    assert result.inlined_rows == sum(len(v) for k, v in expected.items() if k in TABLES)
    tables_with_rows = {t for t in TABLES if expected[t]}
    after = data_files(wh)
    assert {t for t, n in after.items() if n} == tables_with_rows
    assert all(after[t] == 1 for t in tables_with_rows)  # merged: one file each
    with wh.connect() as con:
        assert answers(con) == expected
    # a second compaction has nothing to do
    again = compact(wh, Settings(today=lambda: TODAY), **QUIET)
    assert again.inlined_rows == 0 and data_files(wh) == after


def test_the_flush_waits_for_a_reader_and_leaves_the_rows_inlined_when_it_keeps_reading(wh):
    # the reader is another process's Lake: a flush deleting inlined rows under a reading
    # query makes it miss them (duckdb/ducklake#1413)
    from decguard_pipeline.warehouse.lake import Lake

    with wh.connect() as con:
        expected = answers(con)
    other = Lake(wh.root, wh.place)
    lines: list[str] = []
    try:
        with other.reading():
            result = compact(wh, Settings(today=lambda: TODAY, flush_wait_s=0.2), log=lines.append)
    finally:
        other.db.close()
    assert result.inlined_rows == 0 and data_files(wh)["case_results"] == 0
    assert any("readers kept reading for 0.2 s" in line for line in lines), lines
    with wh.connect() as con:
        assert answers(con) == expected
    # with the reader gone the next compaction moves them
    assert compact(wh, Settings(today=lambda: TODAY), **QUIET).inlined_rows > 0
    with wh.connect() as con:
        assert answers(con) == expected


def test_a_reader_arriving_while_the_flush_waits_waits_behind_it(wh):
    import threading

    from decguard_pipeline.warehouse.lake import Lake

    first, second = Lake(wh.root, wh.place), Lake(wh.root, wh.place)
    order: list[str] = []
    try:
        with first.reading():
            entered = threading.Event()

            def flush() -> None:
                with wh.lake.flush_turn(60) as alone:
                    entered.set()
                    order.append(f"flush {alone}")

            flusher = threading.Thread(target=flush)
            flusher.start()
            while not Path(f"{wh.place.where}.gate").exists():
                time.sleep(0.001)

            def read_late() -> None:
                with second.reading():
                    order.append("late reader")

            late = threading.Thread(target=read_late)
            # the flusher holds the gate once it waits; give it the gate before the late reader
            while not _gate_taken(wh):
                time.sleep(0.001)
            late.start()
        flusher.join(60)
        late.join(60)
        assert entered.is_set()
    finally:
        first.db.close()
        second.db.close()
    assert order == ["flush True", "late reader"]


def _gate_taken(wh) -> bool:
    import fcntl
    import os

    fd = os.open(f"{wh.place.where}.gate", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def test_time_travel_reaches_back_the_snapshot_days_and_no_further(wh):
    before = snapshot(wh)
    with wh.connect() as con:
        runs_then = con.execute("SELECT count(*) FROM runs").fetchone()[0]
    with wh.transaction():
        wh.write("runs", [{"n_cases": 1}], contract="c", target="t", run_id="later")
    query = f"SELECT count(*) FROM runs AT (VERSION => {before})"
    with wh.connect() as con:
        assert con.execute(query).fetchone()[0] == runs_then
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == runs_then + 1
    # snapshots younger than --snapshot-days stay (the history's commits are of today)
    compact(wh, Settings(snapshot_days=7), **QUIET)
    with wh.connect() as con:
        assert con.execute(query).fetchone()[0] == runs_then
    # a compaction a week later expires them: the past is no longer there
    week_later = datetime.now(UTC) + timedelta(days=8)
    result = compact(wh, Settings(snapshot_days=7, today=lambda: week_later), **QUIET)
    assert result.snapshots_expired > 0
    with wh.connect() as con, pytest.raises(duckdb.Error):
        con.execute(query).fetchall()
    with wh.connect() as con:
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == runs_then + 1


def test_retention_deletes_old_history_but_never_what_latest_shows(wh):
    with wh.connect() as con:
        latest = {v: rows for v, rows in answers(con).items() if v.startswith("latest_")}
        kept_whole = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                      for t in ("runs", "targets", "verdicts")}  # fmt: skip
        old = con.execute(
            "SELECT count(*) FROM metrics WHERE recorded_at < $at",
            {"at": TODAY - timedelta(days=20)},
        ).fetchone()[0]
    assert old > 0
    result = compact(wh, Settings(keep_days=20, today=lambda: TODAY), **QUIET)
    assert result.tables["metrics"].rows_dropped == old
    with wh.connect() as con:
        now = answers(con)
        assert {v: r for v, r in now.items() if v.startswith("latest_")} == latest
        for table, n in kept_whole.items():
            assert con.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == n, table
        left, shown = con.execute(
            "SELECT (SELECT count(*) FROM metrics WHERE recorded_at < $at), "
            "(SELECT count(*) FROM latest_metrics WHERE recorded_at < $at)",
            {"at": TODAY - timedelta(days=20)},
        ).fetchone()
        assert left == shown  # of the old rows, only those latest_metrics shows are left


def test_negative_settings_are_refused():
    with pytest.raises(DecGuardError, match="keep-days"):
        Settings(keep_days=-1)
    with pytest.raises(DecGuardError, match="snapshot-days"):
        Settings(snapshot_days=-1)


# -- the command and the Dagster job ---------------------------------------------------------


def test_the_command_dry_run_changes_nothing_then_compacts(wh):
    runner = CliRunner()
    before = snapshot(wh)
    out = runner.invoke(
        cli, ["warehouse", "compact", "--warehouse", str(wh.root), "--dry-run"],
        catch_exceptions=False,
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    assert "dry run: nothing changed" in out.output and snapshot(wh) == before
    with wh.connect() as con:
        expected = answers(con)
    out = runner.invoke(
        cli, ["warehouse", "compact", "--warehouse", str(wh.root)], catch_exceptions=False
    )
    assert out.exit_code == 0, out.output
    line = next(ln for ln in out.output.splitlines() if ln.startswith("metrics "))
    assert list(map(int, line.split()[1:4])) == [0, 1, 0]  # files before, after, rows dropped
    assert "inlined rows written to files:" in out.output
    with wh.connect() as con:
        assert answers(con) == expected


def test_the_command_reports_bad_settings_and_a_missing_warehouse(tmp_path):
    runner = CliRunner()
    out = runner.invoke(cli, ["warehouse", "compact", "--warehouse", str(tmp_path / "none")])
    assert out.exit_code == 2 and "no warehouse at" in out.output
    assert not (tmp_path / "none").exists()
    out = runner.invoke(cli, ["warehouse", "compact", "--keep-days", "-3"])
    assert out.exit_code == 2 and "Traceback" not in out.output


def test_the_dagster_job_compacts(wh):
    from decguard_pipeline.defs.maintenance import warehouse_compaction
    from decguard_pipeline.defs.resources import WarehouseResource

    with wh.connect() as con:
        expected = answers(con)
    result = warehouse_compaction.execute_in_process(
        run_config={"ops": {"compact_warehouse": {"config": {"snapshot_days": 7.0}}}},
        resources={"warehouse": WarehouseResource(root=str(wh.root))},
    )
    assert result.success
    [event] = [e for e in result.all_events if e.event_type_value == "STEP_OUTPUT"]
    metadata = event.event_specific_data.metadata
    assert metadata["files_before"].value == 0
    assert metadata["files_after"].value == sum(data_files(wh).values()) > 0
    with wh.connect() as con:
        assert answers(con) == expected


# -- a reader and a writer during compaction; kill -9 ------------------------------------------

COMPACT = textwrap.dedent(
    """
    import sys
    from decguard_pipeline.warehouse import Warehouse
    from decguard_pipeline.warehouse.maintenance import Settings, compact
    compact(Warehouse(sys.argv[1]), Settings(orphan_grace_s=0),
            log=lambda line: print(line, flush=True))
    """
)

WRITER = textwrap.dedent(
    """
    import sys
    from datetime import UTC, datetime
    from pathlib import Path
    from decguard_pipeline.warehouse import Warehouse
    from decguard_pipeline_tests.support.warehouse_history import PARTITIONS, write_evaluation
    wh, stop, k = Warehouse(sys.argv[1]), Path(sys.argv[2]), 0
    while not stop.exists() and k < 300:
        contract, target = PARTITIONS[k % len(PARTITIONS)]
        write_evaluation(wh, contract, target, f"new-{k:03d}", datetime.now(UTC), k)
        k += 1
    print(k)
    """
)


def _check_counts(con, old: dict[str, int], errors: list[str]) -> set[str]:
    """Every old run's rows exactly once; every new evaluation whole or absent; latest_* one
    evaluation per partition. Returns the new runs seen."""
    counts = dict(
        con.execute("SELECT run_id, count(*) FROM case_results GROUP BY run_id").fetchall()
    )
    errors += [f"{r}: {counts.get(r)} rows, not {n}" for r, n in old.items() if counts.get(r) != n]
    new = {r for r in counts if r.startswith("new-")}
    errors += [f"{r}: {counts[r]} rows (an evaluation is 4)" for r in new if counts[r] != 4]
    latest = con.execute(
        "SELECT contract, target, count(DISTINCT run_id), count(*) FROM latest_case_results "
        "GROUP BY ALL"
    ).fetchall()
    if len(latest) != len(PARTITIONS) or any(n != 1 or rows != 4 for _, _, n, rows in latest):
        errors.append(f"latest_case_results: {latest}")
    return new


@pytest.mark.slow
def test_a_reader_polling_and_a_writer_writing_through_a_compaction(wh, tmp_path):
    with wh.connect() as con:
        old = dict(
            con.execute("SELECT run_id, count(*) FROM case_results GROUP BY run_id").fetchall()
        )
    stop = tmp_path / "stop"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(wh.root), str(stop)], cwd=ROOT,
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    errors: list[str] = []
    seen: set[str] = set()
    try:
        compactor = subprocess.Popen(
            [sys.executable, "-c", COMPACT, str(wh.root)], cwd=ROOT, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        polls = 0
        while compactor.poll() is None or polls < 3:
            with wh.connect() as con:
                con.execute("BEGIN")
                seen |= _check_counts(con, old, errors)
                con.execute("COMMIT")
            polls += 1
        out, err = compactor.communicate()
        assert compactor.returncode == 0, err
        assert "merging small files" in out
    finally:
        stop.touch()
        written = int(writer.communicate(timeout=300)[0])
    assert errors == [], errors[:5]
    with wh.connect() as con:
        new = _check_counts(con, old, errors)
    assert errors == [] and len(new) == written and seen <= new


@pytest.mark.slow
def test_kill_9_at_each_step_of_a_compaction_then_a_rerun(history, tmp_path):
    """The compaction is killed as each of its steps starts: every answer stays the same
    whatever it left, and the next compaction finishes the work."""
    with Warehouse(history).connect() as con:
        expected = answers(con)
    steps = 5  # flush, merge, expire, cleanup, orphans: kill as steps 1..4 start
    for step in range(1, steps):
        copy = tmp_path / f"wh{step}"
        shutil.copytree(history, copy)
        child = subprocess.Popen(
            [sys.executable, "-c", COMPACT, str(copy)], cwd=ROOT, stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        assert child.stdout is not None
        for _ in range(step):
            assert child.stdout.readline(), "the compaction ended before the kill"
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
        wh = Warehouse(copy)
        with wh.connect() as con:
            assert answers(con) == expected, step  # whatever the kill left
        compact(wh, Settings(orphan_grace_s=0), **QUIET)  # the re-run
        with wh.connect() as con:
            assert answers(con) == expected, step
        on_disk = {p for p in (copy / "data").rglob("*.parquet")}
        assert len(on_disk) == sum(data_files(wh).values()), step  # no orphan left


def test_a_reader_that_cannot_open_the_lock_files_still_reads(wh, tmp_path):
    # as for a user who may read the warehouse but not create files in it
    for suffix in ("gate", "read"):
        lock = Path(f"{wh.place.where}.{suffix}")
        lock.unlink(missing_ok=True)
        lock.symlink_to(tmp_path / "nowhere" / suffix)
    with wh.connect() as con:
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] > 0
