"""The warehouse under crashes and concurrency: a file killed mid-write, parallel writers with a
reader polling every view, partition pruning with names the folder encoding must escape, and
the permissions of published files."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline.warehouse.schema import TABLES
from decguard_pipeline_tests.conftest import ROOT
from decguard_pipeline_tests.support.warehouse_rows import case_rows, write_verdict


def all_views() -> list[str]:
    return [view for table in TABLES for view in (table, f"latest_{table}")] + ["latest_all_checks"]


def count_every_view(con) -> dict[str, int]:
    return {v: con.execute(f"SELECT count(*) FROM {v}").fetchone()[0] for v in all_views()}


def published(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


# -- a write killed in the middle ------------------------------------------------------------

KILLED_WRITER = textwrap.dedent(
    """
    import sys
    from decguard_pipeline.warehouse import Warehouse
    from decguard_pipeline_tests.support.warehouse_rows import case_rows, write_verdict
    root, n = sys.argv[1], int(sys.argv[2])
    table = case_rows(n, contract="refund", target="default@v1", run_id="big", prefix="big")
    print("writing", flush=True)
    Warehouse(root).write("case_results", table, contract="refund", target="default@v1",
                          run_id="big")
    print("done", flush=True)
    """
)


@pytest.mark.slow
def test_a_write_killed_midway_breaks_no_query_and_not_the_next_write(tmp_path: Path):
    wh = Warehouse(tmp_path / "wh")
    wh.write(
        "case_results",
        case_rows(3, contract="refund", target="default@v0", run_id="r0", prefix="small"),
        contract="refund",
        target="default@v0",
        run_id="r0",
    )
    write_verdict(wh, "refund", "default@v0", "r0")
    before = published(wh.root)
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, str(wh.root), "3000000"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "writing"
    # kill -9 once the half-written file has bytes on disk
    deadline = time.monotonic() + 120
    partial: list[Path] = []
    while time.monotonic() < deadline and child.poll() is None:
        partial = [p for p in published(wh.root) - before if p.stat().st_size > 0]
        if partial:
            break
        time.sleep(0.005)
    os.kill(child.pid, signal.SIGKILL)
    assert child.wait(timeout=30) == -signal.SIGKILL, "the writer finished before the kill"
    assert partial, "no file was being written when the writer was killed"

    for con in (wh.connect(), wh.open_catalog()):
        with con:
            counts = count_every_view(con)  # not one view fails on the half-written file
        assert counts["case_results"] == 3 and counts["latest_case_results"] == 3
    assert wh.read_latest("case_results", "refund", "default@v1") is None

    wh.write(
        "case_results",
        case_rows(5, contract="refund", target="default@v1", run_id="r1", prefix="next"),
        contract="refund",
        target="default@v1",
        run_id="r1",
    )
    write_verdict(wh, "refund", "default@v1", "r1")
    with wh.open_catalog() as con:
        assert count_every_view(con)["case_results"] == 8
    assert wh.read_latest("case_results", "refund", "default@v1").num_rows == 5


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
        wh.write("case_results", case_rows(rows, contract="c", target=target, run_id=run,
                                           prefix=run), contract="c", target=target, run_id=run)
        wh.write("metrics", [{"contract": "c", "target": target, "run_id": run,
                              "metric": "total", "value": float(rows)}],
                 contract="c", target=target, run_id=run)
        i += 1
    print(i)
    """
)


@pytest.mark.slow
def test_parallel_writers_and_a_polling_reader_see_whole_files_only(tmp_path: Path):
    wh = Warehouse(tmp_path / "wh")
    wh.ensure_catalog()
    stop = tmp_path / "stop"
    writers, rows, rounds = 3, 20_000, 3
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
        total, distinct = con.execute(
            "SELECT count(*), count(DISTINCT case_id) FROM case_results"
        ).fetchone()
        if total != distinct:
            errors.append(f"{total} rows but {distinct} distinct case ids")
        if total % rows:
            errors.append(f"{total} rows: part of a file was read")
        if seen and total < seen[-1]:
            errors.append(f"rows went from {seen[-1]} down to {total}")
        seen.append(total)

    try:
        for _ in range(rounds):  # every view, through both kinds of connection
            for opener in (wh.open_catalog, wh.connect):
                try:
                    with opener() as con:
                        poll(con)
                except Exception as exc:  # every failure counts; none is expected
                    errors.append(f"{type(exc).__name__}: {exc}")
        running = [p.poll() is None for p in procs]
    finally:
        stop.touch()
    written = [int(p.communicate(timeout=300)[0]) for p in procs]
    assert [p.returncode for p in procs] == [0] * writers
    assert running == [True] * writers  # every poll overlapped all the writers
    assert errors == [], f"{len(errors)} of {2 * rounds} polls failed: {errors[:3]}"
    assert seen[-1] > seen[0]  # files were published while the reader polled
    with wh.open_catalog() as con:
        total, distinct = con.execute(
            "SELECT count(*), count(DISTINCT case_id) FROM case_results"
        ).fetchone()
        metrics = con.execute("SELECT count(*) FROM metrics").fetchone()[0]
    assert total == distinct == sum(written) * rows  # no row lost, none seen twice
    assert metrics == sum(written)


