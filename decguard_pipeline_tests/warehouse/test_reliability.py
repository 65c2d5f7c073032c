"""The warehouse under crashes and concurrency: a commit killed with kill -9 halfway through
writing its data files, an evaluation killed before its commit, parallel writers committing
several tables at once with a reader polling every view, and names that must stay text."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline.warehouse.maintenance import Settings, compact
from decguard_pipeline.warehouse.schema import TABLES
from decguard_pipeline_tests.conftest import ROOT
from decguard_pipeline_tests.support.warehouse_rows import case_rows, write_verdict


def all_views() -> list[str]:
    return [view for table in TABLES for view in (table, f"latest_{table}")] + ["latest_all_checks"]


def count_every_view(con) -> dict[str, int]:
    return {v: con.execute(f"SELECT count(*) FROM {v}").fetchone()[0] for v in all_views()}


def data_files(root: Path) -> set[Path]:
    return {p for p in (root / "data").rglob("*") if p.is_file()}


def test_a_new_warehouse_has_every_table_and_view_empty(tmp_path: Path):
    wh = Warehouse(tmp_path / "wh")
    assert not wh.exists()
    with wh.connect() as con:
        counts = count_every_view(con)
    assert counts == dict.fromkeys(all_views(), 0)
    assert wh.exists() and (tmp_path / "wh" / "catalog.sqlite").is_file()
    assert wh.read_latest("metrics", "c", "t") is None


# -- a commit killed in the middle -------------------------------------------------------------

KILLED_WRITER = textwrap.dedent(
    """
    import sys
    from decguard_pipeline.warehouse import Warehouse
    from decguard_pipeline_tests.support.warehouse_rows import case_rows, write_verdict
    root, n = sys.argv[1], int(sys.argv[2])
    table = case_rows(n, contract="refund", target="default@v1", run_id="big", prefix="big")
    wh = Warehouse(root)
    with wh.transaction():
        wh.write("case_results", table, contract="refund", target="default@v1", run_id="big")
        write_verdict(wh, "refund", "default@v1", "big")
        print("committing", flush=True)
    print("done", flush=True)
    """
)


@pytest.mark.slow
def test_a_commit_killed_midway_breaks_no_query_and_not_the_next_write(tmp_path: Path):
    wh = Warehouse(tmp_path / "wh")
    with wh.transaction():
        wh.write(
            "case_results",
            case_rows(3, contract="refund", target="default@v0", run_id="r0", prefix="small"),
            contract="refund",
            target="default@v0",
            run_id="r0",
        )
        write_verdict(wh, "refund", "default@v0", "r0")
    before = data_files(wh.root)
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, str(wh.root), "3000000"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "committing"
    # kill -9 once the commit's data file has bytes on disk (before its snapshot exists)
    deadline = time.monotonic() + 120
    partial: list[Path] = []
    while time.monotonic() < deadline and child.poll() is None:
        partial = [p for p in data_files(wh.root) - before if p.stat().st_size > 0]
        if partial:
            break
        time.sleep(0.002)
    os.kill(child.pid, signal.SIGKILL)
    assert child.wait(timeout=30) == -signal.SIGKILL, "the writer finished before the kill"
    assert partial, "no data file was being written when the writer was killed"

    with wh.connect() as con:
        counts = count_every_view(con)  # not one view reads the half-written file
    assert counts["case_results"] == 3 and counts["latest_case_results"] == 3
    assert counts["verdicts"] == 1  # the verdict of the same transaction is not there either
    assert wh.read_latest("case_results", "refund", "default@v1") is None

    with wh.transaction():
        wh.write(
            "case_results",
            case_rows(5, contract="refund", target="default@v1", run_id="r1", prefix="next"),
            contract="refund",
            target="default@v1",
            run_id="r1",
        )
        write_verdict(wh, "refund", "default@v1", "r1")
    with wh.connect() as con:
        assert count_every_view(con)["case_results"] == 8
    assert wh.read_latest("case_results", "refund", "default@v1").num_rows == 5
    # the killed commit's files are orphans: compaction deletes them, nothing else
    compact(wh, Settings(orphan_grace_s=0), log=lambda _: None)
    assert not [p for p in partial if p.exists()]
    with wh.connect() as con:
        assert count_every_view(con)["case_results"] == 8


def test_an_evaluation_that_raises_before_its_commit_leaves_nothing(tmp_path: Path):
    wh = Warehouse(tmp_path / "wh")
    with pytest.raises(RuntimeError, match="backend broke"), wh.transaction():
        wh.write("metrics", [_metric_row("c", "t", "r", 1.0)], contract="c", target="t",
                 run_id="r")  # fmt: skip
        with wh.connect() as con:  # the step sees its own rows meanwhile
            assert con.execute("SELECT count(*) FROM latest_metrics").fetchone()[0] == 0
            assert con.execute("SELECT count(*) FROM metrics").fetchone()[0] == 1
        raise RuntimeError("backend broke")
    with wh.connect() as con:
        assert con.execute("SELECT count(*) FROM metrics").fetchone()[0] == 0


# -- parallel writers, one reader polling every view ------------------------------------------

PARALLEL_WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from decguard_pipeline.warehouse import Warehouse
    from decguard_pipeline_tests.support.warehouse_rows import case_rows, write_verdict
    root, writer, rows, stop = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
    wh = Warehouse(root)
    i = 0
    while not stop.exists():  # until the reader has polled enough
        target = f"{writer}@v{i % 3}"
        run = f"{writer}-{i}"
        with wh.transaction():  # one evaluation: three tables, one commit
            wh.write("case_results", case_rows(rows, contract="c", target=target, run_id=run,
                                               prefix=run), contract="c", target=target,
                     run_id=run)
            wh.write("metrics", [{"contract": "c", "target": target, "run_id": run,
                                  "metric": "total", "value": float(rows)}],
                     contract="c", target=target, run_id=run)
            write_verdict(wh, "c", target, run)
        i += 1
    print(i)
    """
)


