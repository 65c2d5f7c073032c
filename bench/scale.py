"""A year of nightly evaluations in the warehouse, its view queries before and after compaction.

    python bench/scale.py [--days 365] [--contracts 20] [--targets 3] [--cases 100] [--repeat 5]

Every night each target of each contract is evaluated once: one file each of ``runs``,
``metrics`` (26 metrics), ``gate_results`` (6 gates), ``case_results`` (``--cases`` cases) and
``verdicts`` (the evaluation's last write, which ``latest_*`` goes by), with the real schemas,
in the warehouse layout (written directly with pyarrow, as
``Warehouse.write`` names and fills them, without its per-file fsync, so a year takes a minute
instead of ten). Then each query runs on the catalog opened read-only, as
``decguard-pipeline sql`` and an analyst open it (a fresh connection per query, best of
``--repeat``): first over the uncompacted year, also through the views of the previous version
(``union_by_name`` over every file, no manifest), then after ``warehouse compact`` (default
settings but a one-second grace period). Prints times, rows, file counts and ratios.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from decguard_pipeline.warehouse import Warehouse
from decguard_pipeline.warehouse.compaction import Settings, compact
from decguard_pipeline.warehouse.schema import TABLES

MEMORY_LIMIT = "4GB"
TABLES_WRITTEN = ("runs", "metrics", "gate_results", "case_results", "verdicts")
QUERIES = {
    "latest_metrics": "SELECT * FROM latest_metrics",
    "latest_case_results, 1 contract": "SELECT * FROM latest_case_results WHERE contract = 'c01'",
    "latest_all_checks": "SELECT * FROM latest_all_checks",
    "history: accuracy, every run": "SELECT contract, target, recorded_at, value FROM metrics "
    "WHERE metric = 'accuracy' ORDER BY contract, target, recorded_at",
}


def _column(values: list | np.ndarray, field: pa.Field) -> pa.Array:
    return pa.array(values, type=field.type)


def templates(contract: str, target: str, cases: int) -> dict[str, pa.Table]:
    """One evaluation's rows per table; run_id and recorded_at are set per night."""
    n = {"runs": 1, "metrics": 26, "gate_results": 6, "case_results": cases, "verdicts": 1}
    out = {}
    labels = ["refund", "reject", "review"]
    for table in TABLES_WRITTEN:
        schema, rows = TABLES[table], n[table]
        values: dict[str, object] = {
            "contract": [contract] * rows,
            "target": [target] * rows,
            "backend": [target.split("@")[0]] * rows,
            "model_version": [target.split("@")[1]] * rows,
        }
        if table == "metrics":
            values |= {"metric": ["accuracy", *(f"m{i}" for i in range(25))],
                       "value": np.linspace(0.5, 0.9, rows)}  # fmt: skip
        elif table == "gate_results":
            values |= {"source": ["golden"] * rows, "gate": [f"g{i}" for i in range(rows)],
                       "level": ["requirement"] * rows, "status": ["pass"] * rows,
                       "value": np.full(rows, 0.8)}  # fmt: skip
        elif table == "verdicts":
            values |= {"status": ["pass"], "approved": [True], "golden_status": ["pass"]}
        elif table == "runs":
            values |= {"n_cases": [cases], "n_labeled": [cases], "n_errored": [0],
                       "health_status": ["ok"], "wall_s": [1.5]}  # fmt: skip
        else:
            offsets = np.arange(0, 3 * rows + 1, 3, dtype=np.int32)
            probs = np.tile([0.6, 0.3, 0.1], rows)
            values |= {
                "position": np.arange(rows),
                "case_id": [f"case-{i}" for i in range(rows)],
                "input_text": [f"please refund order {i}, it arrived broken" for i in range(rows)],
                "expected": [labels[i % 3] for i in range(rows)],
                "labels": pa.ListArray.from_arrays(offsets, pa.array(labels * rows)),
                "probs": pa.ListArray.from_arrays(offsets, pa.array(probs)),
                "probabilities": pa.MapArray.from_arrays(
                    offsets, pa.array(labels * rows), pa.array(probs)
                ),
                "selected": ["refund"] * rows,
                "confidence": np.full(rows, 0.6),
                "correct": [i % 3 == 0 for i in range(rows)],
                "latency_ms": np.random.default_rng(0).random(rows) * 40,
            }
        arrays = [
            (values[f.name] if isinstance(values.get(f.name), pa.Array) else
             _column(values[f.name], f)) if f.name in values else pa.nulls(rows, f.type)
            for f in schema
        ]  # fmt: skip
        out[table] = pa.Table.from_arrays(arrays, schema=schema)
    return out


