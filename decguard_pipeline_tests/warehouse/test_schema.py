"""A new warehouse's tables: empty, no data files, and each with its statistics in the catalog
(DuckLake plans a query of a table that has none ~25 times slower)."""

from __future__ import annotations

import sqlite3

from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline.warehouse.lake import Lake
from decguard_pipeline.warehouse.maintenance import data_files
from decguard_pipeline.warehouse.schema import TABLES


def tables_with_statistics(con) -> set[str]:
    return {
        row[0]
        for row in con.execute(
            "SELECT t.table_name FROM __ducklake_metadata_lake.ducklake_table t "
            "JOIN __ducklake_metadata_lake.ducklake_table_stats s USING (table_id) "
            "WHERE t.end_snapshot IS NULL"
        ).fetchall()
    }


def test_every_new_table_is_empty_and_has_its_statistics(tmp_path):
    wh = Warehouse(tmp_path / "wh")
    with wh.connect() as con:
        counts = {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in TABLES}
        with_stats = tables_with_statistics(con)
    assert counts == {t: 0 for t in TABLES}
    assert with_stats == set(TABLES)
    assert sum(data_files(wh).values()) == 0


def test_a_warehouse_made_without_statistics_gets_them_and_keeps_its_rows(tmp_path):
    wh = Warehouse(tmp_path / "wh")
    wh.write("metrics", [{"metric": "accuracy", "value": 0.5}], contract="c", run_id="r1")
    # an earlier version left the tables never written to without statistics: take those
    # out of the catalog
    written = (
        "(SELECT table_id FROM ducklake_table WHERE table_name = 'metrics' "
        "AND end_snapshot IS NULL)"
    )
    catalog = sqlite3.connect(wh.place.where)
    with catalog:
        for stats in ("ducklake_table_stats", "ducklake_table_column_stats"):
            catalog.execute(f"DELETE FROM {stats} WHERE table_id NOT IN {written}")
        (left,) = catalog.execute("SELECT count(*) FROM ducklake_table_stats").fetchone()
    catalog.close()
    assert left == 1
    lake = Lake(wh.root, wh.place)  # another process opening it
    try:
        con = lake.cursor()
        assert tables_with_statistics(con) == set(TABLES)
        assert con.execute("SELECT run_id, value FROM metrics").fetchall() == [("r1", 0.5)]
        assert sum(con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in TABLES) == 1
        con.close()
    finally:
        lake.db.close()