@pytest.mark.slow
def test_parallel_writers_and_a_polling_reader_see_whole_evaluations_only(tmp_path: Path):
    wh = Warehouse(tmp_path / "wh")
    with wh.connect():
        pass  # the catalog exists before the writers start
    stop = tmp_path / "stop"
    writers, rows, rounds = 4, 5_000, 6
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", PARALLEL_WRITER, str(wh.root), f"w{k}", str(rows), str(stop)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        for k in range(writers)
    ]
    errors: list[str] = []
    seen: list[int] = []

    def poll(con) -> None:
        count_every_view(con)
        total, distinct, metrics, verdicts = con.execute(
            "SELECT (SELECT count(*) FROM case_results), "
            "(SELECT count(DISTINCT case_id) FROM case_results), "
            "(SELECT count(*) FROM metrics), (SELECT count(*) FROM verdicts)"
        ).fetchone()
        if total != distinct:
            errors.append(f"{total} rows but {distinct} distinct case ids")
        if total != metrics * rows or metrics != verdicts:
            errors.append(f"{total} case rows, {metrics} metrics, {verdicts} verdicts: half")
        latest = con.execute(
            "SELECT count(*) FROM latest_case_results GROUP BY contract, target"
        ).fetchall()
        if any(n != rows for (n,) in latest):
            errors.append(f"latest_case_results of {latest}: not one whole evaluation each")
        if seen and total < seen[-1]:
            errors.append(f"rows went from {seen[-1]} down to {total}")
        seen.append(total)

    try:
        for _ in range(rounds):
            while (
                seen
                and wh.query("SELECT count(*) AS n FROM case_results")["n"][0].as_py() == seen[-1]
            ):
                time.sleep(0.01)  # a new commit between two polls
            try:
                with wh.connect() as con:
                    con.execute("BEGIN")  # one snapshot for the whole poll
                    poll(con)
                    con.execute("COMMIT")
            except Exception as exc:  # every failure counts; none is expected
                errors.append(f"{type(exc).__name__}: {exc}")
        running = [p.poll() is None for p in procs]
    finally:
        stop.touch()
    written = [int(p.communicate(timeout=300)[0]) for p in procs]
    assert [p.returncode for p in procs] == [0] * writers
    assert running == [True] * writers  # every poll overlapped all the writers
    assert errors == [], f"{len(errors)} of {rounds} polls failed: {errors[:3]}"
    assert seen[-1] > seen[0]  # evaluations were committed while the reader polled
    with wh.connect() as con:
        total, distinct = con.execute(
            "SELECT count(*), count(DISTINCT case_id) FROM case_results"
        ).fetchone()
        metrics = con.execute("SELECT count(*) FROM metrics").fetchone()[0]
    assert total == distinct == sum(written) * rows  # no row lost, none seen twice
    assert metrics == sum(written)


