"""``warehouse migrate``: a Parquet warehouse of the earlier layout (a file per write under
``<table>/contract=…/target=…/``, compacted files and the manifest saying which count, seed
files) moved into the DuckLake, every table's rows counted before and after."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline.warehouse.migrate import left_behind
from decguard_pipeline.warehouse.schema import TABLES

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def old_write(root: Path, table: str, contract: str, target: str, name: str, rows: list[dict],
              *, drop: tuple[str, ...] = ()) -> str:  # fmt: skip
    """A file of the old layout; returns its path relative to the table's folder."""
    folder = root / table / f"contract={contract}" / f"target={target}"
    folder.mkdir(parents=True, exist_ok=True)
    keys = {"contract": contract, "target": target}
    data = pa.Table.from_pylist([{**keys, **r} for r in rows], schema=TABLES[table])
    pq.write_table(data.drop_columns(list(drop)), folder / name)
    return f"contract={contract}/target={target}/{name}"


def old_warehouse(root: Path) -> dict[str, int]:
    """Writes, a compaction that replaced two of them, a seed file, a file being written, and
    a write of an older version without two columns; returns the rows a reader counted."""
    metric = {"run_id": "r0", "metric": "accuracy", "value": 0.5, "recorded_at": T0}
    first = old_write(root, "metrics", "refund", "default@v1", "20260101T000000000000Z_r0.parquet",
                      [metric])  # fmt: skip
    later = {**metric, "run_id": "r1", "recorded_at": T0 + timedelta(days=1)}
    second = old_write(root, "metrics", "refund", "default@v1",
                       "20260102T000000000000Z_r1.parquet", [later])  # fmt: skip
    merged = old_write(root, "metrics", "refund", "default@v1",
                       "20260101T000000000000Z_~m1.parquet", [metric, later])  # fmt: skip
    old_write(root, "metrics", "refund", "default@v1", "20260103T000000000000Z_r2.parquet",
              [{**metric, "run_id": "r2", "recorded_at": T0 + timedelta(days=2)}] * 3)  # fmt: skip
    # the manifest in effect: the merged file counts, the two it replaced do not
    manifests = root / "metrics" / "_compaction"
    manifests.mkdir()
    pq.write_table(pa.table({"role": ["live", "hidden", "hidden"],
                             "file": [merged, first, second]}),
                   manifests / "1767225600000000_m1.parquet")  # fmt: skip
    old_write(root, "metrics", "_", "_", "seed.parquet", [])  # seed files hold no rows
    (root / "metrics" / "contract=refund" / "target=default@v1" / ".tmp-x.parquet").write_bytes(
        b"PAR1 half"
    )
    cases = [{"run_id": "r0", "recorded_at": T0, "position": i, "case_id": f"c{i}",
              "prompt_tokens": 3} for i in range(4)]  # fmt: skip
    old_write(root, "case_results", "refund", "default@v1", "20260101T000000000000Z_r0.parquet",
              cases, drop=("prompt_tokens", "completion_tokens"))  # fmt: skip
    verdict = {"run_id": "r2", "recorded_at": T0 + timedelta(days=2), "status": "pass"}
    old_write(root, "verdicts", "refund", "default@v1", "20260103T000000000000Z_r2.parquet",
              [verdict])  # fmt: skip
    (root / "decguard.duckdb").write_bytes(b"")  # the old catalog of views
    return {"metrics": 2 + 3, "case_results": 4, "verdicts": 1}


def test_migrate_copies_the_counted_rows_and_moves_the_old_files_aside(tmp_path, ours):
    root = tmp_path / "wh"
    Warehouse(root).write("runs", [{"n_cases": 1}], contract="c", target="t", run_id="new")
    assert not left_behind(root)  # a DuckLake's own files are not the old layout
    counted = old_warehouse(root)
    assert left_behind(root)  # what `evaluate` warns of
    ran = ours("warehouse", "migrate", "--warehouse", str(root))
    assert ran.exit_code == 0, ran.stderr
    lines = {ln.split()[0]: ln.split()[1:] for ln in ran.stdout.splitlines() if ln.strip()}
    assert lines["metrics"] == ["2", "5", "5"]  # files, rows before, rows after
    assert lines["case_results"] == ["1", "4", "4"]
    assert "every table's rows counted equal" in ran.stdout
    wh = Warehouse(root)
    for table, n in counted.items():
        assert wh.query(f"SELECT count(*) AS n FROM {table}")["n"][0].as_py() == n
    assert wh.query("SELECT count(prompt_tokens) AS n FROM case_results")["n"][0].as_py() == 0
    latest = wh.query("SELECT run_id, count(*) AS n FROM latest_metrics GROUP BY run_id")
    assert latest.to_pylist() == [{"run_id": "r2", "n": 3}]
    aside = root / "migrated-parquet"
    assert (aside / "metrics" / "_compaction").is_dir() and (aside / "decguard.duckdb").exists()
    assert not (root / "metrics").exists() and not left_behind(root)
    # again: nothing left to copy, nothing copied twice
    again = ours("warehouse", "migrate", "--warehouse", str(root))
    assert again.exit_code == 0, again.stderr
    assert wh.query("SELECT count(*) AS n FROM metrics")["n"][0].as_py() == 5


def test_a_file_that_cannot_be_read_stops_the_migration_and_keeps_nothing(tmp_path, ours):
    root = tmp_path / "wh"
    old_warehouse(root)
    broken = root / "runs" / "contract=refund" / "target=default@v1"
    broken.mkdir(parents=True)
    (broken / "20260101T000000000000Z_r0.parquet").write_bytes(b"PAR1 not a parquet file PAR1")
    ran = ours("warehouse", "migrate", "--warehouse", str(root))
    assert ran.exit_code == 2 and "Traceback" not in ran.stderr
    assert "20260101T000000000000Z_r0.parquet" in ran.stderr
    assert Warehouse(root).query("SELECT count(*) AS n FROM metrics")["n"][0].as_py() == 0
    assert (root / "metrics").is_dir()  # nothing moved aside
