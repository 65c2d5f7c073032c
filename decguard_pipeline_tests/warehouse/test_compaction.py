"""Compaction of the warehouse: every answer the same before and after (views, ``latest_*``,
the pipeline's own file readers), the manifest switch, retention, files of an older version,
a reader and a writer running through a compaction, kill -9 at random points, the command and
the Dagster job."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from decguard_pipeline.warehouse.compaction import CompactionBusy, Settings, compact
from decguard_pipeline.warehouse.lease import LOCK, held
from decguard_pipeline.warehouse.manifest import active_manifest, is_compacted, manifests

from decguard_pipeline.cli.app import cli
from decguard_pipeline.core.errors import DecGuardError
from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline.warehouse.schema import TABLES
from decguard_pipeline_tests.conftest import ROOT
from decguard_pipeline_tests.support.warehouse_history import (
    PARTITIONS,
    fill_history,
    write_evaluation,
)

FAST = {"activation_delay_s": 0.3, "grace_s": 0.3}
VIEWS = [
    "metrics",
    "case_results",
    "gate_results",
    "runs",
    "targets",
    "cases",
    "production_inbox",
    "verdicts",
    "latest_metrics",
    "latest_case_results",
    "latest_gate_results",
    "latest_runs",
    "latest_targets",
    "latest_cases",
    "latest_production_inbox",
    "latest_verdicts",
    "latest_all_checks",
]


def answers(con) -> dict[str, list[str]]:
    """Every row of every view, as sorted text (MAP and list columns included)."""
    out = {}
    for view in VIEWS:
        rows = con.sql(f"SELECT * FROM {view}").to_arrow_table().to_pylist()
        out[view] = sorted(repr(sorted(row.items())) for row in rows)
    return out


def file_answers(wh: Warehouse, runs: list[str]) -> dict[str, object]:
    """What the pipeline reads file by file: every run's rows, every newest write, and the
    regression baselines' view of the targets (first and newest files of a partition)."""
    from decguard_pipeline.steps.diff import known_targets

    out: dict[str, object] = {}
    for table in ("metrics", "case_results", "gate_results", "runs"):
        for contract, target in PARTITIONS:
            for run in runs:
                rows = wh.read_run(table, contract, target, run)
                out[f"{table}/{contract}/{target}/{run}"] = (
                    None if rows is None else rows.to_pylist()
                )
            latest = wh.read_latest(table, contract, target)
            out[f"{table}/{contract}/{target}/latest"] = latest.to_pylist()
    for contract, _ in PARTITIONS:
        out[f"known/{contract}"] = known_targets(contract, wh)
    return out


def files_on_disk(wh: Warehouse, table: str) -> list[Path]:
    return sorted((wh.root / table).glob("contract=*/target=*/[0-9]*.parquet"))


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("history") / "wh"
    runs = fill_history(Warehouse(root))
    return root, runs


def _copy(root: Path, tmp_path: Path) -> Warehouse:
    shutil.copytree(root, tmp_path / "wh")
    warehouse = Warehouse(tmp_path / "wh")
    warehouse.ensure_catalog(refresh=True)  # the catalog names the copy's location
    return warehouse


@pytest.fixture
def wh(history, tmp_path) -> tuple[Warehouse, list[str]]:
    """A fresh copy of the history generated up to now."""
    root, runs = history
    return _copy(root, tmp_path), runs


# Compaction groups writes by calendar month: the days around a month's turn, the day a lone
# write waits in its month (the 5th: history writes every second day), and a leap day.
DAYS = {
    "first-of-month": datetime(2026, 12, 1, 0, 30, tzinfo=UTC),
    "fifth-of-month": datetime(2026, 12, 5, 12, 0, tzinfo=UTC),
    "sixth-of-month": datetime(2026, 12, 6, 7, 0, tzinfo=UTC),
    "last-of-month": datetime(2026, 11, 30, 23, 30, tzinfo=UTC),
    "leap-day": datetime(2028, 2, 29, 12, 0, tzinfo=UTC),
}


@pytest.fixture(scope="module", params=list(DAYS))
def dated_history(request, tmp_path_factory) -> tuple[Path, list[str], datetime]:
    today = DAYS[request.param]
    root = tmp_path_factory.mktemp("dated") / "wh"
    return root, fill_history(Warehouse(root), today=today), today