# -- the folder encoding and partition pruning -------------------------------------------------

AWKWARD = [
    ("a b/c=%", "x y@1/é"),  # space, slash, equals, percent, non-ASCII
    ("a_b_c__", "x_y@1__"),  # what the old folder sanitisation turned the first pair into
    ("2026-01-02", "123"),  # looks like a date and a number: must stay text
    ("..", "a+b"),
]


def _metric_row(contract: str, target: str, run_id: str, value: float) -> dict:
    return {"contract": contract, "target": target, "run_id": run_id, "metric": "accuracy",
            "value": value}  # fmt: skip


def test_views_filter_and_prune_by_contract_and_target_with_awkward_names(tmp_path: Path):
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
            plan = con.execute(
                "EXPLAIN ANALYZE SELECT * FROM latest_metrics WHERE contract = ?", [contract]
            ).fetchall()[0][1]
            read = re.search(r"Total Files Read: (\d+)", plan) or re.search(
                r"Scanning Files: (\d+)/", plan
            )
            assert read is not None, plan
            assert int(read.group(1)) == 2  # only this contract's two files are read
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


# -- what a reader finds on disk ---------------------------------------------------------------


def test_leftovers_of_an_older_writer_are_ignored_then_swept(tmp_path: Path):
    """A ``.tmp-*`` file an older version left in a partition folder (or any stray file) is
    never read; it is deleted once it is old enough not to belong to a running writer."""
    wh = Warehouse(tmp_path / "wh")
    wh.write("metrics", [_metric_row("c", "t", "r", 1.0)], contract="c", target="t", run_id="r")
    write_verdict(wh, "c", "t", "r")
    folder = wh.partition_dir("metrics", "c", "t")
    stale = folder / ".tmp-abc123.parquet"
    fresh = folder / ".tmp-def456.parquet"
    for path in (stale, fresh):
        path.write_bytes(b"PAR1 half a file")
    old = time.time() - 2 * 3600
    os.utime(stale, (old, old))
    with wh.connect() as con:
        assert con.execute("SELECT count(*) FROM metrics").fetchone()[0] == 1
    assert wh.read_latest("metrics", "c", "t").num_rows == 1
    assert wh.read_run("metrics", "c", "t", "r").num_rows == 1
    wh.sweep(full=True)
    assert not stale.exists() and fresh.exists()


def test_stale_staging_files_are_swept_and_fresh_ones_kept(tmp_path: Path):
    wh = Warehouse(tmp_path / "wh")
    wh.ensure_catalog()
    wh.staging_dir.mkdir(parents=True, exist_ok=True)
    stale, fresh = wh.staging_dir / "stale.tmp", wh.staging_dir / "fresh.tmp"
    for path in (stale, fresh):
        path.write_bytes(b"x")
    old = time.time() - 2 * 3600
    os.utime(stale, (old, old))
    wh.write("metrics", [_metric_row("c", "t", "r", 1.0)], contract="c", target="t", run_id="r")
    assert not stale.exists() and fresh.exists()  # a writer may still be writing `fresh`


def test_temporary_files_never_enter_a_table_folder(tmp_path: Path, monkeypatch):
    """While a file is being written it lives in the staging folder, outside every glob."""
    import pyarrow.parquet as pq

    wh = Warehouse(tmp_path / "wh")
    wh.ensure_catalog()
    seen: list[Path] = []
    real = pq.write_table

    def spy(table, where, **kwargs):
        seen.append(Path(where))
        return real(table, where, **kwargs)

    monkeypatch.setattr(pq, "write_table", spy)
    wh.write("metrics", [_metric_row("c", "t", "r", 1.0)], contract="c", target="t", run_id="r")
    assert seen and all(p.parent == wh.staging_dir for p in seen)
    assert list(wh.staging_dir.iterdir()) == []


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_published_files_get_the_permissions_of_the_umask(tmp_path: Path, umask: int):
    old = os.umask(umask)
    try:
        wh = Warehouse(tmp_path / "wh")
        path = wh.write(
            "metrics", [_metric_row("c", "t", "r", 1.0)], contract="c", target="t", run_id="r"
        )
    finally:
        os.umask(old)
    expected = 0o666 & ~umask
    assert path.stat().st_mode & 0o777 == expected
    seeds = list((wh.root / "metrics" / "contract=_" / "target=_").iterdir())
    assert seeds and all(p.stat().st_mode & 0o777 == expected for p in seeds)
    for name in ("decguard.duckdb", "catalog.json"):
        assert (wh.root / name).stat().st_mode & 0o777 == expected
