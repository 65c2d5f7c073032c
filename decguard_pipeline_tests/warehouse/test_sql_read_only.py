"""``decguard-pipeline sql`` reads the warehouse and nothing else: no statement that writes
(``COPY … TO``, ``ATTACH``, ``EXPORT``, ``SET``…, inside the warehouse or out of it) and no
file outside the warehouse (``read_text('/etc/passwd')``, a sibling folder sharing its name's
prefix, a symbolic link out of it). Every refusal exits 2 with a message and leaves no file
behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline_tests.support.warehouse_history import fill_history


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("sql")
    root = base / "wh"
    fill_history(Warehouse(root), writes=3)
    (base / "wh-other").mkdir()  # shares the warehouse's name as a prefix
    (base / "wh-other" / "secret.csv").write_text("secret\nsibling-secret\n")
    (base / "outside.csv").write_text("secret\nout-of-warehouse\n")
    (root / "data" / "link.csv").symlink_to(base / "outside.csv")
    return root


def sql(ours, root: Path, query: str):
    return ours("sql", query, "--warehouse", str(root), "-f", "json")


def files_under(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*") if p.is_file() or p.is_symlink()}


def test_queries_read_the_warehouse(history, ours):
    ran = sql(ours, history, "SELECT count(*) AS n FROM metrics")
    assert ran.exit_code == 0, ran.stderr
    assert json.loads(ran.stdout) == [{"n": 2 * (3 * 3 + 1)}]  # 2 metrics, 3 runs x 3, run-5
    for query in (
        "SHOW TABLES",
        "DESCRIBE latest_metrics",
        "SUMMARIZE runs",
        "EXPLAIN SELECT * FROM latest_metrics",
        "FROM latest_all_checks",
        "WITH m AS (SELECT * FROM metrics) SELECT count(*) FROM m",
        "SELECT count(*) FROM metrics AT (VERSION => 3)",  # time travel
        f"SELECT count(*) FROM glob('{history}/data/*')",
    ):
        ran = sql(ours, history, query)
        assert ran.exit_code == 0, (query, ran.stderr)


@pytest.mark.parametrize(
    "query, kind",
    [
        ("COPY (SELECT 1) TO '{base}/copied.csv'", "COPY"),
        ("COPY (FROM metrics) TO '{root}/data/main/metrics/x.parquet'", "COPY"),
        ("SELECT 1; COPY (SELECT 1) TO '{base}/copied.csv'", "COPY"),
        ("EXPLAIN ANALYZE COPY (SELECT 1) TO '{base}/copied.csv'", "EXPLAIN"),
        ("EXPORT DATABASE '{base}/exported'", "EXPORT"),
        ("ATTACH '{root}/attached.duckdb'", "ATTACH"),
        ("SET enable_external_access = true", "SET"),
        ("INSTALL httpfs", "LOAD"),
        ("CREATE TABLE t AS SELECT 1", "CREATE"),
        ("CALL pragma_version()", "CALL"),
    ],
)
def test_statements_that_write_or_reconfigure_are_refused(history, ours, query, kind):
    base = history.parent
    before = files_under(base)
    ran = sql(ours, history, query.format(base=base, root=history))
    assert ran.exit_code == 2
    assert ran.stderr == (
        f"error: sql runs read-only queries (SELECT, SHOW, DESCRIBE, EXPLAIN): {kind} is not one\n"
    )
    assert files_under(base) == before


@pytest.mark.parametrize(
    "query",
    [
        "SELECT * FROM read_text('/etc/passwd')",
        "SELECT * FROM read_csv('{base}/outside.csv')",
        "SELECT * FROM read_csv('{base}/wh-other/secret.csv')",
        "SELECT * FROM read_text('{root}/../outside.csv')",
        "SELECT * FROM read_csv('{root}/data/link.csv')",  # a link out of the warehouse
        "SELECT * FROM glob('/etc/*')",
        "SELECT * FROM read_blob('/proc/self/environ')",
        "SELECT * FROM 'outside.csv'",
    ],
)
def test_nothing_outside_the_warehouse_is_read(history, ours, query, monkeypatch):
    monkeypatch.chdir(history.parent)
    ran = sql(ours, history, query.format(base=history.parent, root=history))
    assert ran.exit_code == 2
    assert ran.stderr.startswith("error: query failed: "), ran.stderr
    for leaked in ("root:", "sibling-secret", "out-of-warehouse", "PATH="):
        assert leaked not in ran.stdout + ran.stderr


def test_the_table_shows_control_characters_as_escapes(history, ours):
    """A cell holds what a server or dataset said: printed as a table it cannot drive the
    terminal (clear the screen, recolour, reorder the text)."""
    query = "SELECT chr(27) || '[2J' || chr(8238) AS said"
    ran = ours("sql", query, "--warehouse", str(history))
    assert ran.exit_code == 0, ran.stderr
    assert "\x1b" not in ran.stdout and "\u202e" not in ran.stdout
    assert "\\x1b[2J\\u202e" in ran.stdout
