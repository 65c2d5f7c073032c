"""How a ``latest_metrics`` query grows with the warehouse's history.

    python bench/warehouse_latest.py [--evaluations 1 100 1000] [--repeat 5]

One evaluation of the bundled examples writes one ``metrics`` file per target (8 targets of
4 contracts, 26 metrics each), and ends with its ``verdicts`` row (what ``latest_*`` goes
by). The warehouse is filled with N such evaluations (files written directly in the
warehouse layout, each with its own ``recorded_at`` and run id), then
each query runs on the catalog opened read-only, as ``decguard-pipeline sql`` and an analyst
open it (a fresh connection per query): best of ``--repeat``.

Run it once with the code to compare (e.g. ``PYTHONPATH=<old checkout>``) and once as is;
only ``metrics`` and ``verdicts`` files are written, since the queries read no other table.
With
``--compact``, each size is measured again after ``warehouse compact`` (its default settings,
a half-second grace period).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline.warehouse.schema import TABLES

TARGETS = {
    "injection": ["default@injection-guard-mock-v1"],
    "refund": [
        "default@refund-mock-v1",
        "order_sensitive@refund-mock-v2",
        "strong_model@refund-strong-v1",
    ],
    "severity": ["default@severity-mock-v1", "candidate@severity-mock-v2"],
    "spam": ["default@spam-mock-v1", "candidate@spam-mock-v2"],
}
METRICS = 26
QUERIES = {
    "latest, one contract": "SELECT * FROM latest_metrics WHERE contract = 'refund'",
    "latest, one target": "SELECT * FROM latest_metrics WHERE contract = 'refund' "
    "AND target = 'default@refund-mock-v1'",
    "latest, everything": "SELECT * FROM latest_metrics",
}


def fill(root: Path, evaluations: int) -> int:
    schema = TABLES["metrics"]
    verdict = TABLES["verdicts"]
    start = datetime(2026, 1, 1, tzinfo=UTC)
    files = 0
    for n in range(evaluations):
        at = start + timedelta(minutes=n)
        for contract, targets in TARGETS.items():
            for target in targets:
                rows = [
                    {
                        "contract": contract,
                        "target": target,
                        "run_id": f"run-{n}",
                        "recorded_at": at,
                        "backend": target.split("@")[0],
                        "model_version": target.split("@")[1],
                        "metric": f"m{i}",
                        "value": float(i),
                    }
                    for i in range(METRICS)
                ]
                name = f"{at.strftime('%Y%m%dT%H%M%S%fZ')}_run-{n}.parquet"
                done = [{**rows[0], "evaluation_run_id": f"run-{n}", "status": "pass"}]
                for table, data in (("metrics", rows), ("verdicts", done)):
                    folder = root / table / f"contract={contract}" / f"target={target}"
                    folder.mkdir(parents=True, exist_ok=True)
                    kind = schema if table == "metrics" else verdict
                    pq.write_table(pa.Table.from_pylist(data, schema=kind), folder / name)
                files += 1
    return files


def best_ms(wh: Warehouse, sql: str, repeat: int) -> tuple[float, int]:
    times, rows = [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        with wh.open_catalog() as con:
            rows = len(con.execute(sql).fetchall())
        times.append(time.perf_counter() - start)
    return min(times) * 1000, rows


def measure(wh: Warehouse, repeat: int) -> str:
    cells = []
    for sql in QUERIES.values():
        ms, rows = best_ms(wh, sql, repeat)
        cells.append(f"{ms:>10.1f} ms {rows:>5} rows")
    return "  ".join(cells)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evaluations", type=int, nargs="+", default=[1, 100, 1000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--compact", action="store_true", help="measure after compaction too")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}; best of {args.repeat}")
    print(f"{'evaluations':>11} {'files':>6}  " + "  ".join(f"{q:>22}" for q in QUERIES))
    for evaluations in args.evaluations:
        with tempfile.TemporaryDirectory() as tmp:
            wh = Warehouse(Path(tmp) / "wh")
            files = fill(wh.root, evaluations)
            wh.ensure_catalog()  # seeds the empty tables, as the first write would
            print(f"{evaluations:>11} {files:>6}  " + measure(wh, args.repeat))
            if args.compact:
                from decguard_pipeline.warehouse.compaction import Settings, compact

                compact(wh, Settings(grace_s=0.5), log=lambda line: None)
                left = sum(1 for _ in (wh.root / "metrics").glob("contract=[!_]*/*/*.parquet"))
                print(f"{'compacted':>11} {left:>6}  " + measure(wh, args.repeat))


if __name__ == "__main__":
    main()