@pytest.fixture
def dated(dated_history, tmp_path) -> tuple[Warehouse, list[str], datetime]:
    """A fresh copy of a history generated up to one of ``DAYS``, and that day."""
    root, runs, today = dated_history
    return _copy(root, tmp_path), runs, today


def on(today: datetime, **settings) -> Settings:
    """Settings of a compaction run on ``today``."""
    return Settings(today=lambda: today, **{**FAST, **settings})


def month_groups(names: list[str]) -> dict[str, list[str]]:
    months: dict[str, list[str]] = {}
    for name in names:
        months.setdefault(name[:6], []).append(name)
    return months


# -- every answer the same ---------------------------------------------------------------


def test_compaction_keeps_every_answer_and_bounds_the_files(dated):
    wh, runs, today = dated
    assert max(p.name for p in files_on_disk(wh, "runs"))[:8] <= f"{today:%Y%m%d}"
    with wh.open_catalog() as con:
        before = answers(con)
    files_before = {t: len(files_on_disk(wh, t)) for t in TABLES}
    file_reads = file_answers(wh, runs)

    result = compact(wh, on(today, older_than_days=1), log=lambda _: None)

    with wh.open_catalog() as con:  # the catalog, as an analyst opens it
        assert answers(con) == before
    with wh.connect() as con:  # the pipeline's in-memory views
        assert answers(con) == before
    assert file_answers(wh, runs) == file_reads
    assert sum(len(rows) for rows in before.values()) > 1000  # the answers hold real rows
    # 40 writes over 80 days per partition: at most one file per month, plus the newest
    for table in ("metrics", "case_results", "gate_results", "runs"):
        on_disk = files_on_disk(wh, table)
        assert files_before[table] > 120 and len(on_disk) <= 3 * (4 + 1) + 2, table
        assert result.tables[table].files_after == len(on_disk) - 2  # minus the two seeds
        for contract, target in PARTITIONS:
            newest = wh.partition_dir(table, contract, target)
            assert not is_compacted(sorted(newest.glob("[0-9]*.parquet"))[-1].name)
    # in the first partition the newest write is of a run killed before its verdict (run-39):
    # the newest of a run that reached it (run-38, what latest_* shows) stays apart, as does
    # that run's verdict, which the views find by its name
    for table in ("metrics", "case_results", "gate_results", "runs", "verdicts"):
        [kept] = wh.partition_dir(table, *PARTITIONS[0]).glob("*_run-38.parquet")
        assert kept.name < f"{today - timedelta(days=1):%Y%m%dT%H%M%S%fZ}"  # old enough
    # nothing replaced is left, and no compacted file is unlisted
    for table in TABLES:
        manifest = active_manifest(wh.root / table)
        for path in files_on_disk(wh, table):
            relative = f"{path.parent.parent.name}/{path.parent.name}/{path.name}"
            assert relative not in manifest.hidden
            if is_compacted(path.name) and "contract=_" not in relative:
                assert relative in manifest.live
        # the seed, the compaction's manifest, and the one in effect: the same without the
        # deleted files (the next run deletes the compaction's)
        assert len(manifests(wh.root / table)) <= 3
        assert manifest.hidden == frozenset()


def test_a_second_compaction_merges_only_what_is_new(dated):
    wh, _, today = dated
    compact(wh, on(today, older_than_days=1), log=lambda _: None)
    first = {p.name for p in files_on_disk(wh, "metrics")}
    again = compact(wh, on(today, older_than_days=1), log=lambda _: None)
    assert again.tables["metrics"].writes_merged == 0
    assert {p.name for p in files_on_disk(wh, "metrics")} == first  # nothing rewritten

    at = today - timedelta(hours=1)
    for contract, target in PARTITIONS:
        write_evaluation(wh, contract, target, "late-1", at, 7)
        write_evaluation(wh, contract, target, "late-2", at + timedelta(minutes=1), 8)
    with wh.connect() as con:
        before = answers(con)

    def loose() -> int:
        return sum(
            not is_compacted(p.name)
            for contract, target in PARTITIONS
            for p in wh.partition_dir("metrics", contract, target).glob("[0-9]*.parquet")
        )

    loose_before = loose()
    result = compact(wh, on(today, older_than_days=0), log=lambda _: None)
    with wh.connect() as con:
        assert answers(con) == before
    for contract, target in PARTITIONS:
        folder = wh.partition_dir("metrics", contract, target)
        names = [p.name for p in sorted(folder.glob("[0-9]*.parquet"))]
        assert names[-1].endswith("_late-2.parquet")  # the newest write stays apart
        # every older write is merged into its month, unless it is its month's only file
        for month, group in month_groups(names[:-1]).items():
            assert len(group) == 1 or all(is_compacted(n) for n in group), (month, group)
            assert sum(map(is_compacted, group)) <= 1  # one compacted file per month
    # the previous newest write shares a month with an older file or with late-1 on any day
    # (late-1 may be alone in a new month)
    assert result.tables["metrics"].writes_merged == loose_before - loose()
    assert result.tables["metrics"].writes_merged >= len(PARTITIONS)


