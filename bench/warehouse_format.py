"""The warehouse's format measured: what an evaluation's write costs, parallel writers, a year
of nightly history (``latest_metrics`` and the number of files), before and after compaction.

    python bench/warehouse_format.py [--days 365] [--targets 8] [--writers 4] [--each 10]

It uses only ``Warehouse.write`` and ``Warehouse.query`` (the same calls in every version of
the warehouse), so the format it measured before DuckLake runs it too:
``PYTHONPATH=<an older checkout> python bench/warehouse_format.py`` prints the "before" column
(docs/adr/warehouse-format.md has both). One evaluation writes what the pipeline's golden step
writes of one target: a ``runs`` row, 1,000 ``case_results``, 26 ``metrics``, 5
``gate_results`` and its ``verdicts`` row, in one transaction where the warehouse has them.
The year is filled a day per transaction (every target's evaluation of the night), so it
takes minutes, not an hour; the pipeline commits each target's evaluation on its own.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from decguard_pipeline.warehouse import Warehouse

START = datetime(2025, 1, 1, 2, 0, tzinfo=UTC)


def _one(wh: Warehouse):
    """A transaction where the warehouse has them (DuckLake), else nothing."""
    return wh.transaction() if hasattr(wh, "transaction") else contextlib.nullcontext()


def evaluation(wh: Warehouse, contract: str, target: str, run: str, at: datetime, cases: int):
    keys = {"contract": contract, "target": target, "run_id": run, "recorded_at": at}
    wh.write("runs", [{"n_cases": cases}], **keys)
    wh.write("case_results", [{"position": i, "case_id": f"c{i}", "selected": "a",
                               "confidence": 0.5, "input_text": f"case {i}"}
                              for i in range(cases)], **keys)  # fmt: skip
    wh.write("metrics", [{"metric": f"m{i}", "value": i / 26} for i in range(26)], **keys)
    gates = [{"source": "golden", "gate": f"g{i}", "level": "requirement", "status": "pass",
              "value": 1.0} for i in range(5)]  # fmt: skip
    wh.write("gate_results", gates, **keys)
    wh.write("verdicts", [{"evaluation_run_id": run, "status": "pass", "approved": True}], **keys)


def files(root: Path) -> int:
    return sum(1 for p in root.rglob("*.parquet") if p.is_file())


def write_time(root: Path, repeat: int = 10) -> float:
    wh = Warehouse(root)
    evaluation(wh, "c", "warm@v1", "warm", START, 1000)  # the catalog made first
    times = []
    for k in range(repeat):
        start = time.perf_counter()
        with _one(wh):
            evaluation(wh, "c", "t@v1", f"r{k}", START + timedelta(minutes=k), 1000)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


WRITER = """
import sys
from datetime import UTC, datetime
sys.path.insert(0, {bench!r})
from warehouse_format import _one, evaluation
from decguard_pipeline.warehouse import Warehouse
wh = Warehouse(sys.argv[1])
name = sys.argv[2]
for k in range(int(sys.argv[3])):
    with _one(wh):
        evaluation(wh, "c", f"{{name}}@v1", f"{{name}}-{{k}}", datetime.now(UTC), 1000)
"""


def parallel(root: Path, writers: int, each: int) -> tuple[float, int]:
    Warehouse(root).query("SELECT 1")  # the catalog made first
    code = WRITER.format(bench=str(Path(__file__).parent))
    start = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", code, str(root), f"w{k}", str(each)])
             for k in range(writers)]  # fmt: skip
    assert all(p.wait() == 0 for p in procs)
    took = time.perf_counter() - start
    found = Warehouse(root).query("SELECT count(*) AS n FROM verdicts")
    return took, int(found.column("n")[0].as_py())


def year(root: Path, days: int, targets: int) -> None:
    wh = Warehouse(root)
    start = time.perf_counter()
    for day in range(days):
        at = START + timedelta(days=day)
        with _one(wh):
            for t in range(targets):
                evaluation(wh, f"c{t % 4}", f"t{t}@v1", f"d{day}-t{t}", at, 20)
    print(f"filled {days} nights x {targets} targets in {time.perf_counter() - start:.0f} s")


def latest_ms(root: Path, repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        wh = Warehouse(root)
        start = time.perf_counter()
        wh.query("SELECT * FROM latest_metrics")
        best = min(best, time.perf_counter() - start)
    return best * 1000


def compact(root: Path) -> None:
    try:
        from decguard_pipeline.warehouse.maintenance import Settings, compact
    except ImportError:  # the format before DuckLake
        from decguard_pipeline.warehouse.compaction import Settings, compact

        compact(Warehouse(root), Settings(older_than_days=0, grace_s=0.5), log=lambda _: None)
        return
    compact(Warehouse(root), Settings(orphan_grace_s=0), log=lambda _: None)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--targets", type=int, default=8)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--each", type=int, default=10)
    args = parser.parse_args()
    import decguard_pipeline

    print(f"code: {Path(decguard_pipeline.__file__).parent}")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        print(f"one evaluation's write (1,000 cases, 5 tables): {write_time(work / 'w'):.3f} s")
        took, n = parallel(work / "p", args.writers, args.each)
        print(f"{args.writers} writers x {args.each} evaluations: {n} committed in {took:.1f} s "
              f"({n / took:.1f} evaluations/s)")  # fmt: skip
        root = work / "y"
        year(root, args.days, args.targets)
        print(f"a year: {files(root)} files; latest_metrics {latest_ms(root):.0f} ms")
        start = time.perf_counter()
        compact(root)
        print(f"compacted in {time.perf_counter() - start:.1f} s: {files(root)} files; "
              f"latest_metrics {latest_ms(root):.0f} ms")  # fmt: skip


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