# -- awkward names -----------------------------------------------------------------------------

AWKWARD = [
    ("a b/c=%", "x y@1/é"),  # space, slash, equals, percent, non-ASCII
    ("a_b_c__", "x_y@1__"),  # what the old folder sanitisation turned the first pair into
    ("2026-01-02", "123"),  # looks like a date and a number: must stay text
    ("..", "a+b"),
]


def _metric_row(contract: str, target: str, run_id: str, value: float) -> dict:
    return {"contract": contract, "target": target, "run_id": run_id, "metric": "accuracy",
            "value": value}  # fmt: skip


def test_views_filter_by_contract_and_target_with_awkward_names(tmp_path: Path):
    wh = Warehouse(tmp_path / "wh")
    at = datetime(2026, 1, 1, tzinfo=UTC)
    for i, (contract, target) in enumerate(AWKWARD):
        for run in range(2):  # the second write is the latest
            wh.write(
                "metrics",
                [_metric_row(contract, target, f"r{run}", i + run / 10)],
                contract=contract,
                target=target,
                run_id=f"r{run}",
                recorded_at=at + timedelta(seconds=run),
            )
            write_verdict(wh, contract, target, f"r{run}", at + timedelta(seconds=run))
    with wh.connect() as con:
        rows = con.execute(
            "SELECT contract, target, typeof(contract), typeof(target), value FROM metrics "
            "ORDER BY value"
        ).fetchall()
        assert rows == [
            (c, t, "VARCHAR", "VARCHAR", i + run / 10)
            for i, (c, t) in enumerate(AWKWARD)
            for run in range(2)
        ]
        for i, (contract, target) in enumerate(AWKWARD):
            latest = con.execute(
                "SELECT contract, target, run_id, value FROM latest_metrics "
                "WHERE contract = ? AND target = ?",
                [contract, target],
            ).fetchall()
            assert latest == [(contract, target, "r1", i + 0.1)]
    # the pipeline's own readers see the same rows
    assert wh.read_latest("metrics", *AWKWARD[0]).to_pylist()[0]["value"] == 0.1


def test_rows_must_belong_to_the_partition_they_are_written_to(tmp_path: Path):
    wh = Warehouse(tmp_path / "wh")
    with pytest.raises(ValueError, match="contract 'other'"):
        wh.write("metrics", [_metric_row("other", "t", "r", 1.0)], contract="c", target="t",
                 run_id="r")  # fmt: skip
    # key columns left empty are filled with the partition's values
    wh.write("metrics", [{"metric": "accuracy", "value": 1.0}], contract="c", target="t",
             run_id="r")  # fmt: skip
    write_verdict(wh, "c", "t", "r")
    row = wh.read_latest("metrics", "c", "t").to_pylist()[0]
    assert (row["contract"], row["target"], row["run_id"]) == ("c", "t", "r")
    with wh.connect() as con:
        assert con.execute("SELECT contract, target FROM metrics").fetchall() == [("c", "t")]


def test_rows_read_back_in_the_order_written(tmp_path: Path):
    """A day of records appended batch by batch (a spilled file) and a large Arrow write come
    back in the order written (DuckLake's parallel insert would otherwise shuffle them)."""
    wh = Warehouse(tmp_path / "wh")
    n = 0
    with wh.writing("production_records", contract="c", target="2026-01-01", run_id="r") as add:
        for _ in range(60):
            add(_positions("production_records", range(n, n + 500)))
            n += 500
    back = wh.read_latest("production_records", "c", "2026-01-01")
    assert back.column("position").to_pylist() == list(range(n))
    wh.write("case_results", _positions("case_results", range(n)), contract="c", target="t",
             run_id="r")  # fmt: skip
    assert wh.read_run("case_results", "c", "t", "r").column("position").to_pylist() == list(
        range(n)
    )


def _positions(table: str, positions: range):
    import pyarrow as pa

    schema = TABLES[table]
    count = len(positions)
    return pa.Table.from_arrays(
        [pa.array(list(positions), f.type) if f.name == "position" else pa.nulls(count, f.type)
         for f in schema],
        schema=schema,
    )  # fmt: skip
