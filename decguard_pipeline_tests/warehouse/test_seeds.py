"""The seed files of a new warehouse (a zero-row file per view glob and a first manifest per
table): published without an fsync each, so a seed torn by a power cut, deleted or cut short
must be found and written again by the next process, and a kill -9 while the first catalog is
made must leave nothing that breaks the next writer or reader."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline.warehouse.manifest import COMPACTED_SEED, MANIFEST_SEED, MANIFESTS, SEED
from decguard_pipeline.warehouse.schema import TABLES
from decguard_pipeline_tests.conftest import ROOT
from decguard_pipeline_tests.support.warehouse_rows import case_rows, write_verdict


def seeds(root: Path) -> list[Path]:
    out = []
    for table in TABLES:
        folder = root / table / "contract=_" / "target=_"
        out += [folder / SEED, folder / COMPACTED_SEED, root / table / MANIFESTS / MANIFEST_SEED]
    return out


def count_every_view(con) -> dict[str, int]:
    names = [v for t in TABLES for v in (t, f"latest_{t}")] + ["latest_all_checks"]
    return {v: con.execute(f"SELECT count(*) FROM {v}").fetchone()[0] for v in names}


def damage(root: Path) -> dict[str, Path]:
    """Four seeds as a power cut or a careless hand may leave them."""
    metrics, cases = root / "metrics" / "contract=_" / "target=_", root / "case_results"
    hurt = {
        "deleted": metrics / SEED,
        "empty": metrics / COMPACTED_SEED,
        "cut": cases / "contract=_" / "target=_" / SEED,
        "zeroed": cases / MANIFESTS / MANIFEST_SEED,
    }
    hurt["deleted"].unlink()
    hurt["empty"].write_bytes(b"")
    data = hurt["cut"].read_bytes()
    hurt["cut"].write_bytes(data[: len(data) // 2])
    hurt["zeroed"].write_bytes(bytes(hurt["zeroed"].stat().st_size))  # size kept, bytes lost
    return hurt


def test_a_new_warehouse_has_every_seed_whole_and_no_staging_leftover(tmp_path: Path):
    wh = Warehouse(tmp_path / "wh")
    wh.ensure_catalog()
    for path in seeds(wh.root):
        table = pq.read_table(path)
        assert path.name == MANIFEST_SEED or (table.num_rows == 0 and table.schema.names)
    manifest = pq.read_table(wh.root / "metrics" / MANIFESTS / MANIFEST_SEED).to_pylist()
    assert [r["role"] for r in manifest] == ["manifest"] and manifest[0]["activation_us"] == 0
    assert list(wh.staging_dir.iterdir()) == []


def test_torn_or_missing_seeds_are_written_again_by_the_next_query(tmp_path: Path):
    wh = Warehouse(tmp_path / "wh")
    wh.write("case_results", case_rows(3, contract="c", target="t", run_id="r", prefix="x"),
             contract="c", target="t", run_id="r")  # fmt: skip
    write_verdict(wh, "c", "t", "r")
    hurt = damage(wh.root)
    with wh.connect() as con:  # every view binds: the seeds were made whole first
        counts = count_every_view(con)
    assert counts["case_results"] == counts["latest_case_results"] == 3
    for path in hurt.values():
        pq.read_metadata(path)  # whole again


REOPEN = textwrap.dedent(
    """
    import json, sys
    from decguard_pipeline.warehouse import Warehouse
    from decguard_pipeline.warehouse.schema import TABLES
    with Warehouse(sys.argv[1]).open_catalog() as con:
        names = [v for t in TABLES for v in (t, f"latest_{t}")] + ["latest_all_checks"]
        counts = {v: con.execute(f"SELECT count(*) FROM {v}").fetchone()[0] for v in names}
    print(json.dumps(counts))
    """
)


@pytest.mark.slow
def test_the_next_process_repairs_torn_seeds_before_opening_the_catalog(tmp_path: Path):
    """After a power cut the catalog and its stamp are there (fsynced) but a seed may be torn:
    the first ``open_catalog`` of the next process, which finds the catalog up to date, still
    checks the seeds once and rewrites the torn ones."""
    import json

    wh = Warehouse(tmp_path / "wh")
    wh.write("case_results", case_rows(3, contract="c", target="t", run_id="r", prefix="x"),
             contract="c", target="t", run_id="r")  # fmt: skip
    catalog = wh.catalog_path.stat().st_mtime_ns
    hurt = damage(wh.root)
    out = subprocess.run(
        [sys.executable, "-c", REOPEN, str(wh.root)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout)["case_results"] == 3
    for path in hurt.values():
        pq.read_metadata(path)
    assert wh.catalog_path.stat().st_mtime_ns == catalog  # the catalog itself was up to date


# -- kill -9 while the first catalog is made ---------------------------------------------------

FIRST_CATALOG = textwrap.dedent(
    """
    import os, sys, time
    from decguard_pipeline.warehouse import catalog, Warehouse
    # slowed down so that the kill lands in the phase the test asks for
    phase = sys.argv[2]
    if phase == "seeds":
        real_replace = os.replace
        def replace(src, dst):
            time.sleep(0.01)
            real_replace(src, dst)
        os.replace = replace
    else:
        real_write = catalog.Catalog._write_catalog
        def write_catalog(self, path, loose):
            real_write(self, path, loose)
            print("catalog", flush=True)
            time.sleep(60)
        catalog.Catalog._write_catalog = write_catalog
    print("start", flush=True)
    Warehouse(sys.argv[1]).ensure_catalog()
    print("done", flush=True)
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("phase", ["seeds", "catalog"])
def test_a_kill_during_the_first_catalog_breaks_neither_the_next_write_nor_a_query(
    tmp_path: Path, phase: str
):
    root = tmp_path / "wh"
    child = subprocess.Popen(
        [sys.executable, "-c", FIRST_CATALOG, str(root), phase],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "start"
    if phase == "seeds":  # kill once some seeds, not all, are published
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and child.poll() is None:
            if sum(p.exists() for p in seeds(root)) > 10:
                break
            time.sleep(0.002)
    else:  # the catalog file is written in the staging folder, not yet published
        assert child.stdout.readline().strip() == "catalog"
    os.kill(child.pid, signal.SIGKILL)
    assert child.wait(timeout=30) == -signal.SIGKILL, "the catalog was made before the kill"
    made = [p for p in seeds(root) if p.exists()]
    assert made and (phase == "catalog") == (len(made) == len(seeds(root)))
    assert not (root / "catalog.json").exists() and not (root / "decguard.duckdb").exists()
    for path in made:
        pq.read_metadata(path)  # what was published is whole

    wh = Warehouse(root)
    wh.write("case_results", case_rows(4, contract="c", target="t", run_id="r", prefix="x"),
             contract="c", target="t", run_id="r")  # fmt: skip
    write_verdict(wh, "c", "t", "r")
    for con in (wh.connect(), wh.open_catalog()):
        with con:
            counts = count_every_view(con)
        assert counts["case_results"] == counts["latest_case_results"] == 4
    assert all(p.exists() for p in seeds(root))


def test_a_catalog_deleted_under_a_writing_process_is_made_again_by_its_next_write(
    tmp_path: Path,
):
    """Once a process knows the catalog is up to date, a write checks only that its file is
    still there (no stamp to read or compute); a warehouse removed meanwhile is made again."""
    import shutil

    wh = Warehouse(tmp_path / "wh")
    rows = case_rows(2, contract="c", target="t", run_id="r1", prefix="a")
    wh.write("case_results", rows, contract="c", target="t", run_id="r1")
    shutil.rmtree(wh.root)
    rows = case_rows(3, contract="c", target="t", run_id="r2", prefix="b")
    wh.write("case_results", rows, contract="c", target="t", run_id="r2")
    assert wh.catalog_path.exists() and (wh.root / "catalog.json").exists()
    with wh.open_catalog() as con:
        assert count_every_view(con)["case_results"] == 3
