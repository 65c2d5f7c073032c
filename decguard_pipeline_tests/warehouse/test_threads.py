"""The pipeline's DuckDB runs small statements on one thread and bulk work on every core
(warehouse/lake.py ``SMALL_THREADS``, ``Lake.bulk``); a user's read-only query keeps every
core."""

from __future__ import annotations

import os
import threading

from decguard_pipeline.warehouse import Warehouse


def threads(wh: Warehouse) -> int:
    return wh.query("SELECT current_setting('threads') AS t").column("t")[0].as_py()


def test_small_statements_run_on_one_thread_bulk_work_on_every_core(tmp_path):
    wh = Warehouse(tmp_path / "wh")
    assert threads(wh) == 1
    with wh.lake.bulk():
        assert threads(wh) == (os.cpu_count() or 1)
        with wh.lake.bulk():  # nested, or another thread's: one thread again after the last
            pass
        assert threads(wh) == (os.cpu_count() or 1)
    assert threads(wh) == 1


def test_bulk_blocks_of_two_threads_keep_every_core_until_both_end(tmp_path):
    wh = Warehouse(tmp_path / "wh")
    entered, release = threading.Event(), threading.Event()

    def other() -> None:
        with wh.lake.bulk():
            entered.set()
            release.wait(60)

    worker = threading.Thread(target=other)
    worker.start()
    assert entered.wait(60)
    with wh.lake.bulk():
        pass
    assert threads(wh) == (os.cpu_count() or 1)  # the other block is still under way
    release.set()
    worker.join(60)
    assert threads(wh) == 1


def test_a_users_read_only_query_has_every_core(tmp_path):
    wh = Warehouse(tmp_path / "wh")
    wh.query("SELECT 1")  # the catalog exists
    with wh.read_only() as con:
        found = con.execute("SELECT current_setting('threads')").fetchone()
    assert found == (os.cpu_count() or 1,)