def test_the_switch_happens_at_the_manifests_activation(dated):
    """Until the new manifest takes effect, readers count the old files (the compacted ones
    exist but are not counted); from then on, the compacted ones. Both give the same rows."""
    wh, _, today = dated
    with wh.connect() as con:
        before = answers(con)
    folder = wh.partition_dir("metrics", *PARTITIONS[0])
    old_files = [p.name for p in sorted(folder.glob("[0-9]*.parquet"))]
    compact(wh, on(today, older_than_days=1, activation_delay_s=3, wait=False), log=lambda _: None)
    table_dir = wh.root / "metrics"
    pending = manifests(table_dir)[-1]
    from decguard_pipeline.warehouse.manifest import counted_files, now_us, read_manifest

    activation = read_manifest(pending).activation_us
    # published (renamed into place: the inode's change time) before it takes effect
    assert pending.stat().st_ctime_ns // 1000 < activation
    # a reader that started before the activation goes by the old state, whenever it lists
    earlier = active_manifest(table_dir, activation - 1)
    assert earlier.path != pending
    assert active_manifest(table_dir, activation).path == pending
    assert [p.name for p in counted_files(folder, earlier)] == old_files
    assert any(is_compacted(p.name) for p in folder.glob("[0-9]*.parquet"))
    with wh.connect() as con:  # before or after the activation: the same rows
        assert answers(con) == before
    time.sleep(max(0.0, (activation - now_us()) / 1e6) + 0.05)
    counted = [p.name for p in wh.partitions("metrics", PARTITIONS[0][0])[PARTITIONS[0][1]]]
    assert len(counted) < len(old_files) and any(is_compacted(n) for n in counted)
    with wh.connect() as con:
        assert answers(con) == before
    # the replaced files are still there (no grace yet); the next run deletes them
    prefix = f"{folder.parent.name}/{folder.name}/"
    hidden = read_manifest(pending).hidden
    replaced = {f.removeprefix(prefix) for f in hidden if f.startswith(prefix)}
    # what stays is the newest write (of run-39, killed before its verdict), the newest of
    # a run that reached its verdict (run-38: the one latest_* shows) and writes alone in
    # their month
    assert old_files[-1].endswith("_run-39.parquet")
    [newest_done] = [n for n in old_files if n.endswith("_run-38.parquet")]
    assert newest_done < f"{today - timedelta(days=1):%Y%m%dT%H%M%S%fZ}"  # old enough to merge
    assert replaced and replaced <= set(old_files) - {old_files[-1], newest_done}
    for name in set(old_files) - replaced - {old_files[-1], newest_done}:
        assert [n[:6] for n in old_files[:-1]].count(name[:6]) == 1, name
    assert replaced <= {p.name for p in folder.glob("[0-9]*.parquet")}
    time.sleep(0.35)
    compact(wh, on(today, older_than_days=1), log=lambda _: None)
    assert not replaced & {p.name for p in folder.glob("[0-9]*.parquet")}
    with wh.connect() as con:
        assert answers(con) == before


