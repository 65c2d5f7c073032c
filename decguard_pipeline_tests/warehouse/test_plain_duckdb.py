"""A data team reads the warehouse with a plain ``duckdb`` shell (the ``duckdb-cli`` of the
pinned release), not with this package: its extensions installed once from the wheels
(``warehouse attach --install``), then the documented one-liner
``duckdb -cmd "$(decguard-pipeline warehouse attach)"``."""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline_tests.support.warehouse_history import PARTITIONS, write_evaluation


def duckdb_shell() -> str:
    found = Path(sys.executable).with_name("duckdb")
    if found.is_file():
        return str(found)
    where = shutil.which("duckdb")
    if where is None:
        pytest.skip("no duckdb shell (the duckdb-cli package of the test extra)")
    return where


def test_a_plain_duckdb_shell_reads_latest_metrics(tmp_path, ours, monkeypatch):
    home = tmp_path / "home"  # DuckDB installs extensions under ~/.duckdb
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    wh = Warehouse(tmp_path / "wh")
    at = datetime(2026, 3, 1, tzinfo=UTC)
    for k, (contract, target) in enumerate(PARTITIONS):
        write_evaluation(wh, contract, target, f"run-{k}", at, k + 1)
    expected = wh.query(
        "SELECT contract, target, metric, value FROM latest_metrics ORDER BY ALL"
    ).to_pylist()
    assert len(expected) == 2 * len(PARTITIONS)

    installed = ours("warehouse", "attach", "--warehouse", str(wh.root), "--install")
    assert installed.exit_code == 0, installed.stderr
    assert "installed ducklake" in installed.stderr
    attach = installed.stdout.strip()
    assert attach.startswith("ATTACH 'ducklake:sqlite:") and "READ_ONLY" in attach

    query = "SELECT contract, target, metric, value FROM latest_metrics ORDER BY ALL"
    ran = subprocess.run(
        [duckdb_shell(), "-csv", "-cmd", attach, "-c", query],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    rows = list(csv.DictReader(io.StringIO(ran.stdout)))
    assert [
        {"contract": r["contract"], "target": r["target"], "metric": r["metric"],
         "value": float(r["value"])}
        for r in rows
    ] == expected  # fmt: skip
    # read-only: the shell cannot change the team's results
    refused = subprocess.run(
        [duckdb_shell(), "-cmd", attach, "-c", "DELETE FROM metrics"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert refused.returncode != 0 and "read-only" in refused.stderr.lower()
    assert wh.query("SELECT count(*) AS n FROM metrics")["n"][0].as_py() == 2 * len(PARTITIONS)
