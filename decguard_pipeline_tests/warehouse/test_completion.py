"""A run counts as a target's evaluation only once it wrote its verdict (warehouse/completion.py),
on a warehouse written directly: the ``latest_*`` views and ``read_latest`` show the newest run
that reached its verdict, the killed run's rows stay in the tables, views where "latest"
means something else are left alone, and compaction and retention keep what those views
read."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline.warehouse.maintenance import Settings, compact
from decguard_pipeline.warehouse.schema import EVALUATION, TABLES
from decguard_pipeline_tests.support.warehouse_rows import write_verdict

T0 = datetime(2026, 3, 1, 2, 0, tzinfo=UTC)
# folder names the encoding changes, and a run id with characters a file name cannot keep
CONTRACT, TARGET = "a b/c=%", "x y@1/é"
DONE, KILLED = "done run/1", "killed run/2"


def evaluation(
    wh: Warehouse,
    run: str,
    at: datetime,
    accuracy: float,
    *,
    tables: tuple[str, ...] = ("runs", "case_results", "metrics", "gate_results"),
    verdict: bool = True,
) -> None:
    """What a run writes of one target, each table a second after the other, and its verdict
    last (``verdict=False``: killed before it)."""
    keys = {"contract": CONTRACT, "target": TARGET, "run_id": run}
    rows = {
        "runs": [{"n_cases": 4, "n_errored": 0}],
        "case_results": [{"position": i, "case_id": f"{run}-{i}"} for i in range(4)],
        "metrics": [{"metric": "accuracy", "value": accuracy}],
        "gate_results": [{"source": "golden", "gate": "min_accuracy", "status": "pass"}],
        "calibration": [{"measure": "smece", "value": accuracy / 10}],
        "diffs": [{"status": "pass"}],
    }
    for i, table in enumerate(tables):
        wh.write(table, rows[table], **keys, recorded_at=at + timedelta(seconds=i))
    if verdict:
        write_verdict(wh, CONTRACT, TARGET, run, at + timedelta(seconds=len(tables)))


def latest(wh: Warehouse, table: str) -> set[str]:
    """The runs ``latest_<table>`` shows for the target."""
    found = wh.query(
        f"SELECT DISTINCT run_id FROM latest_{table} WHERE contract = ? AND target = ?",
        [CONTRACT, TARGET],
    )
    return set(found.column("run_id").to_pylist())


def read_latest(wh: Warehouse, table: str) -> set[str] | None:
    rows = wh.read_latest(table, CONTRACT, TARGET)
    return None if rows is None else set(rows.column("run_id").to_pylist())


def test_a_run_killed_before_its_verdict_is_not_the_latest(tmp_path):
    wh = Warehouse(tmp_path / "wh")
    evaluation(wh, DONE, T0, 0.75)
    evaluation(wh, KILLED, T0 + timedelta(hours=1), 0.25, verdict=False)
    for table in ("runs", "case_results", "metrics", "gate_results"):
        assert latest(wh, table) == {DONE}, table
        assert read_latest(wh, table) == {DONE}, table
        # the killed run's rows stay queryable
        runs = wh.query(f"SELECT DISTINCT run_id FROM {table} WHERE target = ?", [TARGET])
        assert set(runs.column("run_id").to_pylist()) == {DONE, KILLED}
    assert wh.query("SELECT run_id, gate FROM latest_all_checks").to_pylist() == [
        {"run_id": DONE, "gate": "min_accuracy"}
    ]
    assert latest(wh, "verdicts") == {DONE}

    write_verdict(wh, CONTRACT, TARGET, KILLED, T0 + timedelta(hours=2))  # it did finish
    for table in ("runs", "case_results", "metrics", "gate_results", "verdicts"):
        assert latest(wh, table) == read_latest(wh, table) == {KILLED}, table
    assert KILLED in wh.completed_runs(CONTRACT, TARGET)


def test_a_target_never_evaluated_to_its_verdict_has_no_latest_rows(tmp_path):
    wh = Warehouse(tmp_path / "wh")
    evaluation(wh, KILLED, T0, 0.25, verdict=False)
    assert latest(wh, "runs") == set() and latest(wh, "metrics") == set()
    assert read_latest(wh, "runs") is None and read_latest(wh, "metrics") is None
    with wh.read_only() as con:  # the catalog as an analyst opens it: the same rule
        assert con.execute("SELECT count(*) FROM latest_runs").fetchone() == (0,)
        assert con.execute("SELECT count(*) FROM runs").fetchone() == (1,)


def test_each_table_shows_the_newest_write_of_a_completed_run(tmp_path):
    """A run that re-made only part of an evaluation (the diff, then the verdict) is the
    latest of what it wrote; the other tables keep the evaluation's rows."""
    wh = Warehouse(tmp_path / "wh")
    evaluation(wh, DONE, T0, 0.75, tables=("runs", "metrics", "calibration", "diffs"))
    evaluation(wh, "rediff", T0 + timedelta(hours=1), 0.5, tables=("diffs",))
    evaluation(wh, KILLED, T0 + timedelta(hours=2), 0.25, tables=("runs", "diffs"), verdict=False)
    assert {t: latest(wh, t) for t in ("runs", "metrics", "calibration", "diffs")} == {
        "runs": {DONE}, "metrics": {DONE}, "calibration": {DONE}, "diffs": {"rediff"},
    }  # fmt: skip
    assert read_latest(wh, "diffs") == {"rediff"} and read_latest(wh, "runs") == {DONE}


