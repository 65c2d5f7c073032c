"""A new warehouse's tables: empty, no data files, and each with its statistics in the catalog
(DuckLake plans a query of a table that has none ~25 times slower)."""

from __future__ import annotations

from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline.warehouse.maintenance import data_files
from decguard_pipeline.warehouse.schema import TABLES


def test_every_new_table_is_empty_and_has_its_statistics(tmp_path):
    wh = Warehouse(tmp_path / "wh")
    with wh.connect() as con:
        counts = {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in TABLES}
        with_stats = {
            row[0]
            for row in con.execute(
                "SELECT t.table_name FROM __ducklake_metadata_lake.ducklake_table t "
                "JOIN __ducklake_metadata_lake.ducklake_table_stats s USING (table_id) "
                "WHERE t.end_snapshot IS NULL"
            ).fetchall()
        }
    assert counts == {t: 0 for t in TABLES}
    assert with_stats == set(TABLES)
    assert sum(data_files(wh).values()) == 0