def test_a_query_opens_only_the_files_its_manifest_counts(wh, ours):
    """The files a reader does not count are never opened: files replaced by the manifest in
    effect, an older manifest, a compacted file no manifest lists (a killed compaction's).
    Compaction deletes those at any moment after the grace period, so a query that lists
    them, then opens them, fails ("Cannot open file") when a deletion falls in between. Here
    each is made unreadable instead of deleted: every answer stays the same. Before, every
    view failed on them."""
    wh, _ = wh
    with wh.connect() as con:
        before = answers(con)
    settings = Settings(older_than_days=1, activation_delay_s=0.3, grace_s=3600, wait=False)
    compact(wh, settings, log=lambda _: None)
    time.sleep(0.35)  # in effect; nothing deleted for an hour
    garbage = b"PAR1 not a Parquet file PAR1"
    spoiled = 0
    for table in TABLES:
        table_dir = wh.root / table
        manifest = active_manifest(table_dir)
        for relative in manifest.hidden:  # replaced, still there
            (table_dir / relative).write_bytes(garbage)
            spoiled += 1
        folder = wh.partition_dir(table, *PARTITIONS[0])
        if folder.is_dir():  # left by a killed compaction: listed by no manifest
            (folder / "20000101T000000000000Z_~orphan.parquet").write_bytes(garbage)
        if manifest.activation_us > 1:  # compacted: a manifest older than the one in effect
            (table_dir / "_compaction" / "00000000000000000001_older.parquet").write_bytes(garbage)
    assert spoiled > 50
    with wh.connect() as con:
        assert answers(con) == before
    with wh.read_only() as con:
        assert answers(con) == before
    for view in VIEWS:
        ran = ours("sql", f"SELECT count(*) AS n FROM {view}", "--warehouse", str(wh.root))
        assert ran.exit_code == 0, (view, ran.stderr)
        assert int(ran.stdout.split()[-1]) == len(before[view]), view


def test_retention_deletes_old_history_but_never_a_newest_write(dated):
    wh, runs, today = dated
    with wh.connect() as con:
        before = answers(con)
        kept_targets = con.execute("SELECT count(*) FROM targets").fetchone()[0]
    compact(wh, on(today, older_than_days=1, keep_days=30), log=lambda _: None)
    horizon = today - timedelta(days=30)
    with wh.connect() as con:
        after = answers(con)
        oldest = con.execute("SELECT min(recorded_at) FROM metrics").fetchone()[0]
        assert con.execute("SELECT count(*) FROM targets").fetchone()[0] == kept_targets
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == len(runs) * 3 + 1
        # cases of a contract: the newest write is older than 30 days and stays
        assert con.execute("SELECT count(*) FROM cases").fetchone()[0] == len(PARTITIONS)
    assert oldest >= horizon
    for view in VIEWS:
        if view.startswith("latest_") or view in ("targets", "runs", "production_inbox"):
            assert after[view] == before[view], view
    assert 0 < len(after["metrics"]) < len(before["metrics"])


def test_the_production_inbox_is_never_merged(wh):
    wh, _ = wh
    before = [p.name for p in files_on_disk(wh, "production_inbox")]
    result = compact(wh, Settings(older_than_days=0, **FAST), log=lambda _: None)
    assert [p.name for p in files_on_disk(wh, "production_inbox")] == before
    assert result.tables["production_inbox"].writes_merged == 0


def test_files_of_an_older_version_are_read_then_rewritten(wh):
    """A file without a column added since is read with union_by_name until compaction has
    rewritten it with every column (NULL in the new one)."""
    wh, _ = wh
    folder = wh.partition_dir("metrics", *PARTITIONS[1])
    old = sorted(folder.glob("[0-9]*.parquet"))[0]
    table = pq.read_table(old).drop_columns(["model_version"])
    pq.write_table(table, old)
    wh.ensure_catalog(refresh=True)
    assert wh.loose_tables() == {"metrics"}
    with wh.open_catalog() as con:
        before = answers(con)
        assert con.execute("SELECT count(*) FROM metrics WHERE model_version IS NULL").fetchone()
    compact(wh, Settings(older_than_days=1, **FAST), log=lambda _: None)
    assert wh.loose_tables() == frozenset()
    with wh.open_catalog() as con:
        assert answers(con) == before
        sql = con.execute("SELECT sql FROM duckdb_views() WHERE view_name = 'metrics'").fetchone()
        assert "union_by_name" not in sql[0]


def test_two_compactions_never_run_at_once(wh):
    wh, _ = wh
    with held(wh.root), pytest.raises(CompactionBusy, match="another compaction"):
        compact(wh, Settings(**FAST), log=lambda _: None)
    assert (wh.root / LOCK).exists()
    compact(wh, Settings(**FAST), log=lambda _: None)  # released


def test_keep_days_below_older_than_days_is_refused():
    with pytest.raises(DecGuardError, match="keep-days"):
        Settings(older_than_days=7, keep_days=3)


# -- the command and the Dagster job ---------------------------------------------------------