def test_where_latest_means_the_newest_write_nothing_changes(tmp_path):
    """Registrations, contract-level rows, production days and the response cache have no
    verdict: their latest_* views keep the newest write."""
    wh = Warehouse(tmp_path / "wh")
    assert not {"targets", "contracts", "cases", "production_runs", "responses"} & EVALUATION
    assert set(TABLES) > EVALUATION and "verdicts" not in EVALUATION
    for k, run in enumerate(("first", "second")):
        at = T0 + timedelta(hours=k)
        wh.write("targets", [{"backend": "x y"}], contract=CONTRACT, target=TARGET, run_id=run,
                 recorded_at=at)  # fmt: skip
        wh.write("contracts", [{"path": run}], contract=CONTRACT, run_id=run, recorded_at=at)
        wh.write("production_runs", [{"status": "pass"}], contract=CONTRACT, target="2026-03-01",
                 run_id=run, recorded_at=at)  # fmt: skip
    for table in ("targets", "contracts", "production_runs"):
        found = wh.query(f"SELECT DISTINCT run_id FROM latest_{table}").to_pylist()
        assert found == [{"run_id": "second"}], table
    assert read_latest(wh, "targets") == {"second"}


@pytest.mark.parametrize("keep_days", [None, 20])
def test_compaction_keeps_what_latest_reads(tmp_path, keep_days):
    """Old completed evaluations, the newest of them (with calibration, which later runs did
    not write), then runs killed before their verdicts: compaction and retention keep every
    latest_* answer, and retention deletes no verdict."""
    wh = Warehouse(tmp_path / "wh")
    for day in range(30):
        evaluation(wh, f"old-{day:02d}", T0 + timedelta(days=day), day / 100)
    newest = T0 + timedelta(days=30)
    evaluation(wh, DONE, newest, 0.75, tables=("runs", "metrics", "calibration"))
    for day in range(31, 40):
        evaluation(wh, f"killed-{day}", T0 + timedelta(days=day), 0.1, verdict=False)
    evaluation(wh, "metrics-only", T0 + timedelta(days=40), 0.9, tables=("metrics",))
    shown = ("runs", "metrics", "calibration", "case_results", "gate_results", "verdicts")
    before = {t: latest(wh, t) for t in shown}
    assert before == {
        "runs": {DONE}, "metrics": {"metrics-only"}, "calibration": {DONE},
        "case_results": {"old-29"}, "gate_results": {"old-29"}, "verdicts": {"metrics-only"},
    }  # fmt: skip
    verdicts_before = wh.query("SELECT count(*) AS n FROM verdicts").to_pylist()
    metrics_before = wh.query("SELECT count(*) AS n FROM metrics").to_pylist()

    today = T0 + timedelta(days=45)
    settings = Settings(keep_days=keep_days, today=lambda: today)
    result = compact(wh, settings, log=lambda _: None)

    assert {t: latest(wh, t) for t in shown} == before
    assert {t: read_latest(wh, t) for t in shown} == before
    assert wh.query("SELECT count(*) AS n FROM verdicts").to_pylist() == verdicts_before
    metrics_after = wh.query("SELECT count(*) AS n FROM metrics").to_pylist()
    if keep_days is None:
        assert metrics_after == metrics_before and result.tables["metrics"].rows_dropped == 0
    else:  # 20 days before day 45: days 0-24 go, but for what latest_metrics shows
        assert result.tables["metrics"].rows_dropped == 25
        assert metrics_after[0]["n"] == metrics_before[0]["n"] - 25
    # a verdict still counts where the pipeline asks for one run
    assert "old-03" in wh.completed_runs(CONTRACT, TARGET)
    assert "killed-35" not in wh.completed_runs(CONTRACT, TARGET)


def test_no_view_of_the_newest_write_runs_a_window(tmp_path):
    """DuckDB 1.5.5's parallel window over a small filtered input now and then fails with an
    internal error that invalidates the database (duckdb/duckdb#25713): the ``latest_*``
    views, filtered as a reader filters them, plan no window; and a target's newest write
    read inside a transaction (its staged rows after the committed ones) is the staged one."""
    wh = Warehouse(tmp_path / "wh")
    evaluation(wh, DONE, T0, 0.9)
    with wh.connect() as con:
        plans = {
            table: str(
                con.execute(
                    f"EXPLAIN SELECT * FROM latest_{table} WHERE contract = ? AND target = ?",
                    [CONTRACT, TARGET],
                ).fetchall()
            )
            for table in TABLES
        }
    assert plans and not [t for t, plan in plans.items() if "WINDOW" in plan]
    with wh.transaction():
        evaluation(wh, KILLED, T0 + timedelta(days=1), 0.5)
        assert read_latest(wh, "metrics") == {KILLED}
        assert latest(wh, "metrics") == {KILLED}
    assert read_latest(wh, "metrics") == latest(wh, "metrics") == {KILLED}