def fill(wh: Warehouse, days: int, contracts: int, targets: int, cases: int) -> int:
    """``days`` nights of evaluations, the last one last night; returns the files written."""
    first = datetime.now(UTC).replace(hour=2, minute=0, second=0, microsecond=0)
    first -= timedelta(days=days)
    files = 0
    for c in range(contracts):
        contract = f"c{c:02d}"
        for t in range(targets):
            target = f"backend{t}@model-v{t + 1}"
            rows = templates(contract, target, cases)
            folders = {}
            for table in TABLES_WRITTEN:
                folders[table] = wh.partition_dir(table, contract, target)
                folders[table].mkdir(parents=True, exist_ok=True)
            for night in range(days):
                at = first + timedelta(days=night, seconds=60 * c + t)
                run = f"nightly-{night:03d}-{c:02d}{t}"
                name = f"{at.strftime('%Y%m%dT%H%M%S%fZ')}_{run}.parquet"
                for table, data in rows.items():
                    n = data.num_rows
                    data = data.set_column(2, "run_id", pa.array([run] * n))
                    data = data.set_column(
                        3, "recorded_at", pa.array([at] * n, data["recorded_at"].type)
                    )
                    pq.write_table(data, folders[table] / name, compression="zstd")
                    files += 1
    return files


def best_ms(open_con, sql: str, repeat: int) -> tuple[float, int]:
    """Best time of ``repeat`` runs and the rows returned; (nan, -1) when the query fails
    (within a 4 GiB memory limit: the machine is shared)."""
    times, rows = [], 0
    for _ in range(repeat):
        start = time.perf_counter()
        with open_con() as con:
            con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
            try:
                rows = len(con.execute(sql).fetchall())
            except duckdb.Error as exc:
                print(f"  failed: {sql[:40]}…: {str(exc).splitlines()[0]}")
                return float("nan"), -1
        times.append(time.perf_counter() - start)
    return min(times) * 1000, rows


def previous_views(wh: Warehouse):
    """The views of the previous version: every file's footer read (union_by_name), no
    manifest; latest_* over the whole table."""
    hive = "hive_partitioning = true, hive_types = {'contract': 'VARCHAR', 'target': 'VARCHAR'}"

    def open_con():
        con = duckdb.connect()
        for table in TABLES:
            pattern = str(wh.root / table / "contract=*" / "target=*" / "[0-9]*_[!~]*.parquet")
            con.execute(
                f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{pattern}', "
                f"union_by_name = true, {hive})"
            )
            con.execute(
                f"CREATE VIEW latest_{table} AS SELECT * EXCLUDE (_rank) FROM (SELECT *, "
                "dense_rank() OVER (PARTITION BY contract, target ORDER BY recorded_at DESC, "
                f"run_id DESC) AS _rank FROM {table}) WHERE _rank = 1"
            )
        checks = ["gate_results", *(t for t in TABLES if t.endswith("_checks"))]
        union = " UNION ALL BY NAME ".join(f"SELECT * FROM latest_{t}" for t in checks)
        con.execute(f"CREATE VIEW latest_all_checks AS {union}")
        return con

    return open_con


def files_of(wh: Warehouse) -> int:
    return sum(1 for _ in wh.root.glob("*/contract=*/target=*/[0-9]*.parquet"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--contracts", type=int, default=20)
    parser.add_argument("--targets", type=int, default=3)
    parser.add_argument("--cases", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-previous", action="store_true", help="skip the previous views")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}; best of {args.repeat}")
    with tempfile.TemporaryDirectory() as tmp:
        wh = Warehouse(Path(tmp) / "wh")
        start = time.perf_counter()
        written = fill(wh, args.days, args.contracts, args.targets, args.cases)
        wh.ensure_catalog()
        print(f"{written:,} files written in {time.perf_counter() - start:.0f} s "
              f"({args.days} nights x {args.contracts} contracts x {args.targets} targets "
              f"x {len(TABLES_WRITTEN)} tables, {args.cases} cases each)")  # fmt: skip
        results: dict[str, dict[str, tuple[float, int]]] = {}
        if not args.no_previous:
            old = previous_views(wh)
            results["previous views"] = {  # seconds a query: two runs are enough
                q: best_ms(old, sql, min(args.repeat, 2)) for q, sql in QUERIES.items()
            }
        results["before"] = {
            q: best_ms(wh.open_catalog, sql, args.repeat) for q, sql in QUERIES.items()
        }
        before_files = files_of(wh)
        start = time.perf_counter()
        result = compact(wh, Settings(grace_s=1.0), log=lambda line: None)
        took = time.perf_counter() - start
        after_files = files_of(wh)
        print(f"compaction: {took:.0f} s (of which {result.waited_s:.0f} s waiting for the "
              f"switch and the grace period); files {before_files:,} -> {after_files:,} "
              f"({before_files / max(after_files, 1):.0f}x fewer)")  # fmt: skip
        results["after"] = {
            q: best_ms(wh.open_catalog, sql, args.repeat) for q, sql in QUERIES.items()
        }
    print(f"\n{'query':<34} " + " ".join(f"{k:>22}" for k in results) + f" {'before/after':>13}")
    for q in QUERIES:
        cells = [f"{ms:>10.1f} ms {rows:>8,}" for ms, rows in (results[k][q] for k in results)]
        ratio = results["before"][q][0] / results["after"][q][0]
        print(f"{q:<34} " + " ".join(cells) + f" {ratio:>12.1f}x")


if __name__ == "__main__":
    main()