def test_the_command_dry_run_changes_nothing_then_compacts(wh):
    wh, _ = wh
    before = sorted(p.name for p in wh.root.rglob("*.parquet"))
    runner = CliRunner()
    out = runner.invoke(
        cli,
        ["warehouse", "compact", "--warehouse", str(wh.root), "--dry-run"],
        catch_exceptions=False,
    )
    assert out.exit_code == 0, out.output
    assert "would merge" in out.output and "dry run: nothing changed" in out.output
    assert sorted(p.name for p in wh.root.rglob("*.parquet")) == before
    with wh.connect() as con:
        expected = answers(con)
    out = runner.invoke(
        cli,
        ["warehouse", "compact", "--warehouse", str(wh.root), "--older-than-days", "1",
         "--grace-seconds", "0"],
        catch_exceptions=False,
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    line = next(ln for ln in out.output.splitlines() if ln.startswith("metrics "))
    files_before, files_after = map(int, line.split()[1:3])
    assert files_before > 120 and files_after <= 15
    with wh.connect() as con:
        assert answers(con) == expected


def test_the_command_reports_bad_settings_and_a_missing_warehouse(tmp_path):
    runner = CliRunner()
    out = runner.invoke(cli, ["warehouse", "compact", "--warehouse", str(tmp_path / "none")])
    assert out.exit_code == 2 and "no warehouse at" in out.output
    tmp_path.joinpath("wh").mkdir()
    out = runner.invoke(
        cli,
        ["warehouse", "compact", "--warehouse", str(tmp_path / "wh"), "--older-than-days", "7",
         "--keep-days", "3"],
    )  # fmt: skip
    assert out.exit_code == 2
    assert "keep-days (3) must be at least older-than-days (7)" in out.output
    assert "Traceback" not in out.output


def test_the_dagster_job_compacts(wh):
    from decguard_pipeline.defs.maintenance import warehouse_compaction
    from decguard_pipeline.defs.resources import WarehouseResource

    wh, _ = wh
    with wh.connect() as con:
        expected = answers(con)
    config = {"older_than_days": 1.0, "grace_seconds": 0.0}
    result = warehouse_compaction.execute_in_process(
        run_config={"ops": {"compact_warehouse": {"config": config}}},
        resources={"warehouse": WarehouseResource(root=str(wh.root))},
    )
    assert result.success
    [event] = [e for e in result.all_events if e.event_type_value == "STEP_OUTPUT"]
    metadata = event.event_specific_data.metadata
    assert metadata["files_before"].value > metadata["files_after"].value > 0
    assert metadata["files_after"].value == sum(
        len(files_on_disk(wh, t)) - 2 for t in TABLES if (wh.root / t).is_dir()
    )
    with wh.connect() as con:
        assert answers(con) == expected


# -- a reader and a writer during compaction; kill -9 ------------------------------------------

COMPACT = textwrap.dedent(
    """
    import sys
    from decguard_pipeline.warehouse import Warehouse
    from decguard_pipeline.warehouse.compaction import Settings, compact
    settings = Settings(older_than_days=1, activation_delay_s=float(sys.argv[2]),
                        grace_s=float(sys.argv[3]))
    compact(Warehouse(sys.argv[1]), settings, log=lambda line: None)
    """
)

WRITER = textwrap.dedent(
    """
    import sys, time
    from datetime import UTC, datetime
    from pathlib import Path
    from decguard_pipeline.warehouse import Warehouse
    from decguard_pipeline_tests.support.warehouse_history import PARTITIONS, write_evaluation
    wh, stop, k = Warehouse(sys.argv[1]), Path(sys.argv[2]), 0
    while not stop.exists() and k < 200:
        contract, target = PARTITIONS[k % len(PARTITIONS)]
        write_evaluation(wh, contract, target, f"new-{k:03d}", datetime.now(UTC), k)
        k += 1
        time.sleep(0.05)
    print(k)
    """
)


def retrying(query, attempts: int = 3):
    """Run ``query`` again when it failed on a missing file: the catalog file's views list
    then open every file their globs match, so one a compaction deleted in between fails the
    query (``connect()`` opens only the files it counts and never needs this)."""
    import duckdb

    for attempt in range(attempts):
        try:
            return query()
        except duckdb.IOException as exc:
            if "No such file" not in str(exc) or attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def _old_rows(runs: list[str]) -> dict[str, int]:
    """Rows of case_results per generated run: 4 per partition, run-5 one partition twice."""
    return {run: 4 * len(PARTITIONS) + (4 if run == "run-5" else 0) for run in runs}


def _check_counts(con, runs: list[str], errors: list[str]) -> set[str]:
    """Every old run's rows exactly once; every new write whole or absent; latest_* one write
    per partition. Returns the new runs seen."""
    counts = dict(
        con.execute("SELECT run_id, count(*) FROM case_results GROUP BY run_id").fetchall()
    )
    for run, expected in _old_rows(runs).items():
        if counts.get(run, 0) != expected:
            errors.append(f"{run}: {counts.get(run)} rows, not {expected}")
    new = {r for r in counts if r.startswith("new-")}
    errors += [f"{r}: {counts[r]} rows (a write is 4)" for r in new if counts[r] != 4]
    latest = con.execute(
        "SELECT contract, target, count(DISTINCT run_id), count(*) FROM latest_case_results "
        "GROUP BY ALL"
    ).fetchall()
    if len(latest) != len(PARTITIONS) or any(n != 1 or rows != 4 for _, _, n, rows in latest):
        errors.append(f"latest_case_results: {latest}")
    return new


@pytest.mark.slow
def test_a_reader_polling_and_a_writer_writing_through_a_compaction(wh, tmp_path):
    wh, runs = wh
    stop = tmp_path / "stop"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(wh.root), str(stop)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    # the replaced files stay 3 s after the switch, longer than any poll takes; a query of
    # the catalog file that listed one just before its deletion fails with a missing file
    # (and is run again): it never counts a row twice or misses one
    compactor = subprocess.Popen(
        [sys.executable, "-c", COMPACT, str(wh.root), "0.5", "3"], cwd=ROOT, env=env
    )
    errors: list[str] = []
    polls, states, new_seen = 0, set(), set()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            done = compactor.poll() is not None
            opener = (wh.open_catalog, wh.connect)[polls % 2]

            def poll(opener=opener) -> set[str]:
                with opener() as con:
                    return _check_counts(con, runs, errors)

            try:  # through the catalog file, a query listing a replaced file just before
                # its deletion is run again; connect() needs no second attempt
                new_seen |= retrying(poll) if opener == wh.open_catalog else poll()
            except Exception as exc:  # every other failure counts; none is expected
                errors.append(f"{type(exc).__name__}: {exc}")
            # the pipeline's own file readers, by the same rule
            seen = Counter(
                run
                for contract, _ in PARTITIONS
                for files in wh.partitions("case_results", contract).values()
                for path in files
                for run in pq.read_table(path, columns=["run_id"]).column("run_id").to_pylist()
            )
            if {r: n for r, n in seen.items() if r.startswith("run-")} != _old_rows(runs):
                errors.append("the pipeline's file readers counted the old rows wrongly")
            states.add(active_manifest(wh.root / "case_results").path)
            polls += 1
            if done:
                break
    finally:
        stop.touch()
    written = int(writer.communicate(timeout=120)[0])
    assert compactor.wait(timeout=120) == 0
    assert errors == [], f"{len(errors)} errors in {polls} polls: {errors[:5]}"
    assert polls >= 10 and len(states) >= 2  # polls before and after the switch
    assert written > 0 and new_seen  # the writer published while the reader polled
    with wh.connect() as con:
        final = _check_counts(con, runs, errors)
    assert errors == [] and len(final) == written  # no new write lost


COMPACT_ROUNDS = textwrap.dedent(
    """
    import sys
    from datetime import UTC, datetime
    from decguard_pipeline.warehouse import Warehouse
    from decguard_pipeline.warehouse.compaction import Settings, compact
    from decguard_pipeline_tests.support.warehouse_history import PARTITIONS, write_evaluation
    wh, rounds = Warehouse(sys.argv[1]), int(sys.argv[2])
    settings = Settings(older_than_days=0, activation_delay_s=0.3, grace_s=float(sys.argv[3]))
    deleted = 0
    for r in range(rounds):  # each round: a new write per partition, the last one merged
        for k, (contract, target) in enumerate(PARTITIONS):
            write_evaluation(wh, contract, target, f"new-{r:03d}-{k}", datetime.now(UTC), k)
        result = compact(wh, settings, log=lambda line: None)
        deleted += sum(t.deleted for t in result.tables.values())
    print(deleted)
    """
)
SQL_QUERIES = [
    "SELECT run_id, count(*) AS n FROM case_results GROUP BY run_id",
    "SELECT contract, target, count(DISTINCT run_id) AS runs, count(*) AS n "
    "FROM latest_case_results GROUP BY ALL",
    "SELECT count(*) AS n FROM latest_all_checks",
    "SELECT run_id, count(*) AS n FROM metrics GROUP BY run_id",
]


@pytest.mark.slow
def test_sql_queries_never_fail_while_compaction_deletes_replaced_files(history, tmp_path, ours):
    """``sql`` in a loop while compactions run in another process, each deleting the files
    the one before replaced: every query answers, with every old run's rows once. Before, a
    query's glob listed replaced files it would not count, then opened them: a deletion in
    between failed it with "Cannot open file" (2 of 248 queries, three attempts each)."""
    root, runs = history
    wh = _copy(root, tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    compactor = subprocess.Popen(
        [sys.executable, "-c", COMPACT_ROUNDS, str(wh.root), "4", "3"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    failures: list[str] = []
    queries = 0
    try:
        while compactor.poll() is None:
            query = SQL_QUERIES[queries % len(SQL_QUERIES)]
            ran = ours("sql", query, "--warehouse", str(wh.root), "-f", "json")
            queries += 1
            if ran.exit_code != 0:
                failures.append(ran.stderr.strip())
                continue
            rows = json.loads(ran.stdout)
            if queries % len(SQL_QUERIES) == 1:  # case_results: every old run's rows once
                counts = {r["run_id"]: r["n"] for r in rows}
                if {r: counts.get(r) for r in runs} != _old_rows(runs):
                    failures.append(f"case_results counts: {counts}")
                if any(n != 4 for r, n in counts.items() if r.startswith("new-")):
                    failures.append(f"a new write not whole: {counts}")
            elif queries % len(SQL_QUERIES) == 2 and any(
                r["runs"] != 1 or r["n"] != 4 for r in rows
            ):
                failures.append(f"latest_case_results: {rows}")
    finally:
        deleted = int(compactor.communicate(timeout=300)[0])
    assert compactor.returncode == 0
    assert deleted > 100 and queries >= 20  # queries ran while replaced files were deleted
    assert failures == [], f"{len(failures)} of {queries} queries: {failures[:3]}"


def _consistent(wh: Warehouse, expected: dict[str, list[str]]) -> None:
    with wh.connect() as con:
        assert answers(con) == expected
    with wh.open_catalog() as con:
        assert answers(con) == expected


@pytest.mark.slow
def test_kill_9_at_random_points_then_a_rerun(history, tmp_path):
    root, _ = history
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    timing = tmp_path / "timing"
    shutil.copytree(root, timing)
    Warehouse(timing).ensure_catalog(refresh=True)
    with Warehouse(timing).connect() as con:
        expected = answers(con)
    start = time.monotonic()
    subprocess.run(
        [sys.executable, "-c", COMPACT, str(timing), "0.2", "0.2"], cwd=ROOT, env=env, check=True
    )
    duration = time.monotonic() - start
    rng = random.Random(20260101)
    killed = 0
    for attempt in range(6):
        copy = tmp_path / f"wh{attempt}"
        shutil.copytree(root, copy)
        wh = Warehouse(copy)
        wh.ensure_catalog(refresh=True)
        child = subprocess.Popen(
            [sys.executable, "-c", COMPACT, str(copy), "0.2", "0.2"], cwd=ROOT, env=env
        )
        time.sleep(rng.uniform(0.2, duration))
        os.kill(child.pid, signal.SIGKILL)
        killed += child.wait(timeout=60) == -signal.SIGKILL
        _consistent(wh, expected)  # whatever the kill left: the same answers
        compact(wh, Settings(older_than_days=1, **FAST), log=lambda _: None)  # the re-run
        _consistent(wh, expected)
        for table in TABLES:
            manifest = active_manifest(wh.root / table)
            for path in files_on_disk(wh, table):
                relative = f"{path.parent.parent.name}/{path.parent.name}/{path.name}"
                assert relative not in manifest.hidden  # every replaced file deleted
                if is_compacted(path.name) and "contract=_" not in relative:
                    assert relative in manifest.live  # no orphan of the killed run left
    assert killed >= 4  # most kills hit a running compaction
